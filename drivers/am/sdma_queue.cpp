#include "drivers/am/sdma_queue.hpp"

#include "drivers/am/am_device.hpp"
#include "drivers/am/dwords.hpp"

namespace baregpu::am {

void sdma0_queue0_start(AmDevice& chip, uint64_t ring, uint64_t ring_bytes, uint64_t rptr, uint64_t wptr) {
    Registers& regs = chip.regs();
    const RegisterTable& t = regs.table();
    const SkipStep skip = chip.skip_step();
    // A ring a previous owner left enabled (a crash) is stopped before it is pointed elsewhere.
    if (regs.read(t.sdma0_queue0_rb_cntl) & field::kSdmaRbEnable) {
        regs.write(t.sdma0_queue0_rb_cntl, regs.read(t.sdma0_queue0_rb_cntl) & ~field::kSdmaRbEnable);
        regs.write(t.sdma0_queue0_ib_cntl, 0);
    }
    // sdma_v6_0_gfx_resume_instance (sdma_v7_0_gfx_resume_instance the same way), in its order;
    // pointers are bytes. RB_CNTL is read-modify-written: RB_SIZE = log2(ring dwords) and RB_PRIV
    // first, then RPTR_WRITEBACK_ENABLE, WPTR_POLL_ENABLE 0 and F32_WPTR_POLL_ENABLE (SDMA 6) /
    // MCU_WPTR_POLL_ENABLE (SDMA 7) 1, RB_ENABLE last. The reset value (gc_11_0_0_default.h
    // regSDMA0_QUEUE0_RB_CNTL_DEFAULT 0x00040800) keeps RPTR_WRITEBACK_TIMER 4.
    uint32_t size_log2 = 0;
    while ((uint64_t{1} << size_log2) < ring_bytes / 4) ++size_log2;
    uint32_t rb_cntl = regs.read(t.sdma0_queue0_rb_cntl) & ~(field::kSdmaRbSizeMask | field::kSdmaRbEnable);
    rb_cntl |= size_log2 << 1 | field::kSdmaRbPriv;
    if (skip == SkipStep::sdma_rb_cntl_fields) rb_cntl = size_log2 << 1;  // the whole-register write of before
    regs.write(t.sdma0_queue0_rb_cntl, rb_cntl);
    regs.write(t.sdma0_queue0_rb_rptr, 0);
    regs.write(t.sdma0_queue0_rb_rptr_hi, 0);
    regs.write(t.sdma0_queue0_rb_wptr, 0);
    regs.write(t.sdma0_queue0_rb_wptr_hi, 0);
    regs.write(t.sdma0_queue0_rb_wptr_poll_addr_lo, lo(wptr));
    regs.write(t.sdma0_queue0_rb_wptr_poll_addr_hi, hi(wptr));
    regs.write(t.sdma0_queue0_rb_rptr_addr_hi, hi(rptr));
    regs.write(t.sdma0_queue0_rb_rptr_addr_lo, lo(rptr));
    if (skip != SkipStep::sdma_rb_cntl_fields) {
        rb_cntl = (rb_cntl | field::kSdmaRptrWritebackEnable | field::kSdmaEngineWptrPollEnable) & ~field::kSdmaWptrPollEnable;
    }
    regs.write(t.sdma0_queue0_rb_base, lo(ring >> 8));
    regs.write(t.sdma0_queue0_rb_base_hi, lo(ring >> 40));
    regs.write(t.sdma0_queue0_minor_ptr_update, 1);
    regs.write(t.sdma0_queue0_rb_wptr, 0);
    regs.write(t.sdma0_queue0_rb_wptr_hi, 0);
    // SDMA0_QUEUE0_DOORBELL_OFFSET.OFFSET bits 2-27 hold the dword offset (slot * 2);
    // SDMA0_QUEUE0_DOORBELL.ENABLE is bit 28 (gc_11_0_0_sh_mask.h and gc_12_0_0_sh_mask.h agree;
    // only the registers' offsets differ between SDMA 6 and SDMA 7).
    regs.write(t.sdma0_queue0_doorbell, regs.read(t.sdma0_queue0_doorbell) | 1u << 28);
    regs.write(t.sdma0_queue0_doorbell_offset, (kDoorbellSdmaEngine0 * 2) << 2);
    // adev->nbio.funcs->sdma_doorbell_range(adev, 0, true, ring->doorbell_index,
    // sdma_doorbell_range * num_instances): soc21.c / soc24.c set sdma_doorbell_range to 20 dwords,
    // and both chips have two SDMA instances.
    if (skip != SkipStep::sdma_doorbell_route) chip.soc().sdma_doorbell_range(kDoorbellSdmaEngine0 * 2, 20 * 2);
    regs.write(t.sdma0_queue0_minor_ptr_update, 0);
    // The hang watchdog (QUEUE_HANG_COUNT = max(usec_timeout / 100000, 1), 100 ms units; Linux's
    // default usec_timeout is 100 ms), UTCL1 RESP_MODE 3 / REDO_DELAY 9, the default L2 read/write
    // policies (sdma_common.h: CACHE_READ_POLICY_L2__DEFAULT = NOA 2, CACHE_WRITE_POLICY_L2__DEFAULT =
    // BYPASS 3; SDMA 6 also LLC_NOALLOC) and the engine un-halted: SDMA0_F32_CNTL.HALT and TH1_RESET
    // (SDMA 6, reset value 0x08084001: halted, gc_11_0_0_default.h) or SDMA0_MCU_CNTL.HALT and RESET
    // (SDMA 7, sdma_v7_0.c).
    regs.write(t.sdma0_watchdog_cntl, (regs.read(t.sdma0_watchdog_cntl) & ~field::kSdmaWatchdogQueueHangCountMask) | 1u);
    regs.write(t.sdma0_utcl1_cntl, (regs.read(t.sdma0_utcl1_cntl) & ~(field::kSdmaUtcl1RespModeMask | field::kSdmaUtcl1RedoDelayMask)) |
                                       3u << 9 | 9u);
    uint32_t page = (regs.read(t.sdma0_utcl1_page) & 0xFF0FFFu) | 2u << 12 | 3u << 14;
    if (!t.sdma7) page |= field::kSdmaUtcl1PageLlcNoalloc;
    regs.write(t.sdma0_utcl1_page, page);
    if (skip != SkipStep::sdma_unhalt) {
        const uint32_t clear = field::kSdmaHalt | (t.sdma7 ? field::kSdmaMcuReset : field::kSdmaF32Th1Reset);
        regs.write(t.sdma0_engine_cntl, regs.read(t.sdma0_engine_cntl) & ~clear);
    }
    regs.write(t.sdma0_queue0_rb_cntl, rb_cntl | field::kSdmaRbEnable);
    regs.write(t.sdma0_queue0_ib_cntl, regs.read(t.sdma0_queue0_ib_cntl) | 1u);  // IB_ENABLE
}

void sdma0_queue0_stop(AmDevice& chip) noexcept {
    try {
        Registers& regs = chip.regs();
        const RegisterTable& t = regs.table();
        // sdma_v6_0_gfx_stop: RB_ENABLE and IB_ENABLE cleared, the rest of both registers kept;
        // then the doorbell off (tinygrad AM_SDMA.fini_hw).
        regs.write(t.sdma0_queue0_rb_cntl, regs.read(t.sdma0_queue0_rb_cntl) & ~field::kSdmaRbEnable);
        regs.write(t.sdma0_queue0_ib_cntl, regs.read(t.sdma0_queue0_ib_cntl) & ~1u);
        regs.write(t.sdma0_queue0_doorbell, regs.read(t.sdma0_queue0_doorbell) & ~(1u << 28));
        regs.write(t.sdma0_queue0_doorbell_offset, 0);
    } catch (...) {
        // The chip is gone or hung: nothing more to take down.
    }
}

}  // namespace baregpu::am
