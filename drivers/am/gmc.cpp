#include "drivers/am/gmc.hpp"

#include <algorithm>

#include "drivers/am/page_table.hpp"
#include "drivers/am/wait.hpp"

#include <array>
#include <fmt/format.h>
#include <string>

namespace baregpu::am {

namespace {
// gc_11_0_0_sh_mask.h / mmhub_3_0_0_sh_mask.h field values composed as tinygrad and gfxhub_v3_0.c do:
// MC_VM_MX_L1_TLB_CNTL: ENABLE_L1_TLB=1, SYSTEM_ACCESS_MODE=3, ENABLE_ADVANCED_DRIVER_MODEL=1, MTYPE=UC.
constexpr uint32_t kMxL1TlbCntl = 0x1859;
// VM_L2_CNTL2: INVALIDATE_ALL_L1_TLBS (bit 0) | INVALIDATE_L2_CACHE (bit 1).
constexpr uint32_t kL2Cntl2 = 0x3;
// Read-modify-write helper: the fields in `mask` take `value`, the others keep what the chip has.
uint32_t with(uint32_t old, uint32_t mask, uint32_t value) { return (old & ~mask) | (value & mask); }
// VM_CONTEXT0_CNTL, read-modify-written as gfxhub_v3_0_enable_system_domain / gfxhub_v12_0.c do:
// ENABLE_CONTEXT (bit 0), PAGE_TABLE_DEPTH = 3 (bits 2:1, 4 levels), PAGE_TABLE_BLOCK_SIZE 0, both
// RETRY_* bits 0, and the seven protection faults' ENABLE_INTERRUPT/ENABLE_DEFAULT pairs (14 bits; the
// set tinygrad's enable_vm_addressing writes). GC 11 / MMHUB 3.0 (gc_11_0_0_sh_mask.h): block size 6:3,
// RETRY_PERMISSION_OR_INVALID_PAGE_FAULT 7, RETRY_OTHER_FAULT 8, enables 22:9. GC 12 / MMHUB 4.1
// (gc_12_0_0_sh_mask.h, mmhub_4_1_0_sh_mask.h; field positions as tinygrad's generated regs.py has
// them): block size 7:4, retries 8 and 9, enables 23:10.
uint32_t context0_cntl(uint32_t old, bool gc12_layout) {
    const unsigned block = gc12_layout ? 4 : 3, retry = gc12_layout ? 8 : 7, enables = gc12_layout ? 10 : 9;
    const uint32_t mask = 0x7u | 0xfu << block | 0x3u << retry | 0x3fffu << enables;
    return (old & ~mask) | 0x1u | 3u << 1 | 0x3fffu << enables;
}
// VM_INVALIDATE_ENG17_REQ: PER_VMID_INVALIDATE_REQ = 1 << vmid0, FLUSH_TYPE 0,
// INVALIDATE_L2_PTES | L2_PDE0 | L2_PDE1 | L2_PDE2 | L1_PTES (bits 19-23).
constexpr uint32_t kInvalidateReqVmid0 = 0x1 | (0x1f << 19);
}  // namespace

void Gmc::read_fb_location() {
    const RegisterTable& t = regs_.table();
    fb_base_ = uint64_t{regs_.read(t.mmmc_vm_fb_location_base) & 0xffffff} << 24;
    fb_top_ = (uint64_t{regs_.read(t.mmmc_vm_fb_location_top) & 0xffffff} << 24) | 0xffffff;
    constexpr uint64_t k16GiB = 16ull << 30;
    agp_start_ = (fb_top_ + k16GiB) / k16GiB * k16GiB;  // ALIGN(fb_end + 1, 16 GiB)
}

void Gmc::init_hub(bool gc, uint64_t root_pt, uint64_t scratch_page, uint64_t dummy_page) {
    const VmHubRegs& h = gc ? regs_.table().gc_hub : regs_.table().mm_hub;
    // gfxhub_v3_0_gart_enable's order (mmhub_v3_0, gfxhub_v12_0, mmhub_v4_1_0 the same): the page table
    // (init_gart_aperture_regs), the system aperture, the TLB, the L2, VMID 0's context
    // (enable_system_domain), then the invalidation engines (program_invalidation).
    // VMID0's page table: range in 4 KiB pages; base = FB-relative root | VALID.
    regs_.write(h.context0_pt_start_lo, static_cast<uint32_t>(kVmStart >> 12));
    regs_.write(h.context0_pt_start_hi, static_cast<uint32_t>(kVmStart >> 44));
    regs_.write(h.context0_pt_end_lo, static_cast<uint32_t>(kVmEnd >> 12));
    regs_.write(h.context0_pt_end_hi, static_cast<uint32_t>(kVmEnd >> 44));
    uint64_t base = root_pt | pte::kValid;
    regs_.write(h.context0_pt_base_lo, static_cast<uint32_t>(base));
    regs_.write(h.context0_pt_base_hi, static_cast<uint32_t>(base >> 32));
    // The AGP aperture (16 MiB units): MC agp_start.. is bus address 0.. (AGP_BASE 0), as
    // gfxhub_v3_0_init_system_aperture_regs programs amdgpu_gmc_agp_location's window.
    const uint64_t agp_end = agp_start_ + kAgpBytes - 1;
    const bool agp = skip_ != SkipStep::agp_aperture;
    regs_.write(h.agp_base, 0);
    regs_.write(h.agp_bot, static_cast<uint32_t>(agp ? agp_start_ >> 24 : 0xffffff));  // off: BOT above TOP
    regs_.write(h.agp_top, static_cast<uint32_t>(agp ? agp_end >> 24 : 0));
    // The system aperture, in 256 KiB units (>> 18), covering VRAM and the AGP aperture
    // (min(fb_start, agp_start), max(fb_end, agp_end)), and where unmapped aperture accesses go.
    regs_.write(h.system_aperture_low, static_cast<uint32_t>(std::min(fb_base_, agp_start_) >> 18));
    regs_.write(h.system_aperture_high, static_cast<uint32_t>(std::max(fb_top_, agp_end) >> 18));
    // The default page and the fault dummy page are physical (FB-relative) page numbers:
    // gfxhub_v3_0_init_system_aperture_regs writes amdgpu_gmc_vram_mc2pa(mem_scratch) >> 12, tinygrad
    // the VRAM physical address (AM_GMC.init_hub). An MC address would point past VRAM.
    const uint64_t scratch = scratch_page >> 12;
    regs_.write(h.system_aperture_default_lsb, static_cast<uint32_t>(scratch));
    regs_.write(h.system_aperture_default_msb, static_cast<uint32_t>(scratch >> 32));
    const uint64_t dummy = dummy_page >> 12;
    regs_.write(h.fault_default_addr_lo, static_cast<uint32_t>(dummy));
    regs_.write(h.fault_default_addr_hi, static_cast<uint32_t>(dummy >> 32));
    // ... and VM_L2_PROTECTION_FAULT_CNTL2.ACTIVE_PAGE_MIGRATION_PTE_READ_RETRY (bit 18) = 1.
    regs_.write(h.l2_protection_fault_cntl2, regs_.read(h.l2_protection_fault_cntl2) | 1u << 18);
    regs_.write(h.mx_l1_tlb_cntl, kMxL1TlbCntl);
    // gfxhub_v3_0_init_cache_regs (mmhub_v3_0_init_cache_regs, v12_0 / v4_1 the same), field by field
    // (gc_11_0_0_sh_mask.h = gc_12_0_0_sh_mask.h for these): VM_L2_CNTL ENABLE_L2_CACHE 1 (bit 0),
    // ENABLE_L2_FRAGMENT_PROCESSING 0 (1), L2_PDE0_CACHE_TAG_GENERATION_MODE 0 (8),
    // ENABLE_DEFAULT_PAGE_OUT_TO_SYSTEM_MEMORY 1 (11), PDE_FAULT_CLASSIFICATION 0 (18),
    // CONTEXT1_IDENTITY_ACCESS_MODE 1 (20:19), IDENTITY_MODE_FRAGMENT_SIZE 0 (25:21); the LRU-update and
    // queue-size bits keep their reset values (0x00080602, gc_11_0_0_default.h).
    regs_.write(h.l2_cntl, with(regs_.read(h.l2_cntl), 1u | 1u << 1 | 1u << 8 | 1u << 11 | 1u << 18 | 3u << 19 | 0x1fu << 21,
                                1u | 1u << 11 | 1u << 19));
    regs_.write(h.l2_cntl2, regs_.read(h.l2_cntl2) | kL2Cntl2);
    // VM_L2_CNTL3: BANK_SELECT 9 (5:0), L2_CACHE_BIGK_FRAGMENT_SIZE 6 (19:15) without translate_further;
    // VM_L2_CNTL4: VMC_TAP_PDE/PTE_REQUEST_PHYSICAL 0 (bits 6, 7); VM_L2_CNTL5:
    // L2_CACHE_SMALLK_FRAGMENT_SIZE 0 (4:0).
    regs_.write(h.l2_cntl3, with(regs_.read(h.l2_cntl3), 0x3fu | 0x1fu << 15, 9u | 6u << 15));
    regs_.write(h.l2_cntl4, with(regs_.read(h.l2_cntl4), 3u << 6, 0));
    regs_.write(h.l2_cntl5, with(regs_.read(h.l2_cntl5), 0x1fu, 0));
    const bool gc12_layout = h.gc12_context_layout && skip_ != SkipStep::vm_context_gc11_layout;
    regs_.write(h.context0_cntl, context0_cntl(regs_.read(h.context0_cntl), gc12_layout));
    // gfxhub_v3_0_program_invalidation / mmhub_v3_0_program_invalidation (v12_0 / v4_1 the same): every
    // invalidation engine's address range to the whole space, LO32 0xffffffff, HI32 0x1f. The reset
    // value is 0 (gc_11_0_0_default.h *_ADDR_RANGE_*_DEFAULT), an empty range.
    if (skip_ != SkipStep::invalidate_addr_range) {
        static const std::array<std::string, 72> names = [] {
            std::array<std::string, 72> n;
            for (uint32_t i = 0; i < 72; ++i)
                n[i] = fmt::format("{}VM_INVALIDATE_ENG{}_ADDR_RANGE_{}", i < 36 ? "GC" : "MM", i / 2 % 18, i % 2 ? "HI32" : "LO32");
            return n;
        }();
        for (uint32_t eng = 0; eng < 18; ++eng) {
            RegDef lo = h.invalidate_eng0_addr_range_lo32, hi = h.invalidate_eng0_addr_range_lo32;
            lo.offset += 2 * eng;
            hi.offset += 2 * eng + 1;
            lo.name = names[(gc ? 0 : 36) + 2 * eng];
            hi.name = names[(gc ? 0 : 36) + 2 * eng + 1];
            regs_.write(lo, 0xffffffffu);
            regs_.write(hi, 0x1fu);
        }
    }
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
    if (gc) return;
    regs_.write(h.invalidate_eng17_sem, 0);
    // gmc_v11_0_flush_vm_hub (gmc_v12_0_flush_vm_hub the same): "Issue additional private vm
    // invalidation to MMHUB" through MMVM_L2_BANK_SELECT_RESERVED_CID2 bit 25, then read it back.
    if (skip_ != SkipStep::mmhub_private_invalidation && h.l2_bank_select_reserved_cid2.valid()) {
        regs_.write(h.l2_bank_select_reserved_cid2, regs_.read(h.l2_bank_select_reserved_cid2) | field::kMmhubPrivateInvalidation);
        regs_.read(h.l2_bank_select_reserved_cid2);
    }
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
