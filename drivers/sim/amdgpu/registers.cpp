#include "drivers/sim/amdgpu/registers.hpp"

namespace baregpu::sim::amdgpu {

RegisterMap RegisterMap::build(const AsicInfo& a) {
    RegisterMap r;
    auto at = [&](uint16_t hw_id, unsigned base_idx, uint32_t offset) { return a.base(hw_id, base_idx) + offset; };
    const bool gc12 = a.gc_major() >= 12;
    const bool mp14 = a.version(hwid::kMp0).major >= 14;

    // MP0 (mp_13_0_0_offset.h regMP0_SMN_C2PMSG_*, mp_14_0_2_offset.h regMPASP_SMN_C2PMSG_*).
    r.psp_33 = at(hwid::kMp0, 0, 0x61);  // Linux amdgpu_discovery.c's fixed mmMP0_SMN_C2PMSG_33 0x16061
    r.psp_35 = at(hwid::kMp0, 0, 0x63);
    r.psp_36 = at(hwid::kMp0, 0, 0x64);
    r.psp_64 = at(hwid::kMp0, 0, 0x80);
    r.psp_67 = at(hwid::kMp0, 0, 0x83);
    r.psp_69 = at(hwid::kMp0, 0, 0x85);
    r.psp_70 = at(hwid::kMp0, 0, 0x86);
    r.psp_71 = at(hwid::kMp0, 0, 0x87);
    r.psp_81 = at(hwid::kMp0, 0, 0x91);

    // MP1 (mp_13_0_0_offset.h: BASE_IDX 0, 0x275/0x276/0x28b/0x282/0x292/0x29a;
    //      mp_14_0_2_offset.h: BASE_IDX 1, 0x75/0x76/0x8b/0x82/0x92/0x9a).
    const unsigned mp1_idx = mp14 ? 1 : 0;
    const uint32_t mp1_off = mp14 ? 0x40 : 0x240;
    r.smu_debug_param = at(hwid::kMp1, mp1_idx, mp1_off + 53);
    r.smu_debug_resp = at(hwid::kMp1, mp1_idx, mp1_off + 54);
    r.smu_msg = at(hwid::kMp1, mp1_idx, mp1_off + 66);
    r.smu_debug_msg = at(hwid::kMp1, mp1_idx, mp1_off + 75);
    r.smu_param = at(hwid::kMp1, mp1_idx, mp1_off + 82);
    r.smu_resp = at(hwid::kMp1, mp1_idx, mp1_off + 90);

    // NBIO 4.3.0 / NBIF 6.3.1 (nbio_4_3_0_offset.h, nbif_6_3_1_offset.h).
    r.rsmu_index = at(hwid::kNbif, 1, 0x0);
    r.rsmu_data = at(hwid::kNbif, 1, 0x1);
    r.remap_hdp_mem_flush_cntl = at(hwid::kNbif, 2, 0x12d);
    r.gpu_hdp_flush_req = at(hwid::kNbif, 2, 0x106);
    r.gpu_hdp_flush_done = at(hwid::kNbif, 2, 0x107);
    r.rcc_dev0_epf2_strap2 = at(hwid::kNbif, 5, 0xd102);

    // GC (gc_11_0_0_offset.h / gc_12_0_0_offset.h).
    r.scratch_reg6 = at(hwid::kGc, 1, 0x2046);
    r.scratch_reg7 = at(hwid::kGc, 1, 0x2047);
    r.cp_stat = at(hwid::kGc, 0, 0xf40);
    r.rlc_bootload_status = at(hwid::kGc, 1, gc12 ? 0x4e7c : 0x4e82);

    // GC hub: regGCMC_VM_* and regGCVM_* of the same headers.
    auto& g = r.gc;
    if (!gc12) {
        g.fb_location_base = at(hwid::kGc, 0, 0x1678);
        g.fb_location_top = at(hwid::kGc, 0, 0x1679);
        g.system_aperture_low = at(hwid::kGc, 0, 0x167d);
        g.system_aperture_high = at(hwid::kGc, 0, 0x167e);
        g.agp_top = at(hwid::kGc, 0, 0x167a);
        g.agp_bot = at(hwid::kGc, 0, 0x167b);
        g.agp_base = at(hwid::kGc, 0, 0x167c);
        g.context0_cntl = at(hwid::kGc, 0, 0x1688);
        g.pt_base_lo = at(hwid::kGc, 0, 0x16f3);
        g.pt_base_hi = at(hwid::kGc, 0, 0x16f4);
        g.pt_start_lo = at(hwid::kGc, 0, 0x1713);
        g.pt_start_hi = at(hwid::kGc, 0, 0x1714);
        g.pt_end_lo = at(hwid::kGc, 0, 0x1733);
        g.pt_end_hi = at(hwid::kGc, 0, 0x1734);
        g.inv_eng17_sem = at(hwid::kGc, 0, 0x16aa);
        g.inv_eng17_req = at(hwid::kGc, 0, 0x16bc);
        g.inv_eng17_ack = at(hwid::kGc, 0, 0x16ce);
        g.fault_cntl = at(hwid::kGc, 0, 0x15c4);
        g.fault_status = at(hwid::kGc, 0, 0x15c8);  // regGCVM_L2_PROTECTION_FAULT_STATUS
        g.fault_addr_lo = at(hwid::kGc, 0, 0x15c9);
        g.fault_addr_hi = at(hwid::kGc, 0, 0x15ca);
        g.inv_eng17_range_lo = at(hwid::kGc, 0, 0x16f1);
        g.inv_eng17_range_hi = at(hwid::kGc, 0, 0x16f2);
    } else {
        g.fb_location_base = at(hwid::kGc, 0, 0x1614);
        g.fb_location_top = at(hwid::kGc, 0, 0x1615);
        g.system_aperture_low = at(hwid::kGc, 0, 0x1619);
        g.system_aperture_high = at(hwid::kGc, 0, 0x161a);
        g.agp_top = at(hwid::kGc, 0, 0x1616);
        g.agp_bot = at(hwid::kGc, 0, 0x1617);
        g.agp_base = at(hwid::kGc, 0, 0x1618);
        g.context0_cntl = at(hwid::kGc, 0, 0x1624);
        g.pt_base_lo = at(hwid::kGc, 0, 0x168f);
        g.pt_base_hi = at(hwid::kGc, 0, 0x1690);
        g.pt_start_lo = at(hwid::kGc, 0, 0x16af);
        g.pt_start_hi = at(hwid::kGc, 0, 0x16b0);
        g.pt_end_lo = at(hwid::kGc, 0, 0x16cf);
        g.pt_end_hi = at(hwid::kGc, 0, 0x16d0);
        g.inv_eng17_sem = at(hwid::kGc, 0, 0x1646);
        g.inv_eng17_req = at(hwid::kGc, 0, 0x1658);
        g.inv_eng17_ack = at(hwid::kGc, 0, 0x166a);
        g.fault_cntl = at(hwid::kGc, 0, 0x15cc);
        g.fault_status = at(hwid::kGc, 0, 0x15d0);  // regGCVM_L2_PROTECTION_FAULT_STATUS_LO32
        g.fault_addr_lo = at(hwid::kGc, 0, 0x15d2);
        g.fault_addr_hi = at(hwid::kGc, 0, 0x15d3);
        g.inv_eng17_range_lo = at(hwid::kGc, 0, 0x168d);
        g.inv_eng17_range_hi = at(hwid::kGc, 0, 0x168e);
    }
    r.gc12_context_layout = gc12;

    // MM hub (mmhub_3_0_0_offset.h / mmhub_4_1_0_offset.h).
    auto& m = r.mm;
    if (!gc12) {
        m.fb_location_base = at(hwid::kMmhub, 0, 0x8ec);
        m.fb_location_top = at(hwid::kMmhub, 0, 0x8ed);
        m.system_aperture_low = at(hwid::kMmhub, 0, 0x8f1);
        m.system_aperture_high = at(hwid::kMmhub, 0, 0x8f2);
        m.agp_top = at(hwid::kMmhub, 0, 0x8ee);
        m.agp_bot = at(hwid::kMmhub, 0, 0x8ef);
        m.agp_base = at(hwid::kMmhub, 0, 0x8f0);
        m.context0_cntl = at(hwid::kMmhub, 0, 0x740);
        m.pt_base_lo = at(hwid::kMmhub, 0, 0x7ab);
        m.pt_base_hi = at(hwid::kMmhub, 0, 0x7ac);
        m.pt_start_lo = at(hwid::kMmhub, 0, 0x7cb);
        m.pt_start_hi = at(hwid::kMmhub, 0, 0x7cc);
        m.pt_end_lo = at(hwid::kMmhub, 0, 0x7eb);
        m.pt_end_hi = at(hwid::kMmhub, 0, 0x7ec);
        m.inv_eng17_sem = at(hwid::kMmhub, 0, 0x762);
        m.inv_eng17_req = at(hwid::kMmhub, 0, 0x774);
        m.inv_eng17_ack = at(hwid::kMmhub, 0, 0x786);
        m.fault_status = at(hwid::kMmhub, 0, 0x70c);
        m.inv_eng17_range_lo = at(hwid::kMmhub, 0, 0x7a9);
        m.inv_eng17_range_hi = at(hwid::kMmhub, 0, 0x7aa);
        m.bank_select_reserved_cid2 = at(hwid::kMmhub, 0, 0x71b);
    } else {
        m.fb_location_base = at(hwid::kMmhub, 0, 0x554);
        m.fb_location_top = at(hwid::kMmhub, 0, 0x555);
        m.system_aperture_low = at(hwid::kMmhub, 0, 0x559);
        m.system_aperture_high = at(hwid::kMmhub, 0, 0x55a);
        m.agp_top = at(hwid::kMmhub, 0, 0x556);
        m.agp_bot = at(hwid::kMmhub, 0, 0x557);
        m.agp_base = at(hwid::kMmhub, 0, 0x558);
        m.context0_cntl = at(hwid::kMmhub, 0, 0x564);
        m.pt_base_lo = at(hwid::kMmhub, 0, 0x5cf);
        m.pt_base_hi = at(hwid::kMmhub, 0, 0x5d0);
        m.pt_start_lo = at(hwid::kMmhub, 0, 0x5ef);
        m.pt_start_hi = at(hwid::kMmhub, 0, 0x5f0);
        m.pt_end_lo = at(hwid::kMmhub, 0, 0x60f);
        m.pt_end_hi = at(hwid::kMmhub, 0, 0x610);
        m.inv_eng17_sem = at(hwid::kMmhub, 0, 0x586);
        m.inv_eng17_req = at(hwid::kMmhub, 0, 0x598);
        m.inv_eng17_ack = at(hwid::kMmhub, 0, 0x5aa);
        m.fault_status = at(hwid::kMmhub, 0, 0x4f0);  // regMMVM_L2_PROTECTION_FAULT_STATUS_LO32
        m.inv_eng17_range_lo = at(hwid::kMmhub, 0, 0x5cd);
        m.inv_eng17_range_hi = at(hwid::kMmhub, 0, 0x5ce);
        m.bank_select_reserved_cid2 = at(hwid::kMmhub, 0, 0x500);
    }

    // OSSSYS (osssys_6_0_0_offset.h: CNTL 0x80 BASE 0x81 BASE_HI 0x82 RPTR 0x83 WPTR 0x84;
    //         osssys_7_0_0_offset.h: CNTL 0x80 RPTR 0x81 WPTR 0x82 BASE 0x83 BASE_HI 0x84;
    //         both WPTR_ADDR_HI 0x85, WPTR_ADDR_LO 0x86).
    const bool oss7 = a.version(hwid::kOsssys).major >= 7;
    r.ih_rb_cntl = at(hwid::kOsssys, 0, 0x80);
    r.ih_rb_base = at(hwid::kOsssys, 0, oss7 ? 0x83 : 0x81);
    r.ih_rb_base_hi = at(hwid::kOsssys, 0, oss7 ? 0x84 : 0x82);
    r.ih_rb_rptr = at(hwid::kOsssys, 0, oss7 ? 0x81 : 0x83);
    r.ih_rb_wptr = at(hwid::kOsssys, 0, oss7 ? 0x82 : 0x84);
    r.ih_rb_wptr_addr_hi = at(hwid::kOsssys, 0, 0x85);
    r.ih_rb_wptr_addr_lo = at(hwid::kOsssys, 0, 0x86);
    return r;
}

}  // namespace baregpu::sim::amdgpu
