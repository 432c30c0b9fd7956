#include "drivers/am/gfx.hpp"

#include "drivers/am/soc.hpp"
#include "drivers/pci/pci_device.hpp"

#include <chrono>

namespace baregpu::am {

std::string_view to_string(SkipStep step) {
    switch (step) {
        case SkipStep::none: return "none";
        case SkipStep::smu_before_rlc_autoload: return "smu_before_rlc_autoload";
        case SkipStep::mec_program_counter: return "mec_program_counter";
        case SkipStep::mec_doorbell_range: return "mec_doorbell_range";
        case SkipStep::mec_unhalt: return "mec_unhalt";
        case SkipStep::cp_doorbell_route: return "cp_doorbell_route";
        case SkipStep::sdma_doorbell_route: return "sdma_doorbell_route";
        case SkipStep::sdma_unhalt: return "sdma_unhalt";
        case SkipStep::sdma_rb_cntl_fields: return "sdma_rb_cntl_fields";
        case SkipStep::sh_mem_config: return "sh_mem_config";
        case SkipStep::vm_context_gc11_layout: return "vm_context_gc11_layout";
        case SkipStep::invalidate_addr_range: return "invalidate_addr_range";
        case SkipStep::mmhub_private_invalidation: return "mmhub_private_invalidation";
        case SkipStep::ih_mc_space: return "ih_mc_space";
        case SkipStep::discovery_ifwi_wait: return "discovery_ifwi_wait";
        case SkipStep::dispatch_packet: return "dispatch_packet";
        case SkipStep::code_cache_invalidate: return "code_cache_invalidate";
        case SkipStep::agp_aperture: return "agp_aperture";
    }
    return "?";
}

void Gfx::config_mec(uint64_t mec_ucode_start, SkipStep skip) {
    if (skip == SkipStep::mec_program_counter) return;
    const RegisterTable& t = regs_.table();
    // gfx_v11_0_config_gfx_rs64 / gfx_v12_0_config_gfx_rs64 (PSP-loaded firmware): for each MEC pipe,
    // selected through GRBM_GFX_CNTL (ME 1), CP_MEC_RS64_PRGRM_CNTR_START = start >> 2 (low 32 bits:
    // ucode_start_addr_lo >> 2 | ucode_start_addr_hi << 30) and _HI = ucode_start_addr_hi >> 2.
    const uint64_t pc = mec_ucode_start >> 2;
    for (uint32_t pipe = 0; pipe < 4; ++pipe) {
        regs_.write(t.grbm_gfx_cntl, field::grbm_select(1, pipe, 0, 0));
        regs_.write(t.cp_mec_rs64_prgrm_cntr_start, static_cast<uint32_t>(pc));
        regs_.write(t.cp_mec_rs64_prgrm_cntr_start_hi, static_cast<uint32_t>(pc >> 32));
    }
    regs_.write(t.grbm_gfx_cntl, field::grbm_select(0, 0, 0, 0));
    // Then every MEC pipe through reset, which is what makes the new start address take effect
    // (the same function; the comment in gfx_v11_0_cp_gfx_load_pfp_microcode_rs64 says so for PFP).
    uint32_t cntl = regs_.read(t.cp_mec_rs64_cntl) | field::kMecPipeResetAll;
    regs_.write(t.cp_mec_rs64_cntl, cntl);
    regs_.write(t.cp_mec_rs64_cntl, cntl & ~field::kMecPipeResetAll);
}

void Gfx::init_hw(uint64_t mec_ucode_start, SkipStep skip) {
    const RegisterTable& t = regs_.table();
    // gfx_v11_0_hw_init after gfx_v11_0_wait_for_rlc_autoload_complete: the RS64 start addresses.
    config_mec(mec_ucode_start, skip);
    // gfx_v11_0_init_golden_registers: golden_settings_gc_11_0 ORs TCP_CNTL with 0x20000000 on every GC 11
    // (tinygrad's AM_GFX.init_hw does the same); gfx_v12_0 has no such entry.
    if (gc_generation_ == 11) regs_.write(t.tcp_cntl, regs_.read(t.tcp_cntl) | 0x20000000u);
    // gfx_v11_0_constants_init: GRBM_CNTL.READ_TIMEOUT = 0xff (bits 7:0 on GC 11, 11:0 on GC 12), then
    // SH_MEM_CONFIG (and, for user VMIDs, SH_MEM_BASES) under soc21_grbm_select(adev, 0, 0, 0, vmid);
    // VMID 0 is the one drivers/am runs kernels in.
    regs_.write(t.grbm_cntl, (regs_.read(t.grbm_cntl) & ~0xffu) | 0xffu);
    if (skip != SkipStep::sh_mem_config) {
        regs_.write(t.grbm_gfx_cntl, field::grbm_select(0, 0, 0, /*vmid=*/0));
        regs_.write(t.sh_mem_config, kShMemConfig);
        regs_.write(t.sh_mem_bases, kShMemBases);
    }
    // gfx_v11_0_hw_init -> adev->nbio.funcs->gc_doorbell_init: route the CP's doorbells.
    if (skip != SkipStep::cp_doorbell_route) soc_.gc_doorbell_init();
    // gfx_v11_0_rlc_resume (PSP-loaded firmware) -> gfx_v11_0_rlc_enable_srm: RLC_SRM_CNTL.SRM_ENABLE (bit 0)
    // and AUTO_INCR_ADDR (bit 1); tinygrad's AM_GFX.init_hw does it too.
    regs_.write(t.rlc_srm_cntl, regs_.read(t.rlc_srm_cntl) | 0x3u);
    // gfx_v11_0_cp_resume -> gfx_v11_0_cp_set_doorbell_range: the MEC only takes doorbells inside
    // [LOWER, UPPER]; the reset values (gc_11_0_0_default.h: 0x110 / 0xffc) exclude MEC_RING0..7.
    if (skip != SkipStep::mec_doorbell_range) {
        regs_.write(t.cp_mec_doorbell_range_lower, kMecDoorbellLower);
        regs_.write(t.cp_mec_doorbell_range_upper, kMecDoorbellUpper);
    }
    // gfx_v11_0_cp_compute_enable(adev, true): MEC_INVALIDATE_ICACHE 0, every pipe out of reset and
    // active, MEC_HALT 0 (reset value 0x40000000: halted, gc_11_0_0_default.h), then udelay(50).
    if (skip != SkipStep::mec_unhalt) {
        uint32_t cntl = regs_.read(t.cp_mec_rs64_cntl);
        cntl &= ~(field::kMecInvalidateIcache | field::kMecPipeResetAll | field::kMecHalt);
        cntl |= field::kMecPipeActiveAll;
        regs_.write(t.cp_mec_rs64_cntl, cntl);
        regs_.mmio().device().delay(std::chrono::microseconds(50));
    }
}

}  // namespace baregpu::am
