// Which GPUs baregpu's PCI backends drive, by PCI vendor and device ID: the one table of IDs.
// The drivers key their own per-chip data by the chip names here (drivers/am asic.cpp's
// find_asic_by_device_id, drivers/nv chips.cpp's find_chip_by_device_id), so `baregpu devices`
// cannot call a card drivable that its driver refuses (tests/registry checks both directions).
//
// A device ID names a chip, not a generation, so the tables list IDs one by one: an ID that is
// not listed is not driven rather than a guess from a neighbouring number. Chips of a driven
// generation that the drivers do not drive yet are listed too, so that `devices` can name them
// and say which chips are driven. Where the IDs come from is cited next to each table in gpu_ids.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace baregpu::pci {

// Linux include/linux/pci_ids.h: PCI_VENDOR_ID_ATI (AMD's graphics parts) and PCI_VENDOR_ID_NVIDIA.
inline constexpr uint16_t kVendorAmd = 0x1002;
inline constexpr uint16_t kVendorNvidia = 0x10de;

enum class GpuSupport {
    Driven,  // the backend's driver drives this chip (its chip table has a row for it)
    NotDriven,  // a sibling of a driven chip (other IP versions or firmware): named, not driven yet
};

struct GpuFamily {
    std::string_view backend;  // "am" or "nv": the URI scheme that drives it
    std::string_view chip;  // "Navi31", "AD102"
    std::string_view generation;  // "RDNA3, GC 11.0.0", "Ada"
    GpuSupport support = GpuSupport::Driven;
};

// The family of a known device; nullopt when the backends do not know this ID.
std::optional<GpuFamily> find_gpu_family(uint16_t vendor, uint16_t device);

// The chips `backend` ("am", "nv") drives, for messages: "Navi31 (RDNA3, GC 11.0.0) and Navi48 (RDNA4, GC 12.0.1)".
std::string driven_chips(std::string_view backend);

}  // namespace baregpu::pci
