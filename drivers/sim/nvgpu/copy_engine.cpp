// The copy engine behind a subchannel bound to AMPERE_DMA_COPY_A/B (clc6b5.h / clc7b5.h, same
// methods): pitch-linear, virtual-address copies of LINE_LENGTH_IN bytes from OFFSET_IN to
// OFFSET_OUT, and the semaphore release LAUNCH_DMA asks for. Typed from
// src/common/sdk/nvidia/inc/class/clc7b5.h: SET_SEMAPHORE_A 0x240 (UPPER 16:0), SET_SEMAPHORE_B 0x244,
// SET_SEMAPHORE_PAYLOAD 0x248, SET_SEMAPHORE_PAYLOAD_UPPER 0x24c, SET_SRC/DST_PHYS_MODE 0x260/0x264,
// LAUNCH_DMA 0x300, OFFSET_IN_UPPER 0x400 (16:0), OFFSET_IN_LOWER 0x404, OFFSET_OUT_UPPER 0x408,
// OFFSET_OUT_LOWER 0x40c, PITCH_IN 0x410, PITCH_OUT 0x414, LINE_LENGTH_IN 0x418, LINE_COUNT 0x41c.
// LAUNCH_DMA: DATA_TRANSFER_TYPE 1:0 (0 NONE, 1 PIPELINED, 2 NON_PIPELINED), FLUSH_ENABLE 2:2,
// SEMAPHORE_TYPE 4:3 (0 NONE, 1 RELEASE_ONE_WORD, 2 RELEASE_FOUR_WORD with timestamp, 3 CONDITIONAL_INTR),
// INTERRUPT_TYPE 6:5 (0 NONE, 1 BLOCKING, 2 NON_BLOCKING), SRC/DST_MEMORY_LAYOUT 7:7 / 8:8 (1 PITCH),
// MULTI_LINE_ENABLE 9:9, REMAP_ENABLE 10:10, SRC/DST_TYPE 12:12 / 13:13 (0 VIRTUAL),
// SEMAPHORE_REDUCTION_ENABLE 19:19, SEMAPHORE_PAYLOAD_SIZE 27:27 (1 TWO_WORD).
#include "gpu_engines.hpp"
#include "gpu_engines_internal.hpp"

#include <fmt/format.h>

#include <cstring>

namespace baregpu::sim::nvgpu {

namespace {
constexpr uint32_t SET_SEMAPHORE_A = 0x240, SET_SEMAPHORE_B = 0x244, SET_SEMAPHORE_PAYLOAD = 0x248,
                   SET_SEMAPHORE_PAYLOAD_UPPER = 0x24c, SET_SRC_PHYS_MODE = 0x260, SET_DST_PHYS_MODE = 0x264,
                   LAUNCH_DMA = 0x300, OFFSET_IN_UPPER = 0x400, OFFSET_IN_LOWER = 0x404, OFFSET_OUT_UPPER = 0x408,
                   OFFSET_OUT_LOWER = 0x40c, PITCH_IN = 0x410, PITCH_OUT = 0x414, LINE_LENGTH_IN = 0x418,
                   LINE_COUNT = 0x41c;

constexpr uint32_t bits(uint32_t v, unsigned hi, unsigned lo) { return (v >> lo) & ((1u << (hi - lo + 1)) - 1); }

bool known_method(uint32_t m) {
    switch (m) {
    case SET_SEMAPHORE_A: case SET_SEMAPHORE_B: case SET_SEMAPHORE_PAYLOAD: case SET_SEMAPHORE_PAYLOAD_UPPER:
    case SET_SRC_PHYS_MODE: case SET_DST_PHYS_MODE: case LAUNCH_DMA: case OFFSET_IN_UPPER: case OFFSET_IN_LOWER:
    case OFFSET_OUT_UPPER: case OFFSET_OUT_LOWER: case PITCH_IN: case PITCH_OUT: case LINE_LENGTH_IN: case LINE_COUNT:
        return true;
    default:
        return false;
    }
}
}  // namespace

GpuEngines::Step GpuEngines::copy_method(Channel& c, unsigned subchannel, uint32_t method, uint32_t data) {
    auto refuse = [&](const std::string& why) {
        EngineFault e;
        e.kind = EngineFault::Kind::bad_method;
        e.subchannel = subchannel;
        e.method = method;
        e.data = data;
        e.what = fmt::format("copy engine (class {:#x}, subchannel {}) method {:#06x} data {:#x}: {}",
                             c.classes[subchannel], subchannel, method, data, why);
        return stop(c, e);
    };
    if (!known_method(method)) return refuse("not a method this model executes (clc7b5.h)");
    c.methods[subchannel][method / 4] = data;
    if (method != LAUNCH_DMA) return Step::ok;

    const uint32_t transfer = bits(data, 1, 0), sem_type = bits(data, 4, 3), intr = bits(data, 6, 5);
    if (transfer == 3) return refuse("DATA_TRANSFER_TYPE 3 is not defined");
    if (transfer != 0) {
        if (bits(data, 7, 7) != 1 || bits(data, 8, 8) != 1)
            return refuse("only PITCH memory layouts (SRC/DST_MEMORY_LAYOUT = 1) are modelled, not BLOCKLINEAR");
        if (bits(data, 9, 9)) return refuse("MULTI_LINE_ENABLE is not modelled");
        if (bits(data, 10, 10)) return refuse("REMAP_ENABLE is not modelled");
        if (bits(data, 12, 12) || bits(data, 13, 13)) return refuse("PHYSICAL source/destination is not modelled");
        uint64_t src = (uint64_t{c.mthd(subchannel, OFFSET_IN_UPPER) & 0x1ffff} << 32) | c.mthd(subchannel, OFFSET_IN_LOWER);
        uint64_t dst = (uint64_t{c.mthd(subchannel, OFFSET_OUT_UPPER) & 0x1ffff} << 32) | c.mthd(subchannel, OFFSET_OUT_LOWER);
        uint64_t length = c.mthd(subchannel, LINE_LENGTH_IN);
        // Through a staging buffer: the copy reads all of the source before it writes (overlap is the
        // caller's business on hardware; here it behaves as memmove).
        if (copy_staging_.size() < length) copy_staging_.resize(length);
        std::span<std::byte> staging(copy_staging_.data(), length);
        if (auto f = mmu_.read(c.state.page_directory_base, c.state.mmu_format, src, staging))
            return mmu_fault(c, *f, "a copy engine source read");
        if (auto f = mmu_.write(c.state.page_directory_base, c.state.mmu_format, dst, staging))
            return mmu_fault(c, *f, "a copy engine destination write");
        if (port_) port_->spend_ns(length / 64 + 1000);  // ~64 GB/s plus a launch
    }
    if (bits(data, 19, 19)) return refuse("SEMAPHORE_REDUCTION_ENABLE is not modelled");
    if (sem_type == 3) return refuse("SEMAPHORE_TYPE RELEASE_CONDITIONAL_INTR_SEMAPHORE is not modelled");
    if (sem_type != 0) {
        uint64_t va = (uint64_t{c.mthd(subchannel, SET_SEMAPHORE_A) & 0x1ffff} << 32) | c.mthd(subchannel, SET_SEMAPHORE_B);
        bool two_word = bits(data, 27, 27) != 0;
        uint64_t payload = c.mthd(subchannel, SET_SEMAPHORE_PAYLOAD) |
                           (two_word ? uint64_t{c.mthd(subchannel, SET_SEMAPHORE_PAYLOAD_UPPER)} << 32 : 0);
        std::byte b[16];
        std::memcpy(b, &payload, 8);
        uint64_t ts = now_ns();
        std::memcpy(b + 8, &ts, 8);
        if (!write_bytes(c, va, std::span<const std::byte>(b, two_word ? 8 : 4), "a copy engine semaphore release"))
            return Step::fault;
        if (sem_type == 2 && !write_bytes(c, va + 8, std::span<const std::byte>(b + 8, 8), "a copy engine semaphore timestamp"))
            return Step::fault;
    }
    if (intr != 0) {
        ++c.nonstall;
        nonstall_pending_.push_back(c.token);
    }
    return Step::ok;
}

}  // namespace baregpu::sim::nvgpu
