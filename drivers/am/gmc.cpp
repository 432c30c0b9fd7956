#include "drivers/am/gmc.hpp"

#include "drivers/am/page_table.hpp"
#include "drivers/am/wait.hpp"

namespace baregpu::am {

namespace {
// gc_11_0_0_sh_mask.h / mmhub_3_0_0_sh_mask.h field values composed as tinygrad and gfxhub_v3_0.c do:
// MC_VM_MX_L1_TLB_CNTL: ENABLE_L1_TLB=1, SYSTEM_ACCESS_MODE=3, ENABLE_ADVANCED_DRIVER_MODEL=1, MTYPE=UC.
constexpr uint32_t kMxL1TlbCntl = 0x1859;
// VM_L2_CNTL: ENABLE_L2_CACHE (bit 0). VM_L2_CNTL2: INVALIDATE_ALL_L1_TLBS | INVALIDATE_L2_CACHE.
constexpr uint32_t kL2Cntl = 0x1, kL2Cntl2 = 0x3;
// VM_CONTEXT0_CNTL: ENABLE_CONTEXT, PAGE_TABLE_DEPTH=3 (4 levels), every protection fault's
// interrupt and default enables.
constexpr uint32_t kContext0Cntl = 0x1fffe01 | (3u << 1);
// VM_INVALIDATE_ENG17_REQ: PER_VMID_INVALIDATE_REQ = 1 << vmid0, FLUSH_TYPE 0,
// INVALIDATE_L2_PTES | L2_PDE0 | L2_PDE1 | L2_PDE2 | L1_PTES (bits 19-23).
constexpr uint32_t kInvalidateReqVmid0 = 0x1 | (0x1f << 19);
}  // namespace

void Gmc::read_fb_location() {
    const RegisterTable& t = regs_.table();
    fb_base_ = uint64_t{regs_.read(t.mmmc_vm_fb_location_base) & 0xffffff} << 24;
    fb_top_ = (uint64_t{regs_.read(t.mmmc_vm_fb_location_top) & 0xffffff} << 24) | 0xffffff;
}

void Gmc::init_hub(bool gc, uint64_t root_pt, uint64_t scratch_page, uint64_t dummy_page) {
    const VmHubRegs& h = gc ? regs_.table().gc_hub : regs_.table().mm_hub;
    // AGP off: BOT above TOP.
    regs_.write(h.agp_base, 0);
    regs_.write(h.agp_bot, 0xffffffffffffull >> 24);
    regs_.write(h.agp_top, 0);
    // The system aperture, in 256 KiB units (>> 18), and where unmapped aperture accesses go.
    regs_.write(h.system_aperture_low, static_cast<uint32_t>(fb_base_ >> 18));
    regs_.write(h.system_aperture_high, static_cast<uint32_t>(fb_top_ >> 18));
    uint64_t scratch = mc(scratch_page) >> 12;
    regs_.write(h.system_aperture_default_lsb, static_cast<uint32_t>(scratch));
    regs_.write(h.system_aperture_default_msb, static_cast<uint32_t>(scratch >> 32));
    uint64_t dummy = mc(dummy_page) >> 12;
    regs_.write(h.fault_default_addr_lo, static_cast<uint32_t>(dummy));
    regs_.write(h.fault_default_addr_hi, static_cast<uint32_t>(dummy >> 32));
    regs_.write(h.mx_l1_tlb_cntl, kMxL1TlbCntl);
    regs_.write(h.l2_cntl, kL2Cntl);
    regs_.write(h.l2_cntl2, kL2Cntl2);
    // VMID0's page table: range in 4 KiB pages; base = FB-relative root | VALID.
    regs_.write(h.context0_pt_start_lo, static_cast<uint32_t>(kVmStart >> 12));
    regs_.write(h.context0_pt_start_hi, static_cast<uint32_t>(kVmStart >> 44));
    regs_.write(h.context0_pt_end_lo, static_cast<uint32_t>(kVmEnd >> 12));
    regs_.write(h.context0_pt_end_hi, static_cast<uint32_t>(kVmEnd >> 44));
    uint64_t base = root_pt | pte::kValid;
    regs_.write(h.context0_pt_base_lo, static_cast<uint32_t>(base));
    regs_.write(h.context0_pt_base_hi, static_cast<uint32_t>(base >> 32));
    regs_.write(h.context0_cntl, kContext0Cntl);
    flush_tlb(gc);
}

void Gmc::flush_tlb(bool gc) {
    flush_hdp_();
    const VmHubRegs& h = gc ? regs_.table().gc_hub : regs_.table().mm_hub;
    if (!gc) {
        // gmc_v11_0_flush_vm_hub: the MMHUB engine is shared with other clients; hold its semaphore.
        wait_reg(regs_, h.invalidate_eng17_sem, 1, 1, kDefaultTimeout, "the MMHUB invalidation semaphore");
    }
    regs_.write(h.invalidate_eng17_req, kInvalidateReqVmid0);
    wait_reg(regs_, h.invalidate_eng17_ack, 1, 1, kDefaultTimeout,
             gc ? "the GC hub TLB invalidation of VMID0" : "the MM hub TLB invalidation of VMID0");
    if (!gc) regs_.write(h.invalidate_eng17_sem, 0);
}

uint32_t Gmc::gc_fault_status() { return regs_.read(regs_.table().gc_hub.l2_protection_fault_status); }

uint32_t Gmc::fault_status(bool gc) {
    return regs_.read(gc ? regs_.table().gc_hub.l2_protection_fault_status : regs_.table().mm_hub.l2_protection_fault_status);
}

void Gmc::clear_fault(bool gc) {
    const RegDef& cntl = gc ? regs_.table().gc_hub.l2_protection_fault_cntl : regs_.table().mm_hub.l2_protection_fault_cntl;
    regs_.write(cntl, regs_.read(cntl) | 1u);  // CLEAR_PROTECTION_FAULT_STATUS_ADDR
}

uint64_t Gmc::gc_fault_address() {
    const VmHubRegs& h = regs_.table().gc_hub;
    uint64_t lo = regs_.read(h.l2_protection_fault_addr_lo);
    uint64_t hi = regs_.read(h.l2_protection_fault_addr_hi);
    return ((hi << 32) | lo) << 12;
}

}  // namespace baregpu::am
