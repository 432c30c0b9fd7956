// IOMMU group analysis and binding decisions against fake sysfs trees: which functions hold a
// group up, the exact words the user gets, and the sysfs writes that move a function to vfio-pci.
#include "base/error.hpp"
#include "drivers/pci/iommu_group.hpp"
#include "drivers/pci/vfio_bind.hpp"
#include "fake_kernel.hpp"

#include <catch2/catch.hpp>
#include <atomic>
#include <filesystem>
#include <thread>

namespace iommu_group_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::pci;
using namespace baregpu::pci::testing;
using namespace std::chrono_literals;

namespace {

const PciAddress kGpu{0, 0x03, 0x00, 0};
const PciAddress kAudio{0, 0x03, 0x00, 1};
const PciAddress kRootPort{0, 0x00, 0x01, 1};

FakeFunction function_of_class(uint32_t class_code) {
    FakeFunction f;
    f.config.assign(256, 0);
    f.class_code = class_code;
    return f;
}

// A discrete GPU as desktops group it: the GPU, its HDMI audio, and the root port above them.
struct GpuGroup {
    FakeKernel kernel;
    GpuGroup(const std::string& gpu_driver, const std::string& audio_driver) {
        kernel.add_function(kGpu, function_of_class(0x030000));
        kernel.add_function(kAudio, function_of_class(0x040300));
        kernel.add_function(kRootPort, function_of_class(0x060400));
        for (PciAddress a : {kGpu, kAudio, kRootPort}) kernel.add_to_group(a, 14);
        if (!gpu_driver.empty()) kernel.bind(kGpu, gpu_driver);
        if (!audio_driver.empty()) kernel.bind(kAudio, audio_driver);
        kernel.bind(kRootPort, "pcieport");
        kernel.add_driver("vfio-pci");
    }
    IommuGroup group() { return read_iommu_group(kernel.sysfs(), kGpu).value(); }
};

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("iommu group: members, their drivers and classes are read from sysfs") {
    GpuGroup rig("amdgpu", "snd_hda_intel");
    IommuGroup g = rig.group();
    CHECK(g.id == 14);
    CHECK_FALSE(g.noiommu);
    REQUIRE(g.members.size() == 3);
    CHECK(g.members[0].address == kRootPort);  // sorted by address
    CHECK(g.members[0].driver == "pcieport");
    CHECK(g.members[0].is_bridge());
    CHECK(g.members[1].address == kGpu);
    CHECK(g.members[1].driver == "amdgpu");
    CHECK(g.members[1].class_code == 0x030000);
    CHECK(g.members[2].address == kAudio);
    CHECK(g.members[2].driver == "snd_hda_intel");
    CHECK_FALSE(g.members[2].is_bridge());

    rig.kernel.unbind(kAudio);
    CHECK_FALSE(rig.group().members[2].driver.has_value());
}

TEST_CASE("iommu group: none without an IOMMU; a missing function is an error") {
    FakeKernel kernel;
    kernel.add_function(kGpu, function_of_class(0x030000));
    CHECK_FALSE(read_iommu_group(kernel.sysfs(), kGpu).has_value());
    CHECK_THROWS_WITH(read_iommu_group(kernel.sysfs(), kAudio), Catch::Contains("0000:03:00.1") &&
                                                                    Catch::Contains("does not exist"));
}

TEST_CASE("iommu group: a no-IOMMU group is recognised by its name") {
    FakeKernel kernel;
    kernel.add_function(kGpu, function_of_class(0x030000));
    kernel.add_to_group(kGpu, 3, "vfio-noiommu");
    CHECK(read_iommu_group(kernel.sysfs(), kGpu)->noiommu);
}

TEST_CASE("viability: which drivers may stay bound in a VFIO group") {
    CHECK(is_vfio_driver("vfio-pci"));
    CHECK(is_vfio_driver("mlx5_vfio_pci"));
    CHECK(is_vfio_driver("nvgrace-gpu-vfio-pci"));
    CHECK_FALSE(is_vfio_driver("amdgpu"));
    CHECK_FALSE(is_vfio_driver("vfio"));
    CHECK(is_viable_driver("pci-stub"));
    CHECK(is_viable_driver("pcieport"));
    CHECK(is_viable_driver("vfio-pci"));
    CHECK_FALSE(is_viable_driver("snd_hda_intel"));
    CHECK_FALSE(is_viable_driver("nvidia"));
}

TEST_CASE("binding decisions: the exact words for each situation") {
    SECTION("target on another driver, no --bind-vfio") {
        GpuGroup rig("amdgpu", "");
        CHECK(error_of([&] { plan_vfio_binding(rig.group(), kGpu, false); }) ==
              "0000:03:00.0: bound to amdgpu, not vfio-pci: unbind it or pass --bind-vfio; see udev/README.md");
        CHECK_THROWS_AS(plan_vfio_binding(rig.group(), kGpu, false), UnsupportedError);
    }
    SECTION("target on no driver") {
        GpuGroup rig("", "");
        CHECK(error_of([&] { plan_vfio_binding(rig.group(), kGpu, false); }) ==
              "0000:03:00.0: bound to no driver, not vfio-pci: bind it to vfio-pci (driver_override) or pass "
              "--bind-vfio; see udev/README.md");
    }
    SECTION("target ready, a sibling holds the group") {
        GpuGroup rig("vfio-pci", "snd_hda_intel");
        CHECK(error_of([&] { plan_vfio_binding(rig.group(), kGpu, false); }) ==
              "0000:03:00.0: vfio group 14 is not viable: 0000:03:00.1 is still bound to snd_hda_intel; bind it to "
              "vfio-pci too (or pass --bind-vfio); see udev/README.md");
    }
    SECTION("two siblings hold it") {
        GpuGroup rig("vfio-pci", "snd_hda_intel");
        PciAddress usb{0, 3, 0, 2};
        rig.kernel.add_function(usb, function_of_class(0x0c0330));
        rig.kernel.add_to_group(usb, 14);
        rig.kernel.bind(usb, "xhci_hcd");
        CHECK_THAT(error_of([&] { plan_vfio_binding(rig.group(), kGpu, false); }),
                   Catch::Contains("0000:03:00.1 is still bound to snd_hda_intel and 0000:03:00.2 is still bound to "
                                   "xhci_hcd; bind them to vfio-pci too"));
    }
    SECTION("everything ready: nothing to do; the root port on pcieport and an unbound sibling are fine") {
        GpuGroup rig("vfio-pci", "");
        CHECK(plan_vfio_binding(rig.group(), kGpu, false).empty());
        rig.kernel.bind(kAudio, "pci-stub");
        CHECK(plan_vfio_binding(rig.group(), kGpu, false).empty());
    }
    SECTION("with --bind-vfio: the target first, then the blocking siblings, never the root port") {
        GpuGroup rig("amdgpu", "snd_hda_intel");
        BindingPlan plan = plan_vfio_binding(rig.group(), kGpu, true);
        REQUIRE(plan.to_bind.size() == 2);
        CHECK(plan.to_bind[0].address == kGpu);
        CHECK(plan.to_bind[0].driver == "amdgpu");
        CHECK(plan.to_bind[1].address == kAudio);
    }
}

TEST_CASE("binding: driver_override, unbind, drivers_probe, then the kernel's answer is awaited") {
    GpuGroup rig("amdgpu", "snd_hda_intel");
    BindingPlan plan = plan_vfio_binding(rig.group(), kGpu, true);

    {
        FakePciCore core(rig.kernel);
        execute_binding(rig.kernel.sysfs(), plan, 5s);
    }

    for (PciAddress a : {kGpu, kAudio}) {
        CHECK(rig.kernel.read_file(rig.kernel.device_dir(a) + "/driver_override") == "vfio-pci");
    }
    // Each function was unbound from its own driver by writing its address there.
    CHECK(rig.kernel.read_file(rig.kernel.sysfs() + "/bus/pci/drivers/amdgpu/unbind") == "0000:03:00.0");
    CHECK(rig.kernel.read_file(rig.kernel.sysfs() + "/bus/pci/drivers/snd_hda_intel/unbind") == "0000:03:00.1");
    CHECK(plan_vfio_binding(rig.group(), kGpu, false).empty());
    CHECK(rig.group().members[0].driver == "pcieport");  // untouched
}

TEST_CASE("binding: a kernel that does not bind is a timeout that says what it found") {
    GpuGroup rig("amdgpu", "");
    BindingPlan plan = plan_vfio_binding(rig.group(), kGpu, true);
    auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(execute_binding(rig.kernel.sysfs(), plan, 50ms), TimeoutError);
    CHECK(std::chrono::steady_clock::now() - start < 2s);
    CHECK_THROWS_WITH(execute_binding(rig.kernel.sysfs(), plan, 20ms),
                      Catch::Contains("waited 20 ms") && Catch::Contains("bound to amdgpu"));
}

TEST_CASE("binding: vfio-pci must be loaded") {
    FakeKernel kernel;
    CHECK_THROWS_WITH(check_vfio_pci_loaded(kernel.sysfs(), "0000:03:00.0"), Catch::Contains("modprobe vfio-pci"));
    kernel.add_driver("vfio-pci");
    CHECK_NOTHROW(check_vfio_pci_loaded(kernel.sysfs(), "0000:03:00.0"));
}

}  // namespace iommu_group_test
