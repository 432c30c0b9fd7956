// The memory hubs (MMHUB for the SOC's engines, the GC hub for graphics/compute): the system
// aperture that passes MC addresses [fb_base, fb_top] straight to VRAM, the AGP aperture to system
// memory, and VMID0's page table
// from kVmStart. Programming order: gfxhub_v3_0.c / mmhub_v3_0.c (Navi31), gfxhub_v12_0.c /
// mmhub_v4_1_0.c (Navi48), as tinygrad's AM_GMC.init_hub does it. TLB invalidation through engine 17,
// taking the MMHUB semaphore first and following an MM hub flush with the MMHUB private invalidation
// (gmc_v11_0_flush_vm_hub; gmc_v12_0.c does the same).
#pragma once

#include "drivers/am/registers.hpp"
#include "drivers/am/skip_step.hpp"

#include <cstdint>
#include <functional>

namespace baregpu::am {

class Gmc {
public:
    Gmc(Registers& regs, std::function<void()> flush_hdp, SkipStep skip = SkipStep::none)
        : regs_(regs), flush_hdp_(std::move(flush_hdp)), skip_(skip) {}

    // MMMC_VM_FB_LOCATION_BASE/TOP (read-only on dGPUs): bits 23:0 = address >> 24.
    void read_fb_location();
    uint64_t fb_base() const { return fb_base_; }
    uint64_t fb_top() const { return fb_top_; }
    uint64_t mc(uint64_t paddr) const { return fb_base_ + paddr; }
    // The AGP aperture: MC [agp_start, agp_start + kAgpBytes) reaches bus addresses [0, kAgpBytes)
    // with no page table, above VRAM on a 16 GiB boundary (Linux amdgpu_gmc.c
    // amdgpu_gmc_agp_location). What the PSP reads firmware through when it is staged in system
    // memory (the USB bridge's SRAM), as Linux keeps the PSP's firmware buffer in GTT.
    static constexpr uint64_t kAgpBytes = 4ull << 30;
    uint64_t agp_mc(uint64_t bus_address) const { return agp_start_ + bus_address; }

    void init_hub(bool gc, uint64_t root_pt, uint64_t scratch_page, uint64_t dummy_page);
    void flush_tlb(bool gc);
    // The GC hub's latched protection fault (warm start refuses a chip with one).
    uint32_t gc_fault_status();
    uint64_t gc_fault_address();
    // A hub's latched fault status, and clearing it (gmc_v11_0_process_interrupt:
    // WREG32_P(L2_PROTECTION_FAULT_CNTL, 1, ~1)).
    uint32_t fault_status(bool gc);
    void clear_fault(bool gc);

private:
    Registers& regs_;
    std::function<void()> flush_hdp_;
    SkipStep skip_;
    uint64_t fb_base_ = 0, fb_top_ = 0, agp_start_ = 0;
};

}  // namespace baregpu::am
