#include "drivers/pci/gpu_ids.hpp"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <span>

namespace baregpu::pci {

namespace {

struct ChipIds {
    GpuFamily family;
    std::span<const uint16_t> ids;
};

// AMD. Device IDs per chip from the PCI ID Repository (pci.ids, version 2026.08.22,
// github.com/pciutils/pciids); GC (graphics core) IP versions as Linux amdgpu's IP discovery
// reports them (amdgpu_discovery.c, gfx_v11_0.c / gfx_v12_0.c firmware names) and as tinygrad's
// AM driver keys its support (tinygrad/runtime/ops_amd.py: the device IDs PCIIface opens).
// The AM driver is written for Navi31 (GC 11.0.0) and Navi48 (GC 12.0.1); the other RDNA3/RDNA4
// dies share their IP blocks.
constexpr std::array<uint16_t, 6> kNavi31{0x7448, 0x7449, 0x744a, 0x744b, 0x744c, 0x745e};
constexpr std::array<uint16_t, 4> kNavi32{0x7460, 0x7461, 0x7470, 0x747e};
constexpr std::array<uint16_t, 9> kNavi33{0x73f0, 0x7480, 0x7481, 0x7483, 0x7487, 0x7489, 0x748b, 0x7499, 0x749f};
constexpr std::array<uint16_t, 1> kNavi44{0x7590};
constexpr std::array<uint16_t, 2> kNavi48{0x7550, 0x7551};

// NVIDIA. Device IDs per chip from pci.ids 2026.08.22 (entries named AD10x / GB20x, display
// functions only). The NV backend boots GSP-RM on Ada (firmware directory ad102) and Blackwell
// GB20x (gb202), as tinygrad's NVPCI does (runtime/support/nv/nvdev.py: the chip from NV_PMC_BOOT_42).
constexpr std::array<uint16_t, 15> kAd102{0x2681, 0x2684, 0x2685, 0x2689, 0x26af, 0x26b1, 0x26b2, 0x26b3,
                                          0x26b5, 0x26b7, 0x26b8, 0x26b9, 0x26ba, 0x26bb, 0x26f5};
constexpr std::array<uint16_t, 9> kAd103{0x2702, 0x2703, 0x2704, 0x2705, 0x2709, 0x2717, 0x2730, 0x2757, 0x2770};
constexpr std::array<uint16_t, 17> kAd104{0x2782, 0x2783, 0x2785, 0x2786, 0x2788, 0x27a0, 0x27b0, 0x27b1, 0x27b2,
                                          0x27b6, 0x27b7, 0x27b8, 0x27ba, 0x27bb, 0x27e0, 0x27fa, 0x27fb};
constexpr std::array<uint16_t, 8> kAd106{0x2803, 0x2805, 0x2808, 0x2820, 0x2822, 0x2838, 0x2860, 0x2878};
constexpr std::array<uint16_t, 13> kAd107{0x2882, 0x28a0, 0x28a1, 0x28a3, 0x28b0, 0x28b8, 0x28b9,
                                          0x28ba, 0x28bb, 0x28e0, 0x28e1, 0x28e3, 0x28f8};
constexpr std::array<uint16_t, 10> kGb202{0x2b85, 0x2b87, 0x2b8c, 0x2bb1, 0x2bb2,
                                          0x2bb3, 0x2bb4, 0x2bb5, 0x2bb9, 0x2bbc};
constexpr std::array<uint16_t, 14> kGb203{0x2c02, 0x2c05, 0x2c18, 0x2c19, 0x2c31, 0x2c33, 0x2c34,
                                          0x2c38, 0x2c39, 0x2c3a, 0x2c58, 0x2c59, 0x2c77, 0x2c79};
constexpr std::array<uint16_t, 5> kGb205{0x2f04, 0x2f06, 0x2f18, 0x2f38, 0x2f58};
constexpr std::array<uint16_t, 9> kGb206{0x2d04, 0x2d05, 0x2d18, 0x2d19, 0x2d30, 0x2d39, 0x2d58, 0x2d59, 0x2d79};
constexpr std::array<uint16_t, 6> kGb207{0x2d83, 0x2d98, 0x2db8, 0x2db9, 0x2dd8, 0x2df9};

constexpr GpuSupport kTarget = GpuSupport::Target;
constexpr GpuSupport kSame = GpuSupport::SameGeneration;

const std::array<ChipIds, 5> kAmd{{
    {{"am", "Navi31", "RDNA3, GC 11.0.0", kTarget}, kNavi31},
    {{"am", "Navi32", "RDNA3, GC 11.0.3", kSame}, kNavi32},
    {{"am", "Navi33", "RDNA3, GC 11.0.2", kSame}, kNavi33},
    {{"am", "Navi44", "RDNA4, GC 12.0.0", kSame}, kNavi44},
    {{"am", "Navi48", "RDNA4, GC 12.0.1", kTarget}, kNavi48},
}};

const std::array<ChipIds, 10> kNvidia{{
    {{"nv", "AD102", "Ada", kTarget}, kAd102},
    {{"nv", "AD103", "Ada", kSame}, kAd103},
    {{"nv", "AD104", "Ada", kSame}, kAd104},
    {{"nv", "AD106", "Ada", kSame}, kAd106},
    {{"nv", "AD107", "Ada", kSame}, kAd107},
    {{"nv", "GB202", "Blackwell", kTarget}, kGb202},
    {{"nv", "GB203", "Blackwell", kSame}, kGb203},
    {{"nv", "GB205", "Blackwell", kSame}, kGb205},
    {{"nv", "GB206", "Blackwell", kSame}, kGb206},
    {{"nv", "GB207", "Blackwell", kSame}, kGb207},
}};

std::optional<GpuFamily> find_in(std::span<const ChipIds> table, uint16_t device) {
    for (const ChipIds& chip : table) {
        if (std::find(chip.ids.begin(), chip.ids.end(), device) != chip.ids.end()) return chip.family;
    }
    return std::nullopt;
}

}  // namespace

std::optional<GpuFamily> find_gpu_family(uint16_t vendor, uint16_t device) {
    switch (vendor) {
        case kVendorAmd: return find_in(kAmd, device);
        case kVendorNvidia: return find_in(kNvidia, device);
        default: return std::nullopt;
    }
}

std::string_view supported_generations(uint16_t vendor) {
    switch (vendor) {
        case kVendorAmd: return "RDNA3 and RDNA4 (Navi31 GC 11.0.0, Navi48 GC 12.0.1 and their siblings)";
        case kVendorNvidia: return "Ada (AD10x) and Blackwell (GB20x)";
        default: return "";
    }
}

}  // namespace baregpu::pci
