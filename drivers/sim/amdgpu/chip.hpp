// What every block of the simulated chip shares: the ASIC row, its register map, the state file
// (registers, block state, VRAM), the bus port and modelled time, and the memory controller's
// view of VRAM (MC address = fb_base + offset through the system aperture).
#pragma once

#include "drivers/pci/sim_device_model.hpp"
#include "drivers/sim/amdgpu/asic.hpp"
#include "drivers/sim/amdgpu/registers.hpp"
#include "drivers/sim/amdgpu/state_file.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

namespace baregpu::sim::amdgpu {

class Chip {
public:
    Chip(const AsicInfo& info, StateFile& file) : asic(info), reg(RegisterMap::build(info)), file_(file) {}

    const AsicInfo& asic;
    const RegisterMap reg;
    pci::sim::SimPort* port = nullptr;  // set when the model is attached to a bus
    std::function<void()> mode1_reset;  // what the SMU calls to reset the chip
    // A chip that just powered on is still in its IFWI init until then (bus clock, ns): MP0_SMN_C2PMSG_33
    // bit 31 is clear and RCC_CONFIG_MEMSIZE is not valid yet (register_file.cpp).
    uint64_t ifwi_ready_ns = 0;

    ChipState& state() { return file_.chip(); }
    std::span<std::byte> vram() { return file_.vram(); }

    uint64_t now() const { return port != nullptr ? port->now_ns() : 0; }
    // What the timestamp counter reads (SimPort::timestamp_ns: within wall time behind a slow link).
    uint64_t timestamp_now() const { return port != nullptr ? port->timestamp_ns() : 0; }
    // Device work (a kernel's host execution time) advances the modelled clock.
    void spend(uint64_t ns) const {
        if (port != nullptr) port->spend_ns(ns);
    }
    void violation(const std::string& what, const std::string& where, const std::string& source) const {
        if (port != nullptr) port->violation(what, where, source);
    }

    // The register store (plain storage, no side effects). Addresses past BAR5 live in a small
    // table; the RSMU indirect pair reaches them.
    uint32_t load(uint32_t address);
    void store(uint32_t address, uint32_t value);

    // [mc, mc + bytes) as a VRAM offset when it lies inside the frame buffer aperture
    // [fb_base, fb_top] (MMMC_VM_FB_LOCATION_BASE/TOP).
    std::optional<uint64_t> vram_offset(uint64_t mc, uint64_t bytes) const;
    bool read_mc(uint64_t mc, std::span<std::byte> out);
    bool write_mc(uint64_t mc, std::span<const std::byte> data);
    uint32_t read_mc32(uint64_t mc);  // 0 when outside VRAM
    bool write_mc32(uint64_t mc, uint32_t value);

private:
    StateFile& file_;
};

std::string hex(uint64_t value);
std::string reg_name(uint64_t address);  // "reg 0x1605f"

}  // namespace baregpu::sim::amdgpu
