#include "drivers/nv/chips.hpp"

#include "drivers/pci/gpu_ids.hpp"

#include <algorithm>
#include <cctype>
#include <optional>

namespace baregpu::nv {

const std::vector<NvChip>& chips() {
    // AD102 only: the chip the simulated model and the carried booter are. Its Ada siblings boot the
    // same way but have not been tried; Blackwell's GSP boot goes through the FSP (gsp_boot.hpp).
    // GH100 over nvidia.ko only (no gsp_version: nvpci's GSP boot of a Hopper goes through the FSP, not written).
    static const std::vector<NvChip> table = {
        {.name = "ad102", .gsp_version = "570.144"},
        {.name = "gh100", .gsp_version = ""},
    };
    return table;
}

const NvChip* find_chip(std::string_view name) {
    for (const NvChip& c : chips()) {
        if (std::ranges::equal(name, c.name, [](char x, char y) {
                return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
            })) {
            return &c;
        }
    }
    return nullptr;
}

const NvChip* find_chip_by_device_id(uint16_t device_id) {
    std::optional<pci::GpuFamily> family = pci::find_gpu_family(pci::kVendorNvidia, device_id);
    if (!family || family->backend != "nv" || family->support != pci::GpuSupport::Driven) return nullptr;
    return find_chip(family->chip);
}

}  // namespace baregpu::nv
