// Absolute dword addresses of every register the model gives meaning to, for one ASIC:
// discovery base[BASE_IDX] + offset, offsets and BASE_IDX from the Linux asic_reg headers named
// next to each (torvalds/linux drivers/gpu/drm/amd/include/asic_reg/...). Registers not listed
// here are plain storage: they read back what was written.
#pragma once

#include "drivers/sim/amdgpu/asic.hpp"

#include <cstdint>

namespace baregpu::sim::amdgpu {

// Fixed addresses, valid before any base is known.
// MM_INDEX/MM_DATA/MM_INDEX_HI: mmMM_INDEX 0x0, mmMM_DATA 0x1, mmMM_INDEX_HI 0x6 as Linux
// amdgpu_device_mm_access uses them (NBIO segment 0, which is 0 on every Navi).
namespace fixed {
inline constexpr uint32_t kMmIndex = 0x0;
inline constexpr uint32_t kMmData = 0x1;
inline constexpr uint32_t kMmIndexHi = 0x6;
inline constexpr uint32_t kRccConfigMemsize = 0xde3;  // mmRCC_CONFIG_MEMSIZE, VRAM in MiB (tinygrad amdev.py AMDev._run_discovery)
}  // namespace fixed

struct RegisterMap {
    // MP0 = PSP: mp_13_0_0_offset.h regMP0_SMN_C2PMSG_n / mp_14_0_2_offset.h regMPASP_SMN_C2PMSG_n,
    // both BASE_IDX 0, offset 0x40 + n.
    uint32_t psp_33 = 0, psp_35 = 0, psp_36 = 0, psp_64 = 0, psp_67 = 0, psp_69 = 0, psp_70 = 0, psp_71 = 0, psp_81 = 0;
    // MP1 = SMU mailbox: mp_13_0_0_offset.h regMP1_SMN_C2PMSG_n BASE_IDX 0 at 0x240 + n;
    // mp_14_0_2_offset.h BASE_IDX 1 at 0x40 + n. 66 msg / 82 param / 90 resp (smu_cmn.c),
    // debug mailbox 75 msg / 53 param / 54 resp (smu_v13_0.c, smu_v14_0.c).
    uint32_t smu_msg = 0, smu_param = 0, smu_resp = 0, smu_debug_msg = 0, smu_debug_param = 0, smu_debug_resp = 0;
    // NBIO 4.3.0 (nbio_4_3_0_offset.h) / NBIF 6.3.1 (nbif_6_3_1_offset.h): same offsets.
    uint32_t rsmu_index = 0, rsmu_data = 0;  // regBIF_BX_PF0_RSMU_INDEX/DATA 0x0/0x1, BASE_IDX 1
    uint32_t remap_hdp_mem_flush_cntl = 0;   // regBIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL 0x12d, BASE_IDX 2
    uint32_t gpu_hdp_flush_req = 0, gpu_hdp_flush_done = 0;  // regBIF_BX_PF0_GPU_HDP_FLUSH_REQ/DONE 0x106/0x107, BASE_IDX 2
    uint32_t rcc_dev0_epf2_strap2 = 0;  // regRCC_DEV0_EPF2_STRAP2 0xd102, BASE_IDX 5 (past BAR5: RSMU only)
    // GC (gc_11_0_0_offset.h / gc_12_0_0_offset.h).
    uint32_t scratch_reg6 = 0, scratch_reg7 = 0;  // 0x2046/0x2047 BASE_IDX 1
    uint32_t cp_stat = 0;                         // 0xf40 BASE_IDX 0
    uint32_t rlc_bootload_status = 0;             // gc11 0x4e82 / gc12 0x4e7c, BASE_IDX 1
    // VM hubs: GC (gfxhub) and MM (mmhub_3_0_0 / mmhub_4_1_0). BASE_IDX 0 for all of them.
    struct Hub {
        uint32_t fb_location_base = 0, fb_location_top = 0;
        uint32_t system_aperture_low = 0, system_aperture_high = 0;
        uint32_t agp_top = 0, agp_bot = 0, agp_base = 0;
        uint32_t context0_cntl = 0;
        uint32_t pt_base_lo = 0, pt_base_hi = 0, pt_start_lo = 0, pt_start_hi = 0, pt_end_lo = 0, pt_end_hi = 0;
        uint32_t inv_eng17_sem = 0, inv_eng17_req = 0, inv_eng17_ack = 0;
        uint32_t fault_status = 0;  // ..._L2_PROTECTION_FAULT_STATUS (GC12/MMHUB4: _LO32)
        uint32_t fault_cntl = 0;    // ..._L2_PROTECTION_FAULT_CNTL (0 where not modelled)
        uint32_t fault_addr_lo = 0, fault_addr_hi = 0;
        uint32_t inv_eng17_range_lo = 0, inv_eng17_range_hi = 0;  // VM_INVALIDATE_ENG17_ADDR_RANGE_LO32/HI32
        uint32_t bank_select_reserved_cid2 = 0;                    // MM hub only: the private invalidation
    } gc, mm;
    bool gc12_context_layout = false;  // VM_CONTEXT*_CNTL fields as gc_12_0_0 / mmhub_4_1_0 place them
    // OSSSYS IH ring 0 (osssys_6_0_0_offset.h / osssys_7_0_0_offset.h, BASE_IDX 0; 7.0 reorders them).
    uint32_t ih_rb_cntl = 0, ih_rb_base = 0, ih_rb_base_hi = 0, ih_rb_rptr = 0, ih_rb_wptr = 0,
             ih_rb_wptr_addr_hi = 0, ih_rb_wptr_addr_lo = 0;

    static RegisterMap build(const AsicInfo& asic);
};

// Fields (the _sh_mask.h headers of the same blocks).
namespace field {
inline constexpr uint32_t kPspBootloaderReady = 0x80000000u;  // C2PMSG_35 bit 31 (psp_v13_0.c waits on it)
inline constexpr uint32_t kPspRingResponse = 0x80000000u;     // C2PMSG_64 bit 31
inline constexpr uint32_t kRlcBootloadComplete = 0x80000000u;  // RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE
inline constexpr uint32_t kCpStatCpBusy = 0x80000000u;         // CP_STAT.CP_BUSY
// nbio_4_3_0_sh_mask.h / nbif_6_3_1_sh_mask.h RCC_DEV0_EPF2_STRAP2__STRAP_NO_SOFT_RESET_DEV0_F2_MASK
inline constexpr uint32_t kStrapNoSoftResetDev0F2 = 0x80u;
// VM_CONTEXT0_CNTL: ENABLE_CONTEXT bit 0, PAGE_TABLE_DEPTH bits 1-2 on both generations. Then GC 11 /
// MMHUB 3.0 (gc_11_0_0_sh_mask.h): PAGE_TABLE_BLOCK_SIZE 6:3, RETRY_PERMISSION_OR_INVALID_PAGE_FAULT 7,
// RETRY_OTHER_FAULT 8, and from bit 9 an ENABLE_INTERRUPT / ENABLE_DEFAULT pair per fault kind (RANGE,
// DUMMY_PAGE, PDE0, VALID, READ, WRITE, EXECUTE). GC 12 / MMHUB 4.1 (gc_12_0_0_sh_mask.h,
// mmhub_4_1_0_sh_mask.h, as tinygrad's regs.py lists them): block size 7:4, the retries at 8 and 9, the
// pairs from bit 10.
inline constexpr uint32_t kContextEnable = 0x1;
inline constexpr unsigned kPageTableDepthShift = 1;
struct ContextCntlLayout {
    unsigned retry_permission_or_invalid, retry_other, first_enable;
};
inline constexpr ContextCntlLayout kContextCntlGc11{7, 8, 9}, kContextCntlGc12{8, 9, 10};
enum class FaultKind : unsigned { range = 0, dummy_page = 1, pde0 = 2, valid = 3, read = 4, write = 5, execute = 6 };
// VM_INVALIDATE_ENGn_ADDR_RANGE_LO32: S_BIT 0, LOGI_PAGE_ADDR_RANGE_LO31 31:1; _HI32: LOGI_PAGE_ADDR_RANGE_HI5 4:0.
// MMVM_L2_BANK_SELECT_RESERVED_CID2.RESERVED_CACHE_PRIVATE_INVALIDATION bit 25.
inline constexpr uint32_t kMmhubPrivateInvalidation = 1u << 25;
// VM_INVALIDATE_ENG17_REQ.PER_VMID_INVALIDATE_REQ bits 0-15; _ACK.PER_VMID_INVALIDATE_ACK bits 0-15.
inline constexpr uint32_t kPerVmidMask = 0xffff;
// VM_L2_PROTECTION_FAULT_STATUS: MORE_FAULTS 0, WALKER_ERROR 1-3, PERMISSION_FAULTS 4-7,
// MAPPING_ERROR 8, CID 9-17, RW 18, VMID 20-23. VM_L2_PROTECTION_FAULT_CNTL bit 0:
// CLEAR_PROTECTION_FAULT_STATUS_ADDR.
inline constexpr uint32_t kFaultMoreFaults = 1u << 0;
inline constexpr uint32_t kFaultMappingError = 1u << 8;
inline constexpr unsigned kFaultCidShift = 9;
inline constexpr uint32_t kFaultRw = 1u << 18;
inline constexpr uint32_t kFaultClearStatusAddr = 1u << 0;
// IH_RB_CNTL (osssys_6_0_0_sh_mask.h): RB_ENABLE 0, RB_SIZE 1-5, WPTR_WRITEBACK_ENABLE 8,
// WPTR_OVERFLOW_ENABLE 16, ENABLE_INTR 17, WPTR_OVERFLOW_CLEAR 31. IH_RB_WPTR: RB_OVERFLOW 0,
// OFFSET 2-17 (a byte offset); IH_RB_RPTR: OFFSET 2-17.
inline constexpr uint32_t kIhRbEnable = 1u << 0;
inline constexpr unsigned kIhRbSizeShift = 1;
inline constexpr uint32_t kIhRbSizeMask = 0x1f;
inline constexpr uint32_t kIhWptrOverflowEnable = 1u << 16;
inline constexpr uint32_t kIhEnableIntr = 1u << 17;
inline constexpr uint32_t kIhWptrOverflowClear = 1u << 31;
inline constexpr uint32_t kIhRbOverflow = 1u << 0;
inline constexpr uint32_t kIhOffsetMask = 0x3fffc;
}  // namespace field

}  // namespace baregpu::sim::amdgpu
