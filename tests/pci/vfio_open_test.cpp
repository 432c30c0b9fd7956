// The vfio backend's open path up to the first ioctl, against fake trees: every refusal it can
// make before the kernel is asked, its choice between the device cdev and the group, and that the
// first ioctl on a node that is not VFIO fails loudly. (The ioctls themselves run under QEMU.)
#include "base/error.hpp"
#include "drivers/pci/iommu_group.hpp"
#include "drivers/pci/open.hpp"
#include "fake_kernel.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace vfio_open_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::pci;
using namespace baregpu::pci::testing;

namespace {

const PciAddress kGpu{0, 0x03, 0x00, 0};

struct VfioRig {
    FakeKernel kernel;
    OpenOptions options;
    VfioRig() : options(kernel.options(Backend::Vfio)) {
        FakeFunction f = navi31_like();
        kernel.add_function(kGpu, f);
        kernel.add_to_group(kGpu, 14);
        kernel.add_driver("vfio-pci");
        kernel.bind(kGpu, "vfio-pci");
    }
    std::string open_error() {
        try {
            open_device(kGpu, options);
        } catch (const Error& e) {
            return e.what();
        }
        return "opened";
    }
};

}  // namespace

TEST_CASE("vfio open: no IOMMU group, and no-IOMMU mode only when allowed and available") {
    VfioRig rig;
    std::filesystem::remove(rig.kernel.device_dir(kGpu) + "/iommu_group");
    CHECK_THAT(rig.open_error(), Catch::Contains("has no IOMMU group") && Catch::Contains("intel_iommu=on") &&
                                     Catch::Contains("--allow-noiommu"));

    rig.options.allow_noiommu = true;
    CHECK_THAT(rig.open_error(), Catch::Contains("no VFIO no-IOMMU mode") && Catch::Contains("CONFIG_VFIO_NOIOMMU"));

    std::string parameter = rig.kernel.sysfs() + "/module/vfio/parameters/enable_unsafe_noiommu_mode";
    std::filesystem::create_directories(std::filesystem::path(parameter).parent_path());
    rig.kernel.write_file(parameter, "N\n");
    CHECK_THAT(rig.open_error(), Catch::Contains("no-IOMMU mode is off") && Catch::Contains("echo Y"));

    // Allowed and on, but the function is on vfio-pci without a group: vfio-pci made none.
    rig.kernel.write_file(parameter, "Y\n");
    CHECK_THAT(rig.open_error(), Catch::Contains("made no no-IOMMU group"));
}

TEST_CASE("vfio open: a no-IOMMU group needs --allow-noiommu; with it the group node is noiommu-N") {
    VfioRig rig;
    rig.kernel.add_to_group(kGpu, 14, "vfio-noiommu");
    CHECK_THAT(rig.open_error(), Catch::Contains("vfio group 14, a no-IOMMU group") &&
                                     Catch::Contains("--allow-noiommu"));
    rig.options.allow_noiommu = true;
    rig.kernel.add_dev_file("vfio/vfio");
    // The fake container is a plain file, so the first ioctl fails; what matters is we got there.
    CHECK_THAT(rig.open_error(), Catch::Contains("is not a VFIO container"));
    rig.options.vfio_interface = VfioInterface::Cdev;
    CHECK_THAT(rig.open_error(), Catch::Contains("no-IOMMU mode is opened through the group"));
}

TEST_CASE("vfio open: vfio-pci not loaded, a function on another driver, a group held by a sibling") {
    VfioRig rig;
    std::filesystem::remove_all(rig.kernel.sysfs() + "/bus/pci/drivers/vfio-pci");
    CHECK_THAT(rig.open_error(), Catch::Contains("vfio-pci driver is not loaded") &&
                                     Catch::Contains("sudo modprobe vfio-pci"));
    rig.kernel.add_driver("vfio-pci");

    rig.kernel.bind(kGpu, "amdgpu");
    CHECK(rig.open_error() ==
          "0000:03:00.0: bound to amdgpu, not vfio-pci: unbind it or pass --bind-vfio; see udev/README.md");

    rig.kernel.bind(kGpu, "vfio-pci");
    PciAddress audio{0, 3, 0, 1};
    FakeFunction hda;
    hda.config.assign(256, 0);
    hda.class_code = 0x040300;
    rig.kernel.add_function(audio, hda);
    rig.kernel.add_to_group(audio, 14);
    rig.kernel.bind(audio, "snd_hda_intel");
    CHECK(rig.open_error() == "0000:03:00.0: vfio group 14 is not viable: 0000:03:00.1 is still bound to "
                              "snd_hda_intel; bind it to vfio-pci too (or pass --bind-vfio); see udev/README.md");
}

TEST_CASE("vfio open: the group path's own failures: missing container, not a container, no permission") {
    VfioRig rig;
    CHECK_THAT(rig.open_error(), Catch::Contains("/dev/vfio/vfio does not exist") && Catch::Contains("devtmpfs"));

    rig.kernel.add_dev_file("vfio/vfio");
    CHECK_THAT(rig.open_error(), Catch::Contains("is not a VFIO container: VFIO_GET_API_VERSION failed") &&
                                     Catch::Contains("errno 25"));  // ENOTTY

    if (::geteuid() == 0) {
        std::string container = rig.kernel.dev() + "/vfio/vfio";
        REQUIRE(::chmod(container.c_str(), 0600) == 0);
        OpenOptions options = rig.options;
        std::string out = run_as_nobody([&] {
            try {
                open_device(kGpu, options);
            } catch (const Error& e) {
                return std::string(e.what());
            }
            return std::string("opened");
        });
        CHECK_THAT(out, Catch::Contains("permission denied opening " + container) &&
                            Catch::Contains("baregpu") && Catch::Contains("udev/README.md"));
    } else {
        WARN("skipped the permission case: it drops root in a child, and we are not root");
    }
}

TEST_CASE("vfio open: the device cdev is used when the kernel offers it, else the group (Linux 6.1)") {
    VfioRig rig;
    rig.kernel.add_dev_file("vfio/vfio");

    SECTION("a vfio-dev entry without a char device (Debian 12's 6.1): Auto takes the group, Cdev says why not") {
        // 6.1 registers the vfio device in sysfs but gives it no dev_t, hence no `dev` file.
        std::filesystem::create_directories(rig.kernel.device_dir(kGpu) + "/vfio-dev/vfio0");
        rig.kernel.add_dev_file("iommu");
        CHECK_THAT(rig.open_error(), Catch::Contains("is not a VFIO container"));
        rig.options.vfio_interface = VfioInterface::Cdev;
        CHECK_THAT(rig.open_error(), Catch::Contains("no vfio-dev/vfioN/dev") && Catch::Contains("Linux 6.6+"));
    }
    SECTION("a device cdev but no /dev/iommu: still the group") {
        std::filesystem::create_directories(rig.kernel.device_dir(kGpu) + "/vfio-dev/vfio0");
        rig.kernel.write_file(rig.kernel.device_dir(kGpu) + "/vfio-dev/vfio0/dev", "511:0\n");
        rig.kernel.add_dev_file("vfio/devices/vfio0");
        CHECK_THAT(rig.open_error(), Catch::Contains("is not a VFIO container"));
        rig.options.vfio_interface = VfioInterface::Cdev;
        CHECK_THAT(rig.open_error(), Catch::Contains("/iommu does not exist"));
    }
    SECTION("vfio-dev entry, its node and /dev/iommu: the cdev path, unless the group is forced") {
        std::filesystem::create_directories(rig.kernel.device_dir(kGpu) + "/vfio-dev/vfio0");
        rig.kernel.write_file(rig.kernel.device_dir(kGpu) + "/vfio-dev/vfio0/dev", "511:0\n");
        rig.kernel.add_dev_file("vfio/devices/vfio0");
        rig.kernel.add_dev_file("iommu");
        CHECK_THAT(rig.open_error(), Catch::Contains("VFIO_DEVICE_BIND_IOMMUFD") &&
                                         Catch::Contains("/vfio/devices/vfio0"));
        rig.options.vfio_interface = VfioInterface::Group;
        CHECK_THAT(rig.open_error(), Catch::Contains("is not a VFIO container"));
    }
}

TEST_CASE("vfio open: --bind-vfio binds through sysfs before opening") {
    VfioRig rig;
    rig.kernel.bind(kGpu, "amdgpu");
    CHECK_THAT(rig.open_error(), Catch::Contains("bound to amdgpu, not vfio-pci"));
    rig.options.bind_vfio = true;
    rig.kernel.add_dev_file("vfio/14");  // what udev would create once vfio-pci has the group
    {
        FakePciCore core(rig.kernel);
        // Bound, then on to the container, which this tree lacks.
        CHECK_THAT(rig.open_error(), Catch::Contains("/dev/vfio/vfio does not exist"));
    }
    CHECK(rig.kernel.read_file(rig.kernel.device_dir(kGpu) + "/driver_override") == "vfio-pci");
    CHECK(rig.kernel.read_file(rig.kernel.sysfs() + "/bus/pci/drivers/amdgpu/unbind") == "0000:03:00.0");
    CHECK(read_iommu_group(rig.kernel.sysfs(), kGpu)->members[0].driver == "vfio-pci");
}

}  // namespace vfio_open_test
