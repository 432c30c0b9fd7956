// A step of the bring-up or of queue setup that a test may leave out, to show that the simulated
// chip (drivers/sim/amdgpu) notices and names it (tests/am/am_realism_test.cpp). Set only through
// AmOptions::skip_step by tests; with SkipStep::none (the default) every step runs. Each names the
// Linux function the step mirrors.
#pragma once

#include <string_view>

namespace baregpu::am {

enum class SkipStep {
    none,
    smu_before_rlc_autoload,     // SMU features after the RLC autoload wait (amdgpu_discovery.c block order)
    mec_program_counter,         // CP_MEC_RS64_PRGRM_CNTR_START/_HI and the pipe reset (gfx_v11_0_config_gfx_rs64)
    mec_doorbell_range,          // CP_MEC_DOORBELL_RANGE_LOWER/UPPER (gfx_v11_0_cp_set_doorbell_range)
    mec_unhalt,                  // CP_MEC_RS64_CNTL.MEC_HALT left set (gfx_v11_0_cp_compute_enable)
    cp_doorbell_route,           // S2A entries 0 and 3 (nbio_v4_3_gc_doorbell_init / nbif_v6_3_1_gc_doorbell_init)
    sdma_doorbell_route,         // S2A entry 2 (nbio_v4_3_sdma_doorbell_range / nbif_v6_3_1_sdma_doorbell_range)
    sdma_unhalt,                 // SDMA0_F32_CNTL / SDMA0_MCU_CNTL HALT left set (sdma_v6_0_gfx_resume_instance)
    sdma_rb_cntl_fields,         // SDMA0_QUEUE0_RB_CNTL written whole: no RB_PRIV, RPTR writeback, WPTR poll
    sh_mem_config,               // SH_MEM_CONFIG / SH_MEM_BASES of VMID 0 left at reset (gfx_v11_0_constants_init)
    vm_context_gc11_layout,      // VM_CONTEXT0_CNTL composed with GC 11's field layout on every chip
    invalidate_addr_range,       // VM_INVALIDATE_ENG*_ADDR_RANGE left at reset (gfxhub_v3_0_program_invalidation)
    mmhub_private_invalidation,  // no MMVM_L2_BANK_SELECT_RESERVED_CID2 private invalidation (gmc_v11_0_flush_vm_hub)
    ih_mc_space,                 // IH_RB_CNTL.MC_SPACE / MC_SNOOP left 0 (ih_v6_0_irq_init)
    discovery_ifwi_wait,         // discovery read without waiting for MP0_SMN_C2PMSG_33 bit 31 (amdgpu_discovery.c)
    dispatch_packet,             // no hsa_kernel_dispatch_packet_t for a kernel with ENABLE_SGPR_DISPATCH_PTR (tinygrad exec)
    code_cache_invalidate,       // no GLI_INV/GL2_INV ACQUIRE_MEM before running newly loaded code (gfx_v11_0_emit_mem_sync)
    agp_aperture,                // MC_VM_AGP_* left off (amdgpu_gmc_agp_location's window, gfxhub_v3_0_init_system_aperture_regs)
};

std::string_view to_string(SkipStep step);

}  // namespace baregpu::am
