// The backend verdict for every combination that matters: vendor, known / unknown device ID,
// bound driver, IOMMU group viability. And the ID tables' facts.
#include "drivers/pci/backend_verdict.hpp"
#include "drivers/pci/gpu_ids.hpp"

#include <catch2/catch.hpp>

namespace backend_verdict_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu::pci;

namespace {

VerdictInput input(std::string address, uint16_t vendor, uint16_t device, std::string driver = "",
                   std::optional<unsigned> group = std::nullopt, std::vector<IommuGroupPeer> peers = {}) {
    VerdictInput in;
    in.address = std::move(address);
    in.vendor_id = vendor;
    in.device_id = device;
    in.driver = std::move(driver);
    in.iommu_group = group;
    in.iommu_group_peers = std::move(peers);
    return in;
}

VerdictInput navi31(std::string driver, std::optional<unsigned> group = 14, std::vector<IommuGroupPeer> peers = {}) {
    return input("0000:03:00.0", kVendorAmd, 0x744c, std::move(driver), group, std::move(peers));
}

}  // namespace

TEST_CASE("ID tables: the driven chips, their siblings, and what is not known") {
    auto navi31_family = find_gpu_family(kVendorAmd, 0x744c);
    REQUIRE(navi31_family);
    CHECK(navi31_family->backend == "am");
    CHECK(navi31_family->chip == "Navi31");
    CHECK(navi31_family->generation == "RDNA3, GC 11.0.0");
    CHECK(navi31_family->support == GpuSupport::Driven);

    auto navi48_family = find_gpu_family(kVendorAmd, 0x7550);
    REQUIRE(navi48_family);
    CHECK(navi48_family->generation == "RDNA4, GC 12.0.1");
    CHECK(navi48_family->support == GpuSupport::Driven);
    CHECK(find_gpu_family(kVendorAmd, 0x7551)->chip == "Navi48");  // Radeon AI PRO R9700
    // Every Navi31 ID is driven (all GC 11.0.0, the same firmware), not just the RX 7900 XTX's.
    for (uint16_t id : {0x7448, 0x7449, 0x744a, 0x744b, 0x744c, 0x745e}) {
        INFO(id);
        CHECK(find_gpu_family(kVendorAmd, id)->chip == "Navi31");
        CHECK(find_gpu_family(kVendorAmd, id)->support == GpuSupport::Driven);
    }

    CHECK(find_gpu_family(kVendorAmd, 0x7480)->support == GpuSupport::NotDriven);  // Navi33
    CHECK(find_gpu_family(kVendorAmd, 0x7590)->chip == "Navi44");

    CHECK(find_gpu_family(kVendorNvidia, 0x2684)->chip == "AD102");  // RTX 4090
    CHECK(find_gpu_family(kVendorNvidia, 0x2684)->support == GpuSupport::Driven);
    CHECK(find_gpu_family(kVendorNvidia, 0x2b85)->chip == "GB202");  // RTX 5090
    CHECK(find_gpu_family(kVendorNvidia, 0x2b85)->support == GpuSupport::NotDriven);
    CHECK(find_gpu_family(kVendorNvidia, 0x2782)->generation == "Ada");  // AD104

    // Older generations and other vendors are not guessed at.
    CHECK_FALSE(find_gpu_family(kVendorAmd, 0x731f));  // Navi10, RDNA1
    CHECK_FALSE(find_gpu_family(kVendorAmd, 0x73bf));  // Navi21, RDNA2
    CHECK_FALSE(find_gpu_family(kVendorNvidia, 0x1d10));  // GP108, Pascal
    CHECK_FALSE(find_gpu_family(kVendorNvidia, 0x2204));  // GA102, Ampere
    CHECK_FALSE(find_gpu_family(kVendorNvidia, 0x2941));  // GB100: Blackwell, but not GB20x
    CHECK_FALSE(find_gpu_family(0x8086, 0x56a0));
    // Same device ID, other vendor: the tables are per vendor.
    CHECK_FALSE(find_gpu_family(kVendorNvidia, 0x744c));

    CHECK(driven_chips("am") == "Navi31 (RDNA3, GC 11.0.0) and Navi48 (RDNA4, GC 12.0.1)");
    CHECK(driven_chips("nv") == "GH100 (Hopper) and AD102 (Ada)");  // GH100 over nvidia.ko only
    CHECK(driven_chips("qcom") == "nothing");
}

TEST_CASE("bound to vfio-pci with a viable group: ready, with the URI to open") {
    BackendVerdict v = judge_backend(navi31("vfio-pci", 14, {{"0000:03:00.1", "vfio-pci"}, {"0000:00:01.1", "pcieport"}}));
    CHECK(v.backend == "am");
    CHECK(v.family == "Navi31 (RDNA3, GC 11.0.0)");
    CHECK(v.uri == "am:0000:03:00.0");
    CHECK(v.ready);
    CHECK(v.reason == "ready via vfio (IOMMU group 14): open as am:0000:03:00.0");
}

TEST_CASE("a GPU another process has locked is not ready, and says who holds it") {
    VerdictInput in = navi31("vfio-pci", 14);
    in.owner = 4242;
    BackendVerdict v = judge_backend(in);
    CHECK_FALSE(v.ready);
    CHECK(v.backend == "am");
    CHECK(v.reason == "in use by process 4242 (it holds the baregpu device lock); opens as am:0000:03:00.0 once it exits");
    in.owner = 0;
    CHECK_THAT(judge_backend(in).reason, Catch::StartsWith("in use by another baregpu process"));
    // The lock matters only once nothing else stands in the way.
    VerdictInput bound = navi31("amdgpu");
    bound.owner = 4242;
    CHECK_THAT(judge_backend(bound).reason, Catch::StartsWith("bound to amdgpu"));
}

TEST_CASE("unbound peers and pci-stub do not spoil a group; another driver does, and is named") {
    CHECK(judge_backend(navi31("vfio-pci", 14, {{"0000:03:00.1", ""}})).ready);
    CHECK(judge_backend(navi31("vfio-pci", 14, {{"0000:03:00.1", "pci-stub"}})).ready);
    BackendVerdict v = judge_backend(navi31("vfio-pci", 14, {{"0000:03:00.1", "snd_hda_intel"}}));
    CHECK_FALSE(v.ready);
    CHECK(v.backend == "am");
    CHECK(v.reason ==
          "IOMMU group 14 is not viable: 0000:03:00.1 is bound to snd_hda_intel; bind it to vfio-pci too (udev/README.md)");
}

TEST_CASE("not bound: bind to vfio-pci or use sysfs as root") {
    BackendVerdict v = judge_backend(navi31(""));
    CHECK(v.backend == "am");
    CHECK_FALSE(v.ready);
    CHECK(v.reason == "not bound: bind to vfio-pci (udev/README.md), or as root open am:0000:03:00.0?access=sysfs (the "
                      "sysfs backend: no IOMMU protection)");
}

TEST_CASE("bound to a kernel GPU driver: unbind or use vfio-pci") {
    for (const char* driver : {"amdgpu", "radeon", "nouveau", "nvidia"}) {
        BackendVerdict v = judge_backend(navi31(driver));
        CHECK_FALSE(v.ready);
        CHECK(v.reason == std::string("bound to ") + driver + ": unbind or use vfio-pci (udev/README.md)");
    }
    BackendVerdict stub = judge_backend(navi31("pci-stub"));
    CHECK(stub.reason == "bound to pci-stub: bind it to vfio-pci instead (udev/README.md)");
}

TEST_CASE("vfio-pci without an IOMMU group says how to get one") {
    BackendVerdict v = judge_backend(navi31("vfio-pci", std::nullopt));
    CHECK_FALSE(v.ready);
    CHECK_THAT(v.reason, Catch::Contains("in no IOMMU group") && Catch::Contains("amd_iommu=on"));
}

TEST_CASE("a sibling of a driven chip is named but not driven: no backend, no URI, and which chips are driven") {
    BackendVerdict v = judge_backend(input("0000:0a:00.0", kVendorAmd, 0x7480, "vfio-pci", 7));  // Navi33
    CHECK_FALSE(v.ready);
    CHECK(v.backend.empty());
    CHECK(v.uri.empty());
    CHECK(v.family == "Navi33 (RDNA3, GC 11.0.2)");
    CHECK(v.reason == "AMD 1002:7480 (Navi33) is not driven yet: the am backend drives Navi31 (RDNA3, GC 11.0.0) and "
                      "Navi48 (RDNA4, GC 12.0.1)");
    BackendVerdict ad104 = judge_backend(input("0000:01:00.0", kVendorNvidia, 0x2782, "nvidia", 3));
    CHECK_FALSE(ad104.ready);
    CHECK(ad104.uri.empty());
    CHECK(ad104.transport.empty());
    CHECK(ad104.reason == "NVIDIA 10de:2782 (AD104) is not driven yet: the nv backend drives GH100 (Hopper) and AD102 (Ada)");
}

TEST_CASE("unknown AMD and NVIDIA IDs are not driven; other vendors have no backend") {
    BackendVerdict rdna1 = judge_backend(input("0000:28:00.0", kVendorAmd, 0x731f, "vfio-pci", 3));
    CHECK(rdna1.backend.empty());
    CHECK(rdna1.uri.empty());
    CHECK_FALSE(rdna1.ready);
    CHECK(rdna1.reason == "AMD 1002:731f is not a GPU baregpu drives: the am backend drives Navi31 (RDNA3, GC 11.0.0) and "
                          "Navi48 (RDNA4, GC 12.0.1)");

    BackendVerdict pascal = judge_backend(input("0000:02:00.0", kVendorNvidia, 0x1d10));
    CHECK(pascal.reason == "NVIDIA 10de:1d10 is not a GPU baregpu drives: the nv backend drives GH100 (Hopper) and AD102 (Ada)");

    BackendVerdict intel = judge_backend(input("0000:00:02.0", 0x8086, 0x56a0, "i915", 1));
    CHECK(intel.backend.empty());
    CHECK(intel.reason == "no baregpu backend for vendor 8086 (8086:56a0): baregpu drives AMD (am) and NVIDIA (nv) GPUs");
}

TEST_CASE("NVIDIA: nvrm when nvidia.ko is bound, nvpci when unbound or on vfio-pci") {
    VerdictInput bound = input("0000:01:00.0", kVendorNvidia, 0x2684, "nvidia", 3);  // AD102, RTX 4090
    BackendVerdict nvrm = judge_backend(bound);
    CHECK(nvrm.backend == "nv");
    CHECK(nvrm.transport == "nvrm");
    CHECK(nvrm.family == "AD102 (Ada)");
    CHECK(nvrm.uri == "nv:0000:01:00.0");
    CHECK(nvrm.ready);  // nvidia.ko's ioctls reach it as it is
    CHECK_THAT(nvrm.reason, Catch::StartsWith("bound to nvidia: opens as nv:0000:01:00.0 through nvidia.ko's RM ioctls") &&
                                Catch::Contains("vfio-pci"));
    CHECK(nv_transport_for("nvidia") == "nvrm");
    CHECK(nv_transport_for("") == "nvpci");
    CHECK(nv_transport_for("vfio-pci") == "nvpci");

    BackendVerdict unbound = judge_backend(input("0000:01:00.0", kVendorNvidia, 0x2684, "", 3));
    CHECK(unbound.transport == "nvpci");
    CHECK_FALSE(unbound.ready);
    BackendVerdict vfio = judge_backend(input("0000:01:00.0", kVendorNvidia, 0x2684, "vfio-pci", 3));
    CHECK(vfio.transport == "nvpci");
    CHECK(vfio.ready);
    // nouveau is not nvidia.ko: no nvrm.
    BackendVerdict nouveau = judge_backend(input("0000:01:00.0", kVendorNvidia, 0x2684, "nouveau", 3));
    CHECK(nouveau.transport == "nvpci");
    CHECK_THAT(nouveau.reason, Catch::StartsWith("bound to nouveau: unbind or use vfio-pci"));
    // AMD: no transport.
    CHECK(judge_backend(navi31("vfio-pci")).transport.empty());
}

}  // namespace backend_verdict_test
