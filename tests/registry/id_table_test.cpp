// One table of PCI IDs (drivers/pci/gpu_ids.cpp) and the drivers' chip tables must agree: every
// ID the backend verdict calls drivable by a backend is accepted by that driver's lookup, and
// every ID the driver accepts is called drivable, so `baregpu devices` never promises a card
// the driver refuses. Every device ID of both vendors is tried.
#include "drivers/am/asic.hpp"
#include "drivers/nv/chips.hpp"
#include "drivers/pci/backend_verdict.hpp"
#include "drivers/pci/gpu_ids.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <set>
#include <string>

using namespace baregpu;

namespace {

// The verdict for a function ready to open (vfio-pci, its own IOMMU group): drivable iff it names a URI.
pci::BackendVerdict drivable(uint16_t vendor, uint16_t device) {
    pci::VerdictInput in;
    in.address = "0000:03:00.0";
    in.vendor_id = vendor;
    in.device_id = device;
    in.driver = "vfio-pci";
    in.iommu_group = 14;
    return pci::judge_backend(in);
}

}  // namespace

TEST_CASE("am: the verdict's drivable IDs are exactly the IDs drivers/am's ASIC lookup accepts") {
    std::set<std::string_view> reached;
    unsigned driven = 0;
    for (uint32_t id = 0; id <= 0xffff; ++id) {
        const pci::BackendVerdict v = drivable(pci::kVendorAmd, static_cast<uint16_t>(id));
        const am::AsicInfo* asic = am::find_asic_by_device_id(static_cast<uint16_t>(id));
        const bool promised = v.backend == "am" && !v.uri.empty() && v.ready;
        if (promised != (asic != nullptr)) {
            FAIL(fmt::format("1002:{:04x}: the verdict says {} ({}), the am lookup {}", id, promised ? "drivable" : "not",
                             v.reason, asic ? "accepts it" : "refuses it"));
        }
        if (asic) {
            reached.insert(asic->name);
            ++driven;
        }
    }
    CHECK(driven == 8);  // six Navi31 IDs, two Navi48
    CHECK(am::find_asic_by_device_id(0x745e)->name == "navi31");
    CHECK(am::find_asic_by_device_id(0x7551)->name == "navi48");
    // And every chip drivers/am has data for is reachable through some ID.
    for (const am::AsicInfo& a : am::asics()) CHECK(reached.count(a.name) == 1);
}

TEST_CASE("nv: the verdict's drivable IDs are exactly the IDs drivers/nv's chip lookup accepts") {
    std::set<std::string_view> reached;
    for (uint32_t id = 0; id <= 0xffff; ++id) {
        const pci::BackendVerdict v = drivable(pci::kVendorNvidia, static_cast<uint16_t>(id));
        const nv::NvChip* chip = nv::find_chip_by_device_id(static_cast<uint16_t>(id));
        const bool promised = v.backend == "nv" && !v.uri.empty() && v.ready;
        if (promised != (chip != nullptr)) {
            FAIL(fmt::format("10de:{:04x}: the verdict says {} ({}), the nv lookup {}", id, promised ? "drivable" : "not",
                             v.reason, chip ? "accepts it" : "refuses it"));
        }
        if (chip) reached.insert(chip->name);
    }
    CHECK(nv::find_chip_by_device_id(0x2684)->name == "ad102");  // RTX 4090
    CHECK(nv::find_chip_by_device_id(0x2782) == nullptr);  // AD104: named by the table, not driven
    for (const nv::NvChip& c : nv::chips()) CHECK(reached.count(c.name) == 1);
}
