#include "drivers/sim/amdgpu/sdma_engine.hpp"

#include "drivers/sim/amdgpu/gc.hpp"
#include "drivers/sim/amdgpu/pm4_engine.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace baregpu::sim::amdgpu {

namespace {
constexpr const char* kPkt = "Linux amdgpu/sdma_v6_0_0_pkt_open.h";
constexpr const char* kRing = "Linux sdma_v6_0.c sdma_v6_0_gfx_resume_instance; tinygrad ip.py AM_SDMA";
constexpr uint64_t kCopyChunk = 1u << 20;
}  // namespace

SdmaEngine::SdmaEngine(Chip& chip, Gmc& gmc) : chip_(chip), gmc_(gmc) {
    // The SDMA0_QUEUE0_* offsets per generation (sdma_engine.hpp has the headers): GC 11 carries
    // SDMA 6.0, GC 12 SDMA 7.0; other generations are not modelled and leave the engine disabled.
    const unsigned gen = chip.asic.gc_major();
    if (gen != 11 && gen != 12) return;
    const bool sdma7 = gen == 12;
    auto gc = [&](uint32_t off) { return chip.asic.base(hwid::kGc, 0) + off; };
    regs_.rb_cntl = gc(0x80);
    regs_.rb_base = gc(0x81);
    regs_.rb_base_hi = gc(0x82);
    regs_.rb_rptr = gc(0x83);
    regs_.rb_rptr_hi = gc(0x84);
    regs_.rb_wptr = gc(0x85);
    regs_.rb_wptr_hi = gc(0x86);
    regs_.rptr_addr_lo = gc(sdma7 ? 0x87 : 0x89);
    regs_.rptr_addr_hi = gc(0x88);
    regs_.ib_cntl = gc(sdma7 ? 0x89 : 0x8a);
    regs_.doorbell = gc(sdma7 ? 0x8f : 0x92);
    regs_.doorbell_offset = gc(sdma7 ? 0x91 : 0xab);
    regs_.wptr_poll_lo = gc(sdma7 ? 0x98 : 0xb3);
    regs_.wptr_poll_hi = gc(sdma7 ? 0x99 : 0xb2);
    // gc_11_0_0_offset.h regSDMA0_F32_CNTL 0x589a / gc_12_0_0_offset.h regSDMA0_MCU_CNTL 0x588e, BASE_IDX 1.
    regs_.engine_cntl = chip.asic.base(hwid::kGc, 1) + (sdma7 ? 0x588e : 0x589a);
    sdma7_ = sdma7;
}

bool SdmaEngine::halted() const { return (chip_.load(regs_.engine_cntl) & 1u) != 0; }  // HALT, bit 0 of both

void SdmaEngine::reset() {
    active_ = hung_ = waiting_ = in_ib_ = false;
    rptr_ = copied_ = 0;
}

void SdmaEngine::register_written(uint32_t address, uint32_t value) {
    if (!enabled() || address != regs_.rb_cntl) return;
    // SDMA0_QUEUE0_RB_CNTL: RB_ENABLE bit 0, RB_SIZE bits 1-5 (gc_11_0_0_sh_mask.h, gc_12_0_0_sh_mask.h).
    if (!(value & 1)) {
        reset();
        return;
    }
    start();
}

void SdmaEngine::start() {
    auto refuse = [&](const std::string& what) {
        chip_.violation(fmt::format("SDMA0_QUEUE0_RB_CNTL.RB_ENABLE=1: {}", what), reg_name(regs_.rb_cntl), kRing);
        chip_.store(regs_.rb_cntl, chip_.load(regs_.rb_cntl) & ~1u);  // the ring stays off
    };
    if (active_) return refuse("the ring is already enabled (disable it first)");
    const uint32_t cntl = chip_.load(regs_.rb_cntl);
    // RB_PRIV (bit 23): Linux makes its SDMA rings privileged (sdma_v6_0_gfx_resume_instance /
    // sdma_v7_0 RB_PRIV 1), tinygrad too (rb_priv=1). What an unprivileged VMID 0 ring may not do is
    // not public: the model runs privileged kernel rings only, so that a whole-register RB_CNTL write
    // that drops the bit is seen. RPTR_WRITEBACK_ENABLE (bit 12) decides whether the read pointer is
    // written back to RB_RPTR_ADDR; F32_WPTR_POLL_ENABLE / MCU_WPTR_POLL_ENABLE (bit 11) are what
    // Linux sets with it.
    if (!(cntl & (1u << 23))) {
        return refuse(fmt::format("RB_CNTL {} has RB_PRIV clear{}{} (the reset value 0x00040800 with RB_PRIV, "
                                  "RPTR_WRITEBACK_ENABLE and {}_WPTR_POLL_ENABLE set as Linux sets them): the ring would run "
                                  "unprivileged",
                                  hex(cntl), cntl & (1u << 12) ? "" : ", RPTR_WRITEBACK_ENABLE clear",
                                  cntl & (1u << 11) ? "" : (sdma7_ ? ", MCU_WPTR_POLL_ENABLE clear" : ", F32_WPTR_POLL_ENABLE clear"),
                                  sdma7_ ? "MCU" : "F32"));
    }
    rptr_writeback_ = (cntl & (1u << 12)) != 0;
    const uint32_t size = (cntl >> 1) & 0x1f;
    ring_bytes_ = uint64_t{4} << size;
    ring_va_ = ((uint64_t{chip_.load(regs_.rb_base_hi)} << 32) | chip_.load(regs_.rb_base)) << 8;
    rptr_addr_ = (uint64_t{chip_.load(regs_.rptr_addr_hi)} << 32) | chip_.load(regs_.rptr_addr_lo);
    wptr_poll_ = (uint64_t{chip_.load(regs_.wptr_poll_hi)} << 32) | chip_.load(regs_.wptr_poll_lo);
    // SDMA0_QUEUE0_DOORBELL.ENABLE bit 28; SDMA0_QUEUE0_DOORBELL_OFFSET.OFFSET bits 2-27 (dwords).
    const uint32_t db = chip_.load(regs_.doorbell);
    doorbell_dword_ = (chip_.load(regs_.doorbell_offset) >> 2) & 0x3ffffff;
    if (size < 2) return refuse(fmt::format("RB_SIZE {} is too small", size));
    if (!(db & (1u << 28))) return refuse("SDMA0_QUEUE0_DOORBELL.ENABLE is clear");
    if (doorbell_dword_ % 2 != 0) return refuse("the doorbell offset is not a 64-bit doorbell (slot * 2 dwords)");
    if (wptr_poll_ == 0 || wptr_poll_ % 8 != 0) return refuse("RB_WPTR_POLL_ADDR is 0 or not 8-byte aligned");
    if (rptr_addr_ == 0 || rptr_addr_ % 8 != 0) return refuse("RB_RPTR_ADDR is 0 or not 8-byte aligned");
    reset();
    rptr_ = (uint64_t{chip_.load(regs_.rb_rptr_hi)} << 32) | chip_.load(regs_.rb_rptr);
    active_ = true;
}

bool SdmaEngine::doorbell(uint64_t offset, unsigned width, uint64_t value) {
    if (!active_ || uint64_t{doorbell_dword_} * 4 != offset) return false;
    const std::string where = fmt::format("BAR2+0x{:x}", offset);
    if (width != 8) {
        chip_.violation(fmt::format("{}-byte doorbell write for SDMA0 queue 0: SDMA doorbells are 64-bit", width), where,
                        "tinygrad ops_amd.py AMDQueueDesc.signal_doorbell (doorbell64)");
        return true;
    }
    if (hung_) return true;
    if (halted()) {
        // A halted engine fetches nothing (sdma_v6_0_enable / sdma_v6_0_gfx_resume_instance un-halt it).
        const std::string why = fmt::format("SDMA0 is halted ({} {} has HALT set{}): SDMA0 queue 0's doorbell is not "
                                            "processed",
                                            sdma7_ ? "SDMA0_MCU_CNTL" : "SDMA0_F32_CNTL", hex(chip_.load(regs_.engine_cntl)),
                                            sdma7_ ? "; the model powers on halted" : ", the reset value 0x08084001");
        const char* source = sdma7_ ? "Linux sdma_v7_0.c sdma_v7_0_gfx_resume_instance (unhalt engine)"
                                    : "Linux sdma_v6_0.c sdma_v6_0_gfx_resume_instance (unhalt engine); gc_11_0_0_default.h";
        if (gc_regs != nullptr)
            gc_regs->drop(offset, why, source);
        else
            chip_.violation(why, where, source);
        return true;
    }
    uint64_t wptr = 0;
    if (!access(wptr_poll_, std::as_writable_bytes(std::span(&wptr, 1)), false)) return true;
    if (wptr < value) {  // a later submission may already have moved the polled wptr on
        hang(fmt::format("doorbell value {} is ahead of the write pointer {} at RB_WPTR_POLL_ADDR", value, wptr), where);
        return true;
    }
    run();
    return true;
}

void SdmaEngine::hang(const std::string& what, const std::string& where) {
    hung_ = true;
    chip_.violation(fmt::format("SDMA0 queue 0: {} (the queue hangs)", what), where, kPkt);
}

bool SdmaEngine::access(uint64_t va, std::span<std::byte> data, bool write) {
    if (gmc_.access(va, data, write, VmClient::gfx)) return true;
    hung_ = true;
    return false;
}

uint32_t SdmaEngine::packet_dwords(uint32_t header, bool& known) const {
    known = true;
    switch (header & 0xff) {
        case sdma::kOpNop: return 1 + ((header >> 16) & 0x3fff);  // NOP_HEADER.count: dwords that follow
        case sdma::kOpCopy: return 7;
        case sdma::kOpWrite: return 4;  // + the data dwords, from dw3
        case sdma::kOpIndirect: return 6;
        case sdma::kOpFence: return 4;
        case sdma::kOpPollRegmem: return 6;
        case sdma::kOpTimestamp: return 3;
        default: known = false; return 1;
    }
}

void SdmaEngine::run() {
    uint64_t wptr = 0;
    if (!access(wptr_poll_, std::as_writable_bytes(std::span(&wptr, 1)), false)) return;
    waiting_ = false;
    if (wptr % 4 != 0) return hang(fmt::format("write pointer {} is not a whole dword (pointers are bytes)", wptr), "RB_WPTR_POLL_ADDR");
    if (wptr < rptr_ || wptr - rptr_ > ring_bytes_)
        return hang(fmt::format("write pointer {} is behind, or more than a ring ahead of, the read pointer {}", wptr, rptr_),
                    "RB_WPTR_POLL_ADDR");
    auto report = [&] {
        if (rptr_writeback_) access(rptr_addr_, std::as_writable_bytes(std::span(&rptr_, 1)), true);
    };
    auto fetch = [&](uint64_t va, uint64_t max_dwords, const std::string& where, std::vector<uint32_t>& w) -> bool {
        uint32_t header = 0;
        if (!access(va, std::as_writable_bytes(std::span(&header, 1)), false)) return false;
        bool known = false;
        uint64_t n = packet_dwords(header, known);
        if (!known) {
            hang(fmt::format("unknown SDMA opcode {} (header {})", header & 0xff, hex(header)), where);
            return false;
        }
        if ((header & 0xff) == sdma::kOpWrite && max_dwords >= 4) {
            uint32_t dw3 = 0;
            if (!access(va + 12, std::as_writable_bytes(std::span(&dw3, 1)), false)) return false;
            n += (dw3 & 0xfffff) + 1;  // WRITE_UNTILED dw3 count = data dwords - 1
        }
        if (n > max_dwords) {
            hang(fmt::format("a {}-dword packet (opcode {}) does not fit in the {} dwords left before the {}", n,
                             header & 0xff, max_dwords, where.starts_with("IB") ? "IB end" : "ring end or write pointer"),
                 where);
            return false;
        }
        w.resize(n);
        return access(va, std::as_writable_bytes(std::span(w)), false);
    };
    std::vector<uint32_t> w;
    while (!hung_) {
        if (in_ib_) {
            while (ib_pos_ < ib_dwords_ && !hung_) {
                const std::string where = fmt::format("IB {} dword {}", hex(ib_va_), ib_pos_);
                if (!fetch(ib_va_ + ib_pos_ * 4, ib_dwords_ - ib_pos_, where, w)) return;
                uint32_t consumed = 0;
                const Step s = execute(w, consumed, where, true);
                if (s == Step::wait) {
                    waiting_ = true;
                    return;
                }
                if (s == Step::stop) return;
                ib_pos_ += consumed;
            }
            in_ib_ = false;
            rptr_ += 6 * 4;  // the INDIRECT packet
            report();
            continue;
        }
        if (rptr_ == wptr) break;
        const uint64_t offset = rptr_ % ring_bytes_;
        const std::string where = fmt::format("ring {} byte {}", hex(ring_va_), offset);
        // Packets never straddle the ring end (tinygrad ops_amd.py AMDCopyQueue._submit: the rest of the ring is NOP-filled).
        const uint64_t left = std::min(ring_bytes_ - offset, wptr - rptr_) / 4;
        if (!fetch(ring_va_ + offset, left, where, w)) return;
        uint32_t consumed = 0;
        const Step s = execute(w, consumed, where, false);
        if (s == Step::wait) {
            waiting_ = true;
            return;
        }
        if (s == Step::stop) return;
        if (in_ib_) continue;
        rptr_ += uint64_t{consumed} * 4;
        report();
    }
}

SdmaEngine::Step SdmaEngine::execute(const std::vector<uint32_t>& w, uint32_t& consumed, const std::string& where, bool in_ib) {
    consumed = static_cast<uint32_t>(w.size());
    const uint32_t op = w[0] & 0xff, sub_op = (w[0] >> 8) & 0xff;
    auto bad = [&](const std::string& what) {
        hang(what, where);
        return Step::stop;
    };
    auto addr = [&](size_t lo) { return (uint64_t{w[lo + 1]} << 32) | w[lo]; };
    switch (op) {
        case sdma::kOpNop: return Step::next;
        case sdma::kOpCopy: {
            if (sub_op != sdma::kSubOpCopyLinear)
                return bad(fmt::format("COPY sub-op {}: only COPY_LINEAR (0) is modelled yet", sub_op));
            const uint64_t bytes = uint64_t{w[1] & 0x3fffffff} + 1;  // COPY_LINEAR_COUNT count = bytes - 1
            const uint64_t src = addr(3), dst = addr(5);
            std::vector<std::byte> buf;
            for (uint64_t done = 0; done < bytes;) {
                const uint64_t n = std::min(kCopyChunk, bytes - done);
                buf.resize(n);
                if (!access(src + done, buf, false)) return Step::stop;
                if (!access(dst + done, buf, true)) return Step::stop;
                done += n;
            }
            copied_ += bytes;
            return Step::next;
        }
        case sdma::kOpWrite: {
            if (sub_op != sdma::kSubOpWriteLinear) return bad(fmt::format("WRITE sub-op {}: only linear (0) is modelled", sub_op));
            const uint64_t dst = addr(1);
            if (dst % 4 != 0) return bad(fmt::format("WRITE destination {} is not dword aligned", hex(dst)));
            std::vector<uint32_t> data(w.begin() + 4, w.end());
            return access(dst, std::as_writable_bytes(std::span(data)), true) ? Step::next : Step::stop;
        }
        case sdma::kOpFence: {
            const uint64_t dst = addr(1);
            if (dst % 4 != 0) return bad(fmt::format("FENCE address {} is not dword aligned", hex(dst)));
            uint32_t data = w[3];
            return access(dst, std::as_writable_bytes(std::span(&data, 1)), true) ? Step::next : Step::stop;
        }
        case sdma::kOpTimestamp: {
            if (sub_op != sdma::kSubOpTimestampGetGlobal)
                return bad(fmt::format("TIMESTAMP sub-op {}: only GET_GLOBAL (2) is modelled", sub_op));
            const uint64_t dst = addr(1);
            if (dst % 8 != 0) return bad(fmt::format("TIMESTAMP address {} is not 8-byte aligned", hex(dst)));
            uint64_t ts = gpu_clock(chip_);
            return access(dst, std::as_writable_bytes(std::span(&ts, 1)), true) ? Step::next : Step::stop;
        }
        case sdma::kOpPollRegmem: {
            // header: HDP_FLUSH bit 26, FUNC bits 28-30, MEM_POLL bit 31; dw1/2 address; dw3 value;
            // dw4 mask; dw5 interval / retry count.
            const uint32_t func = (w[0] >> 28) & 7;
            if (!(w[0] >> 31)) return bad("POLL_REGMEM of a register: only memory polls (MEM_POLL=1) are modelled yet");
            if (w[0] & (1u << 26)) return bad("POLL_REGMEM with HDP_FLUSH: not modelled yet");
            if (func == 7) return bad("POLL_REGMEM function 7 is reserved");
            const uint64_t va = addr(1);
            if (va % 4 != 0) return bad(fmt::format("POLL_REGMEM address {} is not dword aligned", hex(va)));
            uint32_t value = 0;
            if (!access(va, std::as_writable_bytes(std::span(&value, 1)), false)) return Step::stop;
            const uint32_t v = value & w[4], ref = w[3];
            const bool ok = func == 0 || (func == 1 && v < ref) || (func == 2 && v <= ref) || (func == 3 && v == ref) ||
                            (func == 4 && v != ref) || (func == 5 && v >= ref) || (func == 6 && v > ref);
            return ok ? Step::next : Step::wait;
        }
        case sdma::kOpIndirect: {
            if (in_ib) return bad("INDIRECT inside an IB");
            if (((w[0] >> 16) & 0xf) != 0) return bad("INDIRECT with a VMID other than 0 (only VMID 0 is modelled)");
            const uint64_t va = addr(1);
            const uint32_t size = w[3] & 0xfffff;
            if (va % 32 != 0) return bad(fmt::format("INDIRECT base {} is not 32-byte aligned", hex(va)));
            if (size == 0) return bad("INDIRECT of 0 dwords");
            if (!gmc_.probe(va, uint64_t{size} * 4, false, VmClient::gfx)) {
                hung_ = true;
                return Step::stop;
            }
            in_ib_ = true;
            ib_va_ = va;
            ib_dwords_ = size;
            ib_pos_ = 0;
            return Step::next;
        }
        default: return bad(fmt::format("unknown SDMA opcode {}", op));
    }
}

}  // namespace baregpu::sim::amdgpu
