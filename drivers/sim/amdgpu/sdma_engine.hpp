// SDMA 6.0 / 7.0 engine 0, queue 0 (the one tinygrad's AM driver and Linux use for a kernel queue,
// sdma_v6_0.c's gfx ring), on a GC 11 / GC 12 chip whose SDMA registers live in GC segment 0
// (BASE_IDX 0). gc_11_0_0_offset.h (SDMA 6): SDMA0_QUEUE0_RB_CNTL 0x80, RB_BASE/_HI 0x81/0x82
// (address >> 8), RB_RPTR/_HI 0x83/0x84, RB_WPTR/_HI 0x85/0x86, RB_RPTR_ADDR_HI/LO 0x88/0x89,
// IB_CNTL 0x8a, DOORBELL 0x92, DOORBELL_OFFSET 0xab, RB_WPTR_POLL_ADDR_HI/LO 0xb2/0xb3,
// MINOR_PTR_UPDATE 0xb5. gc_12_0_0_offset.h (SDMA 7, block gc_gfx_cpwd_sdma0_sdmadec; sdma_v7_0.c
// adds reg_offset[GC_HWIP][0][0]): RB_CNTL 0x80 .. RB_WPTR_HI 0x86 as on GC 11, then
// RB_RPTR_ADDR_LO/HI 0x87/0x88 (LO first), IB_CNTL 0x89, DOORBELL 0x8f, DOORBELL_OFFSET 0x91,
// RB_WPTR_POLL_ADDR_LO/HI 0x98/0x99, MINOR_PTR_UPDATE 0x9b. The fields used are the same in both
// sh_mask headers: RB_CNTL RB_ENABLE bit 0 / RB_SIZE 5:1 / RPTR_WRITEBACK_ENABLE 12 / RB_PRIV 23,
// DOORBELL.ENABLE bit 28,
// DOORBELL_OFFSET.OFFSET 27:2. SDMA 7 uses SDMA 6's packets (sdma_v7_0.c includes
// sdma_v6_0_0_pkt_open.h). The engine itself: SDMA0_F32_CNTL (SDMA 6, 0x589a BASE_IDX 1; HALT bit 0,
// reset value 0x08084001 halted, gc_11_0_0_default.h) or SDMA0_MCU_CNTL (SDMA 7, 0x588e BASE_IDX 1;
// HALT bit 0, no public reset value: the model powers on halted). A halted engine takes no doorbell.
// Pointers are BYTE offsets; RB_CNTL.RB_SIZE = log2(ring dwords). Packets from
// sdma_v6_0_0_pkt_open.h, every access through the VMID 0 walker (SDMA 6 uses the GC hub,
// sdma_v6_0.c vm_hub = AMDGPU_GFXHUB(0)). Strict: a malformed packet is a violation and the
// queue hangs.
#pragma once

#include "drivers/sim/amdgpu/chip.hpp"
#include "drivers/sim/amdgpu/gmc.hpp"

#include <string>
#include <vector>

namespace baregpu::sim::amdgpu {

namespace sdma {
// sdma_v6_0_0_pkt_open.h SDMA_OP_*
inline constexpr uint32_t kOpNop = 0, kOpCopy = 1, kOpWrite = 2, kOpIndirect = 4, kOpFence = 5, kOpPollRegmem = 8,
                          kOpTimestamp = 13;
inline constexpr uint32_t kSubOpCopyLinear = 0, kSubOpWriteLinear = 0, kSubOpTimestampGetGlobal = 2;
}  // namespace sdma

class GcRegs;

class SdmaEngine {
public:
    SdmaEngine(Chip& chip, Gmc& gmc);
    GcRegs* gc_regs = nullptr;  // counts the doorbells a halted engine drops

    bool enabled() const { return regs_.rb_cntl != 0; }
    void register_written(uint32_t address, uint32_t value);
    bool doorbell(uint64_t offset, unsigned width, uint64_t value);

    struct Status {
        bool active = false, hung = false, waiting = false;
        uint64_t rptr = 0;  // bytes
        uint64_t bytes_copied = 0;
    };
    Status status() const { return {active_, hung_, waiting_, rptr_, copied_}; }
    void reset();
    // The engine thread's re-poll of a POLL_REGMEM that did not pass.
    void poll() {
        if (active_ && waiting_ && !hung_) run();
    }
    bool waiting() const { return active_ && waiting_ && !hung_; }

private:
    struct Regs {
        uint32_t rb_cntl = 0, rb_base = 0, rb_base_hi = 0, rb_rptr = 0, rb_rptr_hi = 0, rb_wptr = 0, rb_wptr_hi = 0,
                 rptr_addr_hi = 0, rptr_addr_lo = 0, ib_cntl = 0, doorbell = 0, doorbell_offset = 0, wptr_poll_hi = 0,
                 wptr_poll_lo = 0, engine_cntl = 0;
    };
    void start();
    void run();
    enum class Step { next, wait, stop };
    Step execute(const std::vector<uint32_t>& w, uint32_t& consumed, const std::string& where, bool in_ib);
    uint32_t packet_dwords(uint32_t header, bool& known) const;
    void hang(const std::string& what, const std::string& where);
    bool access(uint64_t va, std::span<std::byte> data, bool write);

    Chip& chip_;
    Gmc& gmc_;
    Regs regs_;
    bool halted() const;
    bool active_ = false, hung_ = false, waiting_ = false, rptr_writeback_ = true;
    bool sdma7_ = false;
    uint64_t ring_va_ = 0, ring_bytes_ = 0, rptr_addr_ = 0, wptr_poll_ = 0, rptr_ = 0, copied_ = 0;
    uint32_t doorbell_dword_ = 0;
    // An INDIRECT being executed (resumable when a POLL_REGMEM inside it blocks).
    bool in_ib_ = false;
    uint64_t ib_va_ = 0, ib_dwords_ = 0, ib_pos_ = 0;
};

}  // namespace baregpu::sim::amdgpu
