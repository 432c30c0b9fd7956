// The NVIDIA chips drivers/nv drives, as data: one row per chip, keyed by the chip names of
// drivers/pci/gpu_ids.cpp, the one table of PCI device IDs (it lists every ID of each chip and
// marks which chips are driven; tests/registry checks that the two agree).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace baregpu::nv {

struct NvChip {
    std::string_view name;         // "ad102": gpu_ids.cpp's chip name, and linux-firmware's nvidia/<name>/gsp/
    std::string_view gsp_version;  // "570.144": the GSP-RM release whose files nvpci boots; empty: nvrm only
};

// The table, in a fixed order.
const std::vector<NvChip>& chips();
// By name ("AD102" or "ad102"); nullptr when not a chip drivers/nv drives.
const NvChip* find_chip(std::string_view name);
// By PCI device id (vendor 0x10de), through gpu_ids.cpp: every ID of a chip it marks driven by nv;
// nullptr for any other.
const NvChip* find_chip_by_device_id(uint16_t device_id);

}  // namespace baregpu::nv
