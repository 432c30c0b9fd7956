// Which GPUs baregpu's PCI backends are written for, by PCI vendor and device ID.
//
// A device ID names a chip, not a generation, so the tables list IDs one by one: an ID that is
// not listed is "not a supported generation" rather than a guess from a neighbouring number.
// Where the IDs come from is cited next to each table in gpu_ids.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace baregpu::pci {

// Linux include/linux/pci_ids.h: PCI_VENDOR_ID_ATI (AMD's graphics parts) and PCI_VENDOR_ID_NVIDIA.
inline constexpr uint16_t kVendorAmd = 0x1002;
inline constexpr uint16_t kVendorNvidia = 0x10de;

enum class GpuSupport {
    Target,  // the backend is developed against this chip (its simulated model, its firmware)
    SameGeneration,  // same IP generation as a target: expected to work, not yet tried
};

struct GpuFamily {
    std::string_view backend;  // "am" or "nv": the URI scheme that drives it
    std::string_view chip;  // "Navi31", "AD102"
    std::string_view generation;  // "RDNA3, GC 11.0.0", "Ada"
    GpuSupport support = GpuSupport::Target;
};

// The family of a known device; nullopt when the backends do not know this ID.
std::optional<GpuFamily> find_gpu_family(uint16_t vendor, uint16_t device);

// What each backend drives, for messages about unknown IDs ("Navi31 (GC 11.0.0) and ...").
std::string_view supported_generations(uint16_t vendor);

}  // namespace baregpu::pci
