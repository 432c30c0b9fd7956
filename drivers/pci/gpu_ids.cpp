#include "drivers/pci/gpu_ids.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <array>
#include <initializer_list>
#include <span>
#include <vector>

namespace baregpu::pci {

namespace {

struct ChipIds {
    GpuFamily family;
    std::span<const uint16_t> ids;
};

// AMD. Device IDs per chip from the PCI ID Repository (pci.ids, version 2026.08.22,
// github.com/pciutils/pciids); GC (graphics core) IP versions as Linux amdgpu's IP discovery
// reports them (amdgpu_discovery.c, gfx_v11_0.c / gfx_v12_0.c firmware names). drivers/am drives
// Navi31 (GC 11.0.0) and Navi48 (GC 12.0.1), every device ID of each: Linux binds all of them
// through one PCI_ANY_ID entry (amdgpu_drv.c pciidlist, CHIP_IP_DISCOVERY) and picks the firmware
// from the discovered IP versions (gfx_v11_0.c "amdgpu/gc_%s_mec.bin" from the GC version), so
// the six Navi31 IDs load the same files. Navi32/33/44 have other IP versions and firmware.
constexpr std::array<uint16_t, 6> kNavi31{0x7448, 0x7449, 0x744a, 0x744b, 0x744c, 0x745e};
constexpr std::array<uint16_t, 4> kNavi32{0x7460, 0x7461, 0x7470, 0x747e};
constexpr std::array<uint16_t, 9> kNavi33{0x73f0, 0x7480, 0x7481, 0x7483, 0x7487, 0x7489, 0x748b, 0x7499, 0x749f};
constexpr std::array<uint16_t, 1> kNavi44{0x7590};
constexpr std::array<uint16_t, 2> kNavi48{0x7550, 0x7551};

// NVIDIA. Device IDs per chip from pci.ids 2026.08.22 (entries named AD10x / GB20x, display
// functions only). drivers/nv drives AD102 (GSP firmware nvidia/ad102/gsp); its Ada siblings and
// Blackwell GB20x (whose GSP boot goes through the FSP, gsp_boot.hpp) are not driven yet.
// GH100 (Hopper): pci.ids' GH100 display/3D functions, with 2335 (H200 SXM 141GB) and 233b (H200 NVL) from newer
// pci.ids. Driven over nvidia.ko only (nvrm): our own GSP boot of a Hopper goes through the FSP and is not written.
constexpr std::array<uint16_t, 11> kGh100{0x2302, 0x2313, 0x2321, 0x2322, 0x2324, 0x2330,
                                          0x2331, 0x2335, 0x2336, 0x2339, 0x233b};
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

constexpr GpuSupport kDriven = GpuSupport::Driven;
constexpr GpuSupport kNotYet = GpuSupport::NotDriven;

const std::array<ChipIds, 5> kAmd{{
    {{"am", "Navi31", "RDNA3, GC 11.0.0", kDriven}, kNavi31},
    {{"am", "Navi32", "RDNA3, GC 11.0.3", kNotYet}, kNavi32},
    {{"am", "Navi33", "RDNA3, GC 11.0.2", kNotYet}, kNavi33},
    {{"am", "Navi44", "RDNA4, GC 12.0.0", kNotYet}, kNavi44},
    {{"am", "Navi48", "RDNA4, GC 12.0.1", kDriven}, kNavi48},
}};

const std::array<ChipIds, 11> kNvidia{{
    {{"nv", "GH100", "Hopper", kDriven}, kGh100},
    {{"nv", "AD102", "Ada", kDriven}, kAd102},
    {{"nv", "AD103", "Ada", kNotYet}, kAd103},
    {{"nv", "AD104", "Ada", kNotYet}, kAd104},
    {{"nv", "AD106", "Ada", kNotYet}, kAd106},
    {{"nv", "AD107", "Ada", kNotYet}, kAd107},
    {{"nv", "GB202", "Blackwell", kNotYet}, kGb202},
    {{"nv", "GB203", "Blackwell", kNotYet}, kGb203},
    {{"nv", "GB205", "Blackwell", kNotYet}, kGb205},
    {{"nv", "GB206", "Blackwell", kNotYet}, kGb206},
    {{"nv", "GB207", "Blackwell", kNotYet}, kGb207},
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

std::string driven_chips(std::string_view backend) {
    std::vector<std::string> names;
    for (std::span<const ChipIds> table : {std::span<const ChipIds>(kAmd), std::span<const ChipIds>(kNvidia)}) {
        for (const ChipIds& chip : table) {
            if (chip.family.backend == backend && chip.family.support == GpuSupport::Driven) {
                names.push_back(fmt::format("{} ({})", chip.family.chip, chip.family.generation));
            }
        }
    }
    std::string text;
    for (size_t i = 0; i < names.size(); ++i) {
        text += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
    }
    return text.empty() ? "nothing" : text;
}

}  // namespace baregpu::pci
