// BAR5, the MMIO BAR (1 MiB): register dword address A at byte 4*A; registers past the BAR through
// the indirect pair BIF_BX_PF0_RSMU_INDEX/DATA (index = byte address 4*A, tinygrad amdev.py AMDev.indirect_wreg); VRAM through
// MM_INDEX/MM_INDEX_HI/MM_DATA (Linux amdgpu_device_mm_access: MM_INDEX = offset | 0x80000000,
// MM_INDEX_HI = offset >> 31); RCC_CONFIG_MEMSIZE (VRAM in MiB). Every register goes to the block
// that gives it meaning, else to plain storage.
#pragma once

#include <functional>

#include "drivers/sim/amdgpu/chip.hpp"
#include "drivers/sim/amdgpu/gc.hpp"
#include "drivers/sim/amdgpu/gmc.hpp"
#include "drivers/sim/amdgpu/ih.hpp"
#include "drivers/sim/amdgpu/psp.hpp"
#include "drivers/sim/amdgpu/smu.hpp"

namespace baregpu::sim::amdgpu {

class RegisterFile {
public:
    RegisterFile(Chip& chip, Psp& psp, Smu& smu, Gmc& gmc, Ih& ih, GcRegs& gc)
        : chip_(chip), psp_(psp), smu_(smu), gmc_(gmc), ih_(ih), gc_(gc) {}
    // Called with every register write the driver makes (the RSMU and MM_INDEX pairs resolved to the
    // register they reach): the register trace (NaviModel, BAREGPU_SIM_TRACE=regs).
    std::function<void(uint32_t address, uint32_t value, const char* via)> trace;

    uint32_t read(uint32_t address);
    void write(uint32_t address, uint32_t value);
    uint64_t bar5_read(uint64_t offset, unsigned width);
    void bar5_write(uint64_t offset, unsigned width, uint64_t value);

private:
    bool mm_vram_offset(uint64_t& offset);

    Chip& chip_;
    Psp& psp_;
    Smu& smu_;
    Gmc& gmc_;
    Ih& ih_;
    GcRegs& gc_;
    const char* via_ = "";  // while a write arrives through an indirect pair
};

}  // namespace baregpu::sim::amdgpu
