// Config space with register semantics, as a simulated function presents it: read-only
// identity, writable command bits, BARs that size themselves (only the address bits above the
// BAR's size are writable, so writing all-ones reads back the size mask), MSI / MSI-X control,
// and the PCI Express Initiate-FLR bit. Built from a model's DeviceSpec.
#pragma once

#include "drivers/pci/sim_device_model.hpp"

#include <array>
#include <cstdint>
#include <optional>

namespace baregpu::pci::sim {

class SimConfigSpace {
public:
    // bar_addresses[i]: the bus address assigned to BAR i (as firmware would at boot).
    SimConfigSpace(const DeviceSpec& spec, const std::array<uint64_t, kBarCount>& bar_addresses);

    uint16_t size() const { return size_; }
    uint32_t read(uint16_t offset, unsigned width) const;

    struct WriteEffects {
        bool function_level_reset = false;  // the driver set DevCtl.InitiateFLR
        bool interrupts_changed = false;  // MSI or MSI-X control/address/data changed
    };
    WriteEffects write(uint16_t offset, unsigned width, uint32_t value);

    // Back to the power-on values (FLR): command 0, BARs unassigned, MSI/MSI-X off.
    void reset();

    uint16_t command() const { return static_cast<uint16_t>(read(cfg::kCommand, 2)); }

    struct MsiState {
        bool enabled = false;
        unsigned vectors = 0;  // enabled vectors (multiple message enable)
        uint64_t address = 0;
        uint16_t data = 0;
    };
    MsiState msi() const;
    bool msix_enabled() const;
    bool msix_function_masked() const;

    std::optional<uint16_t> msi_offset() const { return msi_; }
    std::optional<uint16_t> msix_offset() const { return msix_; }
    std::optional<uint16_t> express_offset() const { return express_; }

private:
    void put(uint16_t offset, unsigned width, uint32_t value, uint32_t writable_mask);
    uint32_t get(const std::array<uint8_t, cfg::kConfigSizeExtended>& bytes, uint16_t offset, unsigned width) const;

    uint16_t size_ = cfg::kConfigSizeLegacy;
    std::array<uint8_t, cfg::kConfigSizeExtended> bytes_{};
    std::array<uint8_t, cfg::kConfigSizeExtended> writable_{};
    std::array<uint8_t, cfg::kConfigSizeExtended> power_on_{};
    std::optional<uint16_t> msi_, msix_, express_;
};

}  // namespace baregpu::pci::sim
