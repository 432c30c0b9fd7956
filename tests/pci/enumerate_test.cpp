// GPU enumeration against a fake sysfs tree and a small pci.ids: which functions are listed,
// what they are named, the driver / render node / IOMMU group / owner read from the tree, and
// the backend verdict each gets.
#include "base/error.hpp"
#include "drivers/pci/device_lock.hpp"
#include "drivers/pci/enumerate.hpp"
#include "tests/pci/fake_sysfs.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <unistd.h>

namespace enumerate_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::pci;
using baregpu::test::FakeFunction;
using baregpu::test::FakeSysfs;
using baregpu::test::TempDir;

namespace {

// The pci.ids format: vendor lines, tab-indented device lines, two-tab subsystem lines, and
// "C" class sections. Names as the PCI ID Repository spells them.
constexpr const char* kPciIds =
    "# test excerpt\n"
    "1002  Advanced Micro Devices, Inc. [AMD/ATI]\n"
    "\t744c  Navi 31 [Radeon RX 7900 XT/7900 XTX]\n"
    "\t\t1da2 e471  NITRO+ RX 7900 XTX Vapor-X\n"
    "\t7550  Navi 48 [Radeon RX 9070/9070 XT/9070 GRE]\n"
    "\tab30  Navi 31 HDMI/DP Audio\n"
    "10de  NVIDIA Corporation\n"
    "\t1d10  GP108M [GeForce MX150]\n"
    "\t2684  AD102 [GeForce RTX 4090]\n"
    "1da2  Sapphire Technology Limited\n"
    "8086  Intel Corporation\n"
    "C 02  Network controller\n"
    "\t00  Ethernet controller\n"
    "C 03  Display controller\n"
    "\t00  VGA compatible controller\n"
    "\t02  3D controller\n"
    "\t80  Display controller\n"
    "C 04  Multimedia controller\n"
    "\t03  Audio device\n"
    "C 12  Processing accelerators\n"
    "\t00  Processing accelerators\n";

struct Machine {
    FakeSysfs sysfs;
    TempDir ids_dir;
    EnumerateOptions options;

    Machine() {
        options.sysfs_root = sysfs.root().string();
        options.pci_ids = (ids_dir.path() / "pci.ids").string();
        FakeSysfs::write(options.pci_ids, kPciIds);
        sysfs.make_empty_bus();
    }
};

// Points DeviceLock at a private directory for the test's lifetime.
struct LockDir {
    TempDir dir;
    std::string saved;
    bool had = false;
    LockDir() {
        if (const char* old = std::getenv("BAREGPU_LOCK_DIR")) {
            had = true;
            saved = old;
        }
        ::setenv("BAREGPU_LOCK_DIR", dir.path().c_str(), 1);
    }
    ~LockDir() {
        if (had) {
            ::setenv("BAREGPU_LOCK_DIR", saved.c_str(), 1);
        } else {
            ::unsetenv("BAREGPU_LOCK_DIR");
        }
    }
};

const GpuFunction& find(const Enumeration& e, const std::string& address) {
    for (const GpuFunction& gpu : e.gpus) {
        if (gpu.address.to_string() == address) return gpu;
    }
    FAIL("no GPU at " << address);
    throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("only display controllers and processing accelerators are listed, in address order") {
    Machine m;
    m.sysfs.add(FakeFunction("0000:00:1f.6", 0x8086, 0x15b8, 0x020000));  // Ethernet: not a GPU
    m.sysfs.add(FakeFunction("0000:03:00.1", 0x1002, 0xab30, 0x040300));  // the GPU's audio function: not a GPU
    m.sysfs.add(FakeFunction("0001:02:00.0", 0x1e52, 0xb140, 0x120000));  // an accelerator, other domain
    m.sysfs.add(FakeFunction("0000:03:00.0", 0x1002, 0x744c, 0x030000));
    m.sysfs.add(FakeFunction("0000:05:00.0", 0x10de, 0x1d10, 0x030200));  // 3D controller
    LockDir locks;
    Enumeration e = enumerate_gpus(m.options);
    REQUIRE(e.gpus.size() == 3);
    CHECK(e.gpus[0].address.to_string() == "0000:03:00.0");
    CHECK(e.gpus[1].address.to_string() == "0000:05:00.0");
    CHECK(e.gpus[2].address.to_string() == "0001:02:00.0");
    CHECK(e.warnings.empty());
}

TEST_CASE("names come from pci.ids, with a numeric fallback for unknown IDs") {
    Machine m;
    m.sysfs.add(FakeFunction("0000:03:00.0", 0x1002, 0x744c, 0x030000).rev(0xc8).subsystem(0x1da2, 0xe471));
    m.sysfs.add(FakeFunction("0001:02:00.0", 0x1e52, 0xb140, 0x120000).rev(0x01));
    LockDir locks;
    Enumeration e = enumerate_gpus(m.options);

    const GpuFunction& amd = find(e, "0000:03:00.0");
    CHECK(amd.vendor_id == 0x1002);
    CHECK(amd.device_id == 0x744c);
    CHECK(amd.revision == 0xc8);
    CHECK(amd.class_code == 0x030000);
    CHECK(amd.vendor_name == "Advanced Micro Devices, Inc. [AMD/ATI]");
    CHECK(amd.device_name == "Navi 31 [Radeon RX 7900 XT/7900 XTX]");
    CHECK(amd.class_name == "VGA compatible controller");
    CHECK(amd.subsystem_vendor_id == 0x1da2);
    CHECK(amd.subsystem_id == 0xe471);
    CHECK(amd.subsystem_name == "Sapphire Technology Limited NITRO+ RX 7900 XTX Vapor-X");

    const GpuFunction& unknown = find(e, "0001:02:00.0");
    CHECK(unknown.vendor_name == "Vendor 1e52");
    CHECK(unknown.device_name == "Device b140");
    CHECK(unknown.class_name == "Processing accelerators");
    CHECK(unknown.subsystem_name.empty());
}

TEST_CASE("driver, render node, IOMMU group and its peers are read from the tree") {
    Machine m;
    m.sysfs.add(FakeFunction("0000:03:00.0", 0x1002, 0x744c, 0x030000).rev(0xc8).bound_to("amdgpu").group(14).render("renderD128"));
    m.sysfs.add(FakeFunction("0000:03:00.1", 0x1002, 0xab30, 0x040300).bound_to("snd_hda_intel").group(14));
    m.sysfs.add(FakeFunction("0000:05:00.0", 0x10de, 0x1d10, 0x030200));
    LockDir locks;
    Enumeration e = enumerate_gpus(m.options);

    const GpuFunction& amd = find(e, "0000:03:00.0");
    CHECK(amd.driver == "amdgpu");
    CHECK(amd.render_node == "/dev/dri/renderD128");
    REQUIRE(amd.iommu_group == 14u);
    REQUIRE(amd.iommu_group_peers.size() == 1);
    CHECK(amd.iommu_group_peers[0].address == "0000:03:00.1");
    CHECK(amd.iommu_group_peers[0].driver == "snd_hda_intel");
    CHECK_FALSE(amd.owner.has_value());

    const GpuFunction& bare = find(e, "0000:05:00.0");
    CHECK(bare.driver.empty());
    CHECK(bare.render_node.empty());
    CHECK_FALSE(bare.iommu_group.has_value());
    CHECK(bare.iommu_group_peers.empty());
}

TEST_CASE("each GPU gets the backend verdict of its IDs, driver and group") {
    Machine m;
    m.sysfs.add(FakeFunction("0000:03:00.0", 0x1002, 0x744c, 0x030000).rev(0xc8).bound_to("amdgpu").group(14).render("renderD128"));
    m.sysfs.add(FakeFunction("0000:04:00.0", 0x10de, 0x2684, 0x030000).rev(0xa1).bound_to("vfio-pci").group(15));
    m.sysfs.add(FakeFunction("0000:04:00.1", 0x10de, 0x22ba, 0x040300).rev(0xa1).bound_to("vfio-pci").group(15));
    m.sysfs.add(FakeFunction("0000:07:00.0", 0x1002, 0x7550, 0x038000).rev(0xc0).bound_to("vfio-pci").group(20));
    m.sysfs.add(FakeFunction("0000:07:00.1", 0x1002, 0xab40, 0x040300).bound_to("snd_hda_intel").group(20));
    m.sysfs.add(FakeFunction("0000:05:00.0", 0x10de, 0x1d10, 0x030200));
    m.sysfs.add(FakeFunction("0000:06:00.0", 0x8086, 0x56a0, 0x030000).rev(0x08).bound_to("i915").group(3));
    LockDir locks;
    Enumeration e = enumerate_gpus(m.options);
    REQUIRE(e.gpus.size() == 5);

    const BackendVerdict& navi31 = find(e, "0000:03:00.0").verdict;
    CHECK(navi31.backend == "am");
    CHECK(navi31.family == "Navi31 (RDNA3, GC 11.0.0)");
    CHECK_FALSE(navi31.ready);
    CHECK(navi31.reason == "bound to amdgpu: unbind or use vfio-pci (udev/README.md)");

    const BackendVerdict& ad102 = find(e, "0000:04:00.0").verdict;
    CHECK(ad102.backend == "nv");
    CHECK(ad102.ready);
    CHECK(ad102.uri == "nv:0000:04:00.0");
    CHECK(ad102.reason == "ready via vfio (IOMMU group 15): open as nv:0000:04:00.0");

    const BackendVerdict& navi48 = find(e, "0000:07:00.0").verdict;
    CHECK(navi48.backend == "am");
    CHECK_FALSE(navi48.ready);
    CHECK(navi48.reason == "IOMMU group 20 is not viable: 0000:07:00.1 is bound to snd_hda_intel; bind it to "
                           "vfio-pci too (udev/README.md)");

    const BackendVerdict& pascal = find(e, "0000:05:00.0").verdict;
    CHECK(pascal.backend.empty());
    CHECK(pascal.uri.empty());
    CHECK_THAT(pascal.reason, Catch::StartsWith("NVIDIA 10de:1d10 is not a GPU baregpu drives"));

    const BackendVerdict& intel = find(e, "0000:06:00.0").verdict;
    CHECK(intel.backend.empty());
    CHECK_THAT(intel.reason, Catch::StartsWith("no baregpu backend for vendor 8086"));
}

TEST_CASE("a GPU held through DeviceLock shows its owner's pid") {
    Machine m;
    m.sysfs.add(FakeFunction("0000:04:00.0", 0x10de, 0x2684, 0x030000).rev(0xa1).bound_to("vfio-pci").group(15));
    LockDir locks;
    {
        DeviceLock lock = DeviceLock::acquire("0000:04:00.0");
        Enumeration e = enumerate_gpus(m.options);
        REQUIRE(e.gpus.size() == 1);
        CHECK(e.gpus[0].owner == ::getpid());
        CHECK_FALSE(e.gpus[0].verdict.ready);
        CHECK_THAT(e.gpus[0].verdict.reason, Catch::StartsWith("in use by process " + std::to_string(::getpid())));
    }
    Enumeration after = enumerate_gpus(m.options);
    CHECK_FALSE(after.gpus[0].owner.has_value());
    CHECK(after.gpus[0].verdict.ready);
}

TEST_CASE("an empty bus lists nothing and warns about nothing") {
    Machine m;
    Enumeration e = enumerate_gpus(m.options);
    CHECK(e.gpus.empty());
    CHECK(e.warnings.empty());
}

TEST_CASE("a missing pci.ids is a warning, and names fall back to numbers") {
    Machine m;
    m.options.pci_ids = (m.ids_dir.path() / "absent.ids").string();
    m.sysfs.add(FakeFunction("0000:03:00.0", 0x1002, 0x744c, 0x030000));
    LockDir locks;
    Enumeration e = enumerate_gpus(m.options);
    REQUIRE(e.gpus.size() == 1);
    CHECK(e.gpus[0].device_name == "Device 744c");
    REQUIRE(e.warnings.size() == 1);
    CHECK_THAT(e.warnings[0], Catch::Contains("absent.ids") && Catch::Contains("names are numeric"));
}

TEST_CASE("no PCI bus in the tree is an UnsupportedError that says where it looked") {
    TempDir empty;
    EnumerateOptions options;
    options.sysfs_root = empty.path().string();
    CHECK_THROWS_AS(enumerate_gpus(options), UnsupportedError);
    CHECK_THROWS_WITH(enumerate_gpus(options), Catch::Contains((empty.path() / "bus/pci/devices").string()));
}

TEST_CASE("a function without its mandatory vendor file is an error from libpci, not an exit") {
    Machine m;
    m.sysfs.add(FakeFunction("0000:03:00.0", 0x1002, 0x744c, 0x030000));
    std::filesystem::remove(m.sysfs.root() / "bus/pci/devices/0000:03:00.0/vendor");
    CHECK_THROWS_WITH(enumerate_gpus(m.options), Catch::Contains("libpci") && Catch::Contains("vendor"));
}

}  // namespace enumerate_test
