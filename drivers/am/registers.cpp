#include "drivers/am/registers.hpp"

#include "base/error.hpp"
#include "drivers/pci/pci_device.hpp"

#include <fmt/format.h>

namespace baregpu::am {

std::string_view to_string(HwIp ip) {
    switch (ip) {
        case HwIp::mp1: return "MP1";
        case HwIp::gc: return "GC";
        case HwIp::mmhub: return "MMHUB";
        case HwIp::osssys: return "OSSSYS";
        case HwIp::hdp: return "HDP";
        case HwIp::sdma0: return "SDMA0";
        case HwIp::sdma1: return "SDMA1";
        case HwIp::nbio: return "NBIO";
        case HwIp::mp0: return "MP0";
    }
    return "?";
}

namespace {

constexpr RegDef r(std::string_view name, HwIp ip, uint8_t base_idx, uint32_t offset) {
    return RegDef{name, ip, base_idx, offset};
}

// A VM hub's registers laid out as Linux's gc/mmhub headers have them: the VM context block
// (CONTEXT0_CNTL, INVALIDATE_ENG*_SEM/REQ/ACK, CONTEXT0_PAGE_TABLE_*) and the MC block
// (FB_LOCATION, AGP, SYSTEM_APERTURE, MX_L1_TLB_CNTL) and the L2 block (L2_CNTL*, PROTECTION_FAULT_*).
struct HubLayout {
    std::string_view prefix;  // only for the table's readability
    HwIp ip;
    uint8_t idx;
    uint32_t agp_top, agp_bot, agp_base, aperture_low, aperture_high, mx_l1_tlb_cntl;
    uint32_t default_lsb, default_msb;
    uint32_t l2_cntl, l2_cntl2, l2_cntl3, fault_cntl, fault_status, fault_addr_lo, fault_addr_hi, fault_default_lo,
        fault_default_hi;
    uint32_t context0_cntl, eng17_sem, eng17_req, eng17_ack, pt_base_lo, pt_start_lo, pt_end_lo;
    uint32_t eng0_addr_range_lo = 0, bank_select_reserved_cid2 = 0;  // the latter MM hub only
    uint32_t l2_cntl4 = 0, l2_cntl5 = 0, fault_cntl2 = 0;
};

VmHubRegs hub(const HubLayout& l, bool gc, bool lo32_status, bool gc12_layout) {
    HwIp ip = l.ip;
    uint8_t i = l.idx;
    VmHubRegs h;
    h.agp_base = r(gc ? "GCMC_VM_AGP_BASE" : "MMMC_VM_AGP_BASE", ip, i, l.agp_base);
    h.agp_bot = r(gc ? "GCMC_VM_AGP_BOT" : "MMMC_VM_AGP_BOT", ip, i, l.agp_bot);
    h.agp_top = r(gc ? "GCMC_VM_AGP_TOP" : "MMMC_VM_AGP_TOP", ip, i, l.agp_top);
    h.system_aperture_low = r(gc ? "GCMC_VM_SYSTEM_APERTURE_LOW_ADDR" : "MMMC_VM_SYSTEM_APERTURE_LOW_ADDR", ip, i,
                              l.aperture_low);
    h.system_aperture_high = r(gc ? "GCMC_VM_SYSTEM_APERTURE_HIGH_ADDR" : "MMMC_VM_SYSTEM_APERTURE_HIGH_ADDR", ip, i,
                               l.aperture_high);
    h.system_aperture_default_lsb = r(gc ? "GCMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB"
                                         : "MMMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB", ip, i, l.default_lsb);
    h.system_aperture_default_msb = r(gc ? "GCMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB"
                                         : "MMMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB", ip, i, l.default_msb);
    h.fault_default_addr_lo = r(gc ? "GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32"
                                   : "MMVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32", ip, i, l.fault_default_lo);
    h.fault_default_addr_hi = r(gc ? "GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32"
                                   : "MMVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32", ip, i, l.fault_default_hi);
    h.mx_l1_tlb_cntl = r(gc ? "GCMC_VM_MX_L1_TLB_CNTL" : "MMMC_VM_MX_L1_TLB_CNTL", ip, i, l.mx_l1_tlb_cntl);
    h.l2_cntl = r(gc ? "GCVM_L2_CNTL" : "MMVM_L2_CNTL", ip, i, l.l2_cntl);
    h.l2_cntl2 = r(gc ? "GCVM_L2_CNTL2" : "MMVM_L2_CNTL2", ip, i, l.l2_cntl2);
    h.l2_cntl3 = r(gc ? "GCVM_L2_CNTL3" : "MMVM_L2_CNTL3", ip, i, l.l2_cntl3);
    h.l2_cntl4 = r(gc ? "GCVM_L2_CNTL4" : "MMVM_L2_CNTL4", ip, i, l.l2_cntl4);
    h.l2_cntl5 = r(gc ? "GCVM_L2_CNTL5" : "MMVM_L2_CNTL5", ip, i, l.l2_cntl5);
    h.l2_protection_fault_cntl2 = r(gc ? "GCVM_L2_PROTECTION_FAULT_CNTL2" : "MMVM_L2_PROTECTION_FAULT_CNTL2", ip, i,
                                    l.fault_cntl2);
    h.l2_protection_fault_cntl = r(gc ? "GCVM_L2_PROTECTION_FAULT_CNTL" : "MMVM_L2_PROTECTION_FAULT_CNTL", ip, i,
                                   l.fault_cntl);
    h.l2_protection_fault_status =
        r(gc ? (lo32_status ? "GCVM_L2_PROTECTION_FAULT_STATUS_LO32" : "GCVM_L2_PROTECTION_FAULT_STATUS")
             : (lo32_status ? "MMVM_L2_PROTECTION_FAULT_STATUS_LO32" : "MMVM_L2_PROTECTION_FAULT_STATUS"),
          ip, i, l.fault_status);
    h.l2_protection_fault_addr_lo = r(gc ? "GCVM_L2_PROTECTION_FAULT_ADDR_LO32" : "MMVM_L2_PROTECTION_FAULT_ADDR_LO32",
                                      ip, i, l.fault_addr_lo);
    h.l2_protection_fault_addr_hi = r(gc ? "GCVM_L2_PROTECTION_FAULT_ADDR_HI32" : "MMVM_L2_PROTECTION_FAULT_ADDR_HI32",
                                      ip, i, l.fault_addr_hi);
    h.context0_cntl = r(gc ? "GCVM_CONTEXT0_CNTL" : "MMVM_CONTEXT0_CNTL", ip, i, l.context0_cntl);
    h.context0_pt_base_lo = r(gc ? "GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32" : "MMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32",
                              ip, i, l.pt_base_lo);
    h.context0_pt_base_hi = r(gc ? "GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32" : "MMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32",
                              ip, i, l.pt_base_lo + 1);
    h.context0_pt_start_lo = r(gc ? "GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32"
                                  : "MMVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32", ip, i, l.pt_start_lo);
    h.context0_pt_start_hi = r(gc ? "GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32"
                                  : "MMVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32", ip, i, l.pt_start_lo + 1);
    h.context0_pt_end_lo = r(gc ? "GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32" : "MMVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32",
                             ip, i, l.pt_end_lo);
    h.context0_pt_end_hi = r(gc ? "GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32" : "MMVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32",
                             ip, i, l.pt_end_lo + 1);
    h.invalidate_eng17_sem = r(gc ? "GCVM_INVALIDATE_ENG17_SEM" : "MMVM_INVALIDATE_ENG17_SEM", ip, i, l.eng17_sem);
    h.invalidate_eng17_req = r(gc ? "GCVM_INVALIDATE_ENG17_REQ" : "MMVM_INVALIDATE_ENG17_REQ", ip, i, l.eng17_req);
    h.invalidate_eng17_ack = r(gc ? "GCVM_INVALIDATE_ENG17_ACK" : "MMVM_INVALIDATE_ENG17_ACK", ip, i, l.eng17_ack);
    h.invalidate_eng0_addr_range_lo32 = r(gc ? "GCVM_INVALIDATE_ENG0_ADDR_RANGE_LO32" : "MMVM_INVALIDATE_ENG0_ADDR_RANGE_LO32",
                                          ip, i, l.eng0_addr_range_lo);
    if (!gc) h.l2_bank_select_reserved_cid2 = r("MMVM_L2_BANK_SELECT_RESERVED_CID2", ip, i, l.bank_select_reserved_cid2);
    h.gc12_context_layout = gc12_layout;
    return h;
}

// The PSP mailbox: mp_13_0_0_offset.h regMP0_SMN_C2PMSG_{35,36,64,67,69,70,71,81} (BASE_IDX 0) and
// mp_14_0_2_offset.h regMPASP_SMN_C2PMSG_* at the same offsets. The SMU mailbox: regMP1_SMN_C2PMSG_
// {66,82,90} and the debug mailbox {75,53,54} (BASE_IDX 0), same in both headers (smu_v13_0.c /
// smu_v14_0.c smu_*_set_smu_mailbox_registers).
void common_mp(RegisterTable& t, bool mpasp) {
    auto p = [&](std::string_view v13, std::string_view v14, uint32_t off) { return r(mpasp ? v14 : v13, HwIp::mp0, 0, off); };
    t.psp_c2pmsg_35 = p("MP0_SMN_C2PMSG_35", "MPASP_SMN_C2PMSG_35", 0x0063);
    t.psp_c2pmsg_36 = p("MP0_SMN_C2PMSG_36", "MPASP_SMN_C2PMSG_36", 0x0064);
    t.psp_c2pmsg_64 = p("MP0_SMN_C2PMSG_64", "MPASP_SMN_C2PMSG_64", 0x0080);
    t.psp_c2pmsg_67 = p("MP0_SMN_C2PMSG_67", "MPASP_SMN_C2PMSG_67", 0x0083);
    t.psp_c2pmsg_69 = p("MP0_SMN_C2PMSG_69", "MPASP_SMN_C2PMSG_69", 0x0085);
    t.psp_c2pmsg_70 = p("MP0_SMN_C2PMSG_70", "MPASP_SMN_C2PMSG_70", 0x0086);
    t.psp_c2pmsg_71 = p("MP0_SMN_C2PMSG_71", "MPASP_SMN_C2PMSG_71", 0x0087);
    t.psp_c2pmsg_81 = p("MP0_SMN_C2PMSG_81", "MPASP_SMN_C2PMSG_81", 0x0091);
    // MP1: mp_13_0_0_offset.h has the SMU mailbox in BASE_IDX 0 at 0x240 + n; mp_14_0_2_offset.h
    // moved it to BASE_IDX 1 at 0x40 + n (regMP1_SMN_C2PMSG_66 = 0x0082).
    uint8_t idx = mpasp ? 1 : 0;
    uint32_t at = mpasp ? 0x40 : 0x240;
    t.smu_msg_66 = r("MP1_SMN_C2PMSG_66", HwIp::mp1, idx, at + 66);
    t.smu_param_82 = r("MP1_SMN_C2PMSG_82", HwIp::mp1, idx, at + 82);
    t.smu_resp_90 = r("MP1_SMN_C2PMSG_90", HwIp::mp1, idx, at + 90);
    t.smu_debug_msg_75 = r("MP1_SMN_C2PMSG_75", HwIp::mp1, idx, at + 75);
    t.smu_debug_param_53 = r("MP1_SMN_C2PMSG_53", HwIp::mp1, idx, at + 53);
    t.smu_debug_resp_54 = r("MP1_SMN_C2PMSG_54", HwIp::mp1, idx, at + 54);
}

// osssys_6_0_0_offset.h: regIH_RB_CNTL 0x80, _BASE 0x81, _BASE_HI 0x82, _RPTR 0x83, _WPTR 0x84;
// osssys_7_0_0_offset.h moved the pointers before the base: _RPTR 0x81, _WPTR 0x82, _BASE 0x83,
// _BASE_HI 0x84. Both: _WPTR_ADDR_HI 0x85, _WPTR_ADDR_LO 0x86, IH_DOORBELL_RPTR 0x87 (BASE_IDX 0).
void common_ih(RegisterTable& t, bool osssys7) {
    t.ih_rb_cntl = r("IH_RB_CNTL", HwIp::osssys, 0, 0x0080);
    t.ih_rb_base = r("IH_RB_BASE", HwIp::osssys, 0, osssys7 ? 0x0083 : 0x0081);
    t.ih_rb_base_hi = r("IH_RB_BASE_HI", HwIp::osssys, 0, osssys7 ? 0x0084 : 0x0082);
    t.ih_rb_rptr = r("IH_RB_RPTR", HwIp::osssys, 0, osssys7 ? 0x0081 : 0x0083);
    t.ih_rb_wptr = r("IH_RB_WPTR", HwIp::osssys, 0, osssys7 ? 0x0082 : 0x0084);
    t.ih_rb_wptr_addr_hi = r("IH_RB_WPTR_ADDR_HI", HwIp::osssys, 0, 0x0085);
    t.ih_rb_wptr_addr_lo = r("IH_RB_WPTR_ADDR_LO", HwIp::osssys, 0, 0x0086);
    t.ih_doorbell_rptr = r("IH_DOORBELL_RPTR", HwIp::osssys, 0, 0x0087);
}

// nbio_4_3_0_offset.h / nbif_6_3_1_offset.h: regBIF_BX_PF0_RSMU_INDEX/DATA (BASE_IDX 1),
// regBIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL, regRCC_DEV0_EPF0_RCC_DOORBELL_APER_EN (BASE_IDX 2),
// regRCC_DEV0_EPF2_STRAP2 0xd102 BASE_IDX 5 (block nbio_nbif0_rcc_strap_rcc_strap_internal: past
// a 1 MiB BAR5, so through the RSMU pair).
void common_nbio(RegisterTable& t, bool nbif) {
    t.rsmu_index = r("BIF_BX_PF0_RSMU_INDEX", HwIp::nbio, 1, 0x0000);
    t.rsmu_data = r("BIF_BX_PF0_RSMU_DATA", HwIp::nbio, 1, 0x0001);
    t.remap_hdp_mem_flush_cntl = r("BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL", HwIp::nbio, 2, 0x012d);
    t.doorbell_aper_en = r("RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN", HwIp::nbio, 2, 0x00c0);
    t.rcc_dev0_epf2_strap2 = r("RCC_DEV0_EPF2_STRAP2", HwIp::nbio, 5, 0xd102);
    // nbio_4_3_0_offset.h regS2A_DOORBELL_ENTRY_n_CTRL 0x4f7640 + n, BASE_IDX 3 (past BAR5: RSMU);
    // nbif_6_3_1_offset.h regGDC_S2A0_S2A_DOORBELL_ENTRY_n_CTRL 0x01cb + n, BASE_IDX 2.
    if (nbif) {
        t.s2a_doorbell_entry0_ctrl = r("GDC_S2A0_S2A_DOORBELL_ENTRY_0_CTRL", HwIp::nbio, 2, 0x01cb);
        t.s2a_doorbell_entry2_ctrl = r("GDC_S2A0_S2A_DOORBELL_ENTRY_2_CTRL", HwIp::nbio, 2, 0x01cd);
        t.s2a_doorbell_entry3_ctrl = r("GDC_S2A0_S2A_DOORBELL_ENTRY_3_CTRL", HwIp::nbio, 2, 0x01ce);
    } else {
        t.s2a_doorbell_entry0_ctrl = r("S2A_DOORBELL_ENTRY_0_CTRL", HwIp::nbio, 3, 0x4f7640);
        t.s2a_doorbell_entry2_ctrl = r("S2A_DOORBELL_ENTRY_2_CTRL", HwIp::nbio, 3, 0x4f7642);
        t.s2a_doorbell_entry3_ctrl = r("S2A_DOORBELL_ENTRY_3_CTRL", HwIp::nbio, 3, 0x4f7643);
    }
}

// The queue registers GC 11 and GC 12 share (gc_11_0_0_offset.h and gc_12_0_0_offset.h have the
// same values): GRBM_GFX_CNTL and CP_MEC_RS64_CNTL (BASE_IDX 1), the MEC's HQD block
// CP_MQD_BASE_ADDR 0x1fa9 .. CP_HQD_PQ_WPTR_HI 0x1fe0 in the same order (Linux v11_structs.h v11_compute_mqd, so
// mqd::register_block maps onto both), and SDMA0 queue 0's ring registers RB_CNTL .. RB_WPTR_HI and
// RB_RPTR_ADDR_HI, which SDMA 6 and SDMA 7 both keep in GC's space (BASE_IDX 0; sdma_v6_0.c /
// sdma_v7_0.c get_reg_offset: reg_offset[GC_HWIP][0][0] + offset).
void common_queues(RegisterTable& t) {
    t.grbm_gfx_cntl = r("GRBM_GFX_CNTL", HwIp::gc, 1, 0x0900);
    t.cp_mec_rs64_cntl = r("CP_MEC_RS64_CNTL", HwIp::gc, 1, 0x2904);
    t.cp_mqd_base_addr = r("CP_MQD_BASE_ADDR", HwIp::gc, 0, 0x1fa9);
    t.cp_hqd_active = r("CP_HQD_ACTIVE", HwIp::gc, 0, 0x1fab);
    t.cp_hqd_dequeue_request = r("CP_HQD_DEQUEUE_REQUEST", HwIp::gc, 0, 0x1fc1);
    t.sdma0_queue0_rb_cntl = r("SDMA0_QUEUE0_RB_CNTL", HwIp::gc, 0, 0x0080);
    t.sdma0_queue0_rb_base = r("SDMA0_QUEUE0_RB_BASE", HwIp::gc, 0, 0x0081);
    t.sdma0_queue0_rb_base_hi = r("SDMA0_QUEUE0_RB_BASE_HI", HwIp::gc, 0, 0x0082);
    t.sdma0_queue0_rb_rptr = r("SDMA0_QUEUE0_RB_RPTR", HwIp::gc, 0, 0x0083);
    t.sdma0_queue0_rb_rptr_hi = r("SDMA0_QUEUE0_RB_RPTR_HI", HwIp::gc, 0, 0x0084);
    t.sdma0_queue0_rb_wptr = r("SDMA0_QUEUE0_RB_WPTR", HwIp::gc, 0, 0x0085);
    t.sdma0_queue0_rb_wptr_hi = r("SDMA0_QUEUE0_RB_WPTR_HI", HwIp::gc, 0, 0x0086);
    t.sdma0_queue0_rb_rptr_addr_hi = r("SDMA0_QUEUE0_RB_RPTR_ADDR_HI", HwIp::gc, 0, 0x0088);
    // Both headers: CP_MEC_RS64_PRGRM_CNTR_START 0x2900 and _HI 0x2938 (BASE_IDX 1),
    // CP_MEC_DOORBELL_RANGE_LOWER/UPPER 0x1dfc/0x1dfd (BASE_IDX 0), SH_MEM_BASES/CONFIG 0x9e3/0x9e4 (BASE_IDX 1).
    t.cp_mec_rs64_prgrm_cntr_start = r("CP_MEC_RS64_PRGRM_CNTR_START", HwIp::gc, 1, 0x2900);
    t.cp_mec_rs64_prgrm_cntr_start_hi = r("CP_MEC_RS64_PRGRM_CNTR_START_HI", HwIp::gc, 1, 0x2938);
    t.cp_mec_doorbell_range_lower = r("CP_MEC_DOORBELL_RANGE_LOWER", HwIp::gc, 0, 0x1dfc);
    t.cp_mec_doorbell_range_upper = r("CP_MEC_DOORBELL_RANGE_UPPER", HwIp::gc, 0, 0x1dfd);
    t.sh_mem_bases = r("SH_MEM_BASES", HwIp::gc, 1, 0x09e3);
    t.sh_mem_config = r("SH_MEM_CONFIG", HwIp::gc, 1, 0x09e4);
    // GRBM_CNTL 0xda0 (BASE_IDX 0), TCP_CNTL 0x19a2 and RLC_SRM_CNTL 0x4c80 (BASE_IDX 1), both headers.
    t.grbm_cntl = r("GRBM_CNTL", HwIp::gc, 0, 0x0da0);
    t.tcp_cntl = r("TCP_CNTL", HwIp::gc, 1, 0x19a2);
    t.rlc_srm_cntl = r("RLC_SRM_CNTL", HwIp::gc, 1, 0x4c80);
}

RegisterTable navi31_table() {
    RegisterTable t;
    common_mp(t, false);
    common_ih(t, false);
    common_nbio(t, false);
    // gc_11_0_0_offset.h
    t.scratch_reg6 = r("SCRATCH_REG6", HwIp::gc, 1, 0x2046);
    t.scratch_reg7 = r("SCRATCH_REG7", HwIp::gc, 1, 0x2047);
    t.cp_stat = r("CP_STAT", HwIp::gc, 0, 0x0f40);
    t.rlc_rlcs_bootload_status = r("RLC_RLCS_BOOTLOAD_STATUS", HwIp::gc, 1, 0x4e82);
    t.gc_hub = hub({.prefix = "GC", .ip = HwIp::gc, .idx = 0,
                    .agp_top = 0x167a, .agp_bot = 0x167b, .agp_base = 0x167c, .aperture_low = 0x167d,
                    .aperture_high = 0x167e, .mx_l1_tlb_cntl = 0x167f, .default_lsb = 0x15a8, .default_msb = 0x15a9,
                    .l2_cntl = 0x15bc, .l2_cntl2 = 0x15bd, .l2_cntl3 = 0x15be, .fault_cntl = 0x15c4,
                    .fault_status = 0x15c8, .fault_addr_lo = 0x15c9, .fault_addr_hi = 0x15ca,
                    .fault_default_lo = 0x15cb, .fault_default_hi = 0x15cc,
                    .context0_cntl = 0x1688, .eng17_sem = 0x16aa, .eng17_req = 0x16bc, .eng17_ack = 0x16ce,
                    .pt_base_lo = 0x16f3, .pt_start_lo = 0x1713, .pt_end_lo = 0x1733, .eng0_addr_range_lo = 0x16cf,
                    .l2_cntl4 = 0x15d4, .l2_cntl5 = 0x15da, .fault_cntl2 = 0x15c5},
                   true, false, false);
    // gc_11_0_0_offset.h: SDMA0 queue 0 (SDMA 6) lives in GC's register space (BASE_IDX 0,
    // tinygrad ip.py AM_SDMA); the registers common_queues does not set.
    common_queues(t);
    t.sdma0_queue0_rb_rptr_addr_lo = r("SDMA0_QUEUE0_RB_RPTR_ADDR_LO", HwIp::gc, 0, 0x0089);
    t.sdma0_queue0_ib_cntl = r("SDMA0_QUEUE0_IB_CNTL", HwIp::gc, 0, 0x008a);
    t.sdma0_queue0_doorbell = r("SDMA0_QUEUE0_DOORBELL", HwIp::gc, 0, 0x0092);
    t.sdma0_queue0_doorbell_offset = r("SDMA0_QUEUE0_DOORBELL_OFFSET", HwIp::gc, 0, 0x00ab);
    t.sdma0_queue0_rb_wptr_poll_addr_hi = r("SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI", HwIp::gc, 0, 0x00b2);
    t.sdma0_queue0_rb_wptr_poll_addr_lo = r("SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO", HwIp::gc, 0, 0x00b3);
    t.sdma0_queue0_minor_ptr_update = r("SDMA0_QUEUE0_MINOR_PTR_UPDATE", HwIp::gc, 0, 0x00b5);
    // The engine: SDMA0_F32_CNTL 0x589a (BASE_IDX 1), SDMA0_WATCHDOG_CNTL 0x2e, UTCL1_CNTL 0x3c, UTCL1_PAGE 0x3f.
    t.sdma0_engine_cntl = r("SDMA0_F32_CNTL", HwIp::gc, 1, 0x589a);
    t.sdma0_watchdog_cntl = r("SDMA0_WATCHDOG_CNTL", HwIp::gc, 0, 0x002e);
    t.sdma0_utcl1_cntl = r("SDMA0_UTCL1_CNTL", HwIp::gc, 0, 0x003c);
    t.sdma0_utcl1_page = r("SDMA0_UTCL1_PAGE", HwIp::gc, 0, 0x003f);
    // mmhub_3_0_0_offset.h (BASE_IDX 0)
    t.mmmc_vm_fb_location_base = r("MMMC_VM_FB_LOCATION_BASE", HwIp::mmhub, 0, 0x08ec);
    t.mmmc_vm_fb_location_top = r("MMMC_VM_FB_LOCATION_TOP", HwIp::mmhub, 0, 0x08ed);
    t.mm_hub = hub({.prefix = "MM", .ip = HwIp::mmhub, .idx = 0,
                    .agp_top = 0x08ee, .agp_bot = 0x08ef, .agp_base = 0x08f0, .aperture_low = 0x08f1,
                    .aperture_high = 0x08f2, .mx_l1_tlb_cntl = 0x08f3, .default_lsb = 0x08d8, .default_msb = 0x08d9,
                    .l2_cntl = 0x0700, .l2_cntl2 = 0x0701, .l2_cntl3 = 0x0702, .fault_cntl = 0x0708,
                    .fault_status = 0x070c, .fault_addr_lo = 0x070d, .fault_addr_hi = 0x070e,
                    .fault_default_lo = 0x070f, .fault_default_hi = 0x0710,
                    .context0_cntl = 0x0740, .eng17_sem = 0x0762, .eng17_req = 0x0774, .eng17_ack = 0x0786,
                    .pt_base_lo = 0x07ab, .pt_start_lo = 0x07cb, .pt_end_lo = 0x07eb, .eng0_addr_range_lo = 0x0787,
                    .bank_select_reserved_cid2 = 0x071b, .l2_cntl4 = 0x0718, .l2_cntl5 = 0x071e, .fault_cntl2 = 0x0709},
                   false, false, false);
    return t;
}

RegisterTable navi48_table() {
    RegisterTable t;
    common_mp(t, true);
    common_ih(t, true);
    common_nbio(t, true);
    // gc_12_0_0_offset.h (Linux has no gc_12_0_1 header; GC 12.0.1 uses 12.0.0's)
    t.scratch_reg6 = r("SCRATCH_REG6", HwIp::gc, 1, 0x2046);
    t.scratch_reg7 = r("SCRATCH_REG7", HwIp::gc, 1, 0x2047);
    t.cp_stat = r("CP_STAT", HwIp::gc, 0, 0x0f40);
    t.rlc_rlcs_bootload_status = r("RLC_RLCS_BOOTLOAD_STATUS", HwIp::gc, 1, 0x4e7c);
    t.gc_hub = hub({.prefix = "GC", .ip = HwIp::gc, .idx = 0,
                    .agp_top = 0x1616, .agp_bot = 0x1617, .agp_base = 0x1618, .aperture_low = 0x1619,
                    .aperture_high = 0x161a, .mx_l1_tlb_cntl = 0x161b, .default_lsb = 0x15a8, .default_msb = 0x15a9,
                    .l2_cntl = 0x15c4, .l2_cntl2 = 0x15c5, .l2_cntl3 = 0x15c6, .fault_cntl = 0x15cc,
                    .fault_status = 0x15d0, .fault_addr_lo = 0x15d2, .fault_addr_hi = 0x15d3,
                    .fault_default_lo = 0x15d4, .fault_default_hi = 0x15d5,
                    .context0_cntl = 0x1624, .eng17_sem = 0x1646, .eng17_req = 0x1658, .eng17_ack = 0x166a,
                    .pt_base_lo = 0x168f, .pt_start_lo = 0x16af, .pt_end_lo = 0x16cf, .eng0_addr_range_lo = 0x166b,
                    .l2_cntl4 = 0x15dd, .l2_cntl5 = 0x15e3, .fault_cntl2 = 0x15cd},
                   true, true, true);
    // gc_12_0_0_offset.h: SDMA 7's queue block (gc_gfx_cpwd_sdma0_sdmadec) was repacked:
    // RPTR_ADDR_LO now precedes _HI, and IB_CNTL, DOORBELL, DOORBELL_OFFSET, WPTR_POLL_ADDR_LO/HI and
    // MINOR_PTR_UPDATE moved.
    common_queues(t);
    t.sdma0_queue0_rb_rptr_addr_lo = r("SDMA0_QUEUE0_RB_RPTR_ADDR_LO", HwIp::gc, 0, 0x0087);
    t.sdma0_queue0_ib_cntl = r("SDMA0_QUEUE0_IB_CNTL", HwIp::gc, 0, 0x0089);
    t.sdma0_queue0_doorbell = r("SDMA0_QUEUE0_DOORBELL", HwIp::gc, 0, 0x008f);
    t.sdma0_queue0_doorbell_offset = r("SDMA0_QUEUE0_DOORBELL_OFFSET", HwIp::gc, 0, 0x0091);
    t.sdma0_queue0_rb_wptr_poll_addr_lo = r("SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO", HwIp::gc, 0, 0x0098);
    t.sdma0_queue0_rb_wptr_poll_addr_hi = r("SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI", HwIp::gc, 0, 0x0099);
    t.sdma0_queue0_minor_ptr_update = r("SDMA0_QUEUE0_MINOR_PTR_UPDATE", HwIp::gc, 0, 0x009b);
    // SDMA 7 replaced F32_CNTL by SDMA0_MCU_CNTL 0x588e (BASE_IDX 1); WATCHDOG_CNTL 0x2b, UTCL1_CNTL 0x35,
    // UTCL1_PAGE 0x38.
    t.sdma0_engine_cntl = r("SDMA0_MCU_CNTL", HwIp::gc, 1, 0x588e);
    t.sdma0_watchdog_cntl = r("SDMA0_WATCHDOG_CNTL", HwIp::gc, 0, 0x002b);
    t.sdma0_utcl1_cntl = r("SDMA0_UTCL1_CNTL", HwIp::gc, 0, 0x0035);
    t.sdma0_utcl1_page = r("SDMA0_UTCL1_PAGE", HwIp::gc, 0, 0x0038);
    t.sdma7 = true;
    // mmhub_4_1_0_offset.h (BASE_IDX 0)
    t.mmmc_vm_fb_location_base = r("MMMC_VM_FB_LOCATION_BASE", HwIp::mmhub, 0, 0x0554);
    t.mmmc_vm_fb_location_top = r("MMMC_VM_FB_LOCATION_TOP", HwIp::mmhub, 0, 0x0555);
    t.mm_hub = hub({.prefix = "MM", .ip = HwIp::mmhub, .idx = 0,
                    .agp_top = 0x0556, .agp_bot = 0x0557, .agp_base = 0x0558, .aperture_low = 0x0559,
                    .aperture_high = 0x055a, .mx_l1_tlb_cntl = 0x055b, .default_lsb = 0x04c8, .default_msb = 0x04c9,
                    .l2_cntl = 0x04e4, .l2_cntl2 = 0x04e5, .l2_cntl3 = 0x04e6, .fault_cntl = 0x04ec,
                    .fault_status = 0x04f0, .fault_addr_lo = 0x04f2, .fault_addr_hi = 0x04f3,
                    .fault_default_lo = 0x04f4, .fault_default_hi = 0x04f5,
                    .context0_cntl = 0x0564, .eng17_sem = 0x0586, .eng17_req = 0x0598, .eng17_ack = 0x05aa,
                    .pt_base_lo = 0x05cf, .pt_start_lo = 0x05ef, .pt_end_lo = 0x060f, .eng0_addr_range_lo = 0x05ab,
                    .bank_select_reserved_cid2 = 0x0500, .l2_cntl4 = 0x04fd, .l2_cntl5 = 0x0503, .fault_cntl2 = 0x04ed},
                   false, true, true);
    return t;
}

}  // namespace

const RegisterTable& register_table(const AsicInfo& asic) {
    static const RegisterTable navi31 = navi31_table();
    static const RegisterTable navi48 = navi48_table();
    return asic.gc_generation >= 12 ? navi48 : navi31;
}

void IpBases::set(HwIp ip, std::array<uint32_t, 8> bases, unsigned count) {
    for (unsigned i = 0; i < used_; ++i) {
        if (entries_[i].hw_id == static_cast<uint16_t>(ip)) {
            entries_[i] = Entry{static_cast<uint16_t>(ip), count, bases};
            return;
        }
    }
    if (used_ == entries_.size()) throw Error("", "IpBases: too many IP blocks");
    entries_[used_++] = Entry{static_cast<uint16_t>(ip), count, bases};
}

bool IpBases::has(HwIp ip) const {
    for (unsigned i = 0; i < used_; ++i) {
        if (entries_[i].hw_id == static_cast<uint16_t>(ip)) return true;
    }
    return false;
}

uint32_t IpBases::address(const RegDef& reg, const std::string& device) const {
    for (unsigned i = 0; i < used_; ++i) {
        const Entry& e = entries_[i];
        if (e.hw_id != static_cast<uint16_t>(reg.ip)) continue;
        if (reg.base_idx >= e.count) {
            throw ProtocolError(device, fmt::format("register {} needs {} base {} but discovery gave {} base(s)",
                                                    reg.name, to_string(reg.ip), reg.base_idx, e.count));
        }
        return e.bases[reg.base_idx] + reg.offset;
    }
    throw ProtocolError(device, fmt::format("register {}: discovery has no {} block", reg.name, to_string(reg.ip)));
}

Mmio::Mmio(pci::PciDevice& device, pci::MmioRegion& bar5) : device_(device), bar5_(bar5), bar5_size_(bar5.size()) {}

void Mmio::set_indirect(uint32_t index_addr, uint32_t data_addr) {
    index_addr_ = index_addr;
    data_addr_ = data_addr;
    have_indirect_ = true;
}

uint32_t Mmio::read(uint32_t addr, std::string_view what) {
    uint32_t value;
    if (direct(addr)) {
        ++reads_;
        value = bar5_.read32(BarOffset(uint64_t{addr} * 4));
    } else {
        if (!have_indirect_) {
            throw ProtocolError(device_.name(), fmt::format("register {} (dword {:#x}) lies past BAR5 ({} bytes) and "
                                                            "the RSMU index/data pair is not known yet",
                                                            what, addr, bar5_size_));
        }
        // nbio_v4_3.c get_pcie_port_index/data_offset: index = byte address, then data.
        write(index_addr_, addr * 4);
        ++reads_;
        value = bar5_.read32(BarOffset(uint64_t{data_addr_} * 4));
    }
    // No register bring-up reads holds all-ones in normal operation; config space says
    // whether the device is still there (DeviceLostError) or the value is real.
    if (value == 0xffffffffu) device_.check_alive();
    return value;
}

void Mmio::write(uint32_t addr, uint32_t value) {
    if (direct(addr)) {
        ++writes_;
        bar5_.write32(BarOffset(uint64_t{addr} * 4), value);
        return;
    }
    if (!have_indirect_) {
        throw ProtocolError(device_.name(), fmt::format("dword {:#x} lies past BAR5 ({} bytes) and the RSMU "
                                                        "index/data pair is not known yet", addr, bar5_size_));
    }
    write(index_addr_, addr * 4);
    ++writes_;
    bar5_.write32(BarOffset(uint64_t{data_addr_} * 4), value);
}

Registers::Registers(Mmio& mmio, const RegisterTable& table, IpBases bases)
    : mmio_(mmio), table_(table), bases_(bases) {}

uint32_t Registers::address(const RegDef& reg) const { return bases_.address(reg, mmio_.device().name()); }
uint32_t Registers::read(const RegDef& reg) { return mmio_.read(address(reg), reg.name); }
void Registers::write(const RegDef& reg, uint32_t value) { mmio_.write(address(reg), value); }

}  // namespace baregpu::am
