#include "drivers/am/copy_queue.hpp"

#include "base/error.hpp"
#include "drivers/am/dwords.hpp"
#include "drivers/am/hcq_device.hpp"
#include "drivers/am/sdma_packets.hpp"
#include "drivers/am/sdma_queue.hpp"
#include "hcq/clock.hpp"
#include "hcq/signal.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fmt/format.h>
#include <thread>

namespace baregpu::am {

namespace {

using namespace sdma;

// SDMA 7 takes SDMA 6's packet encodings (sdma_v7_0.c includes sdma_v6_0_0_pkt_open.h).
constexpr uint32_t kChunkDwords = 8;
// sdma_v6_0_0_pkt_open.h: SDMA_PKT_NOP_HEADER count bits 16-29 (dwords that follow).
constexpr uint32_t nop_header(uint32_t following) { return kOpNop | (following & 0x3FFF) << 16; }


// Dwords of the packet at w[0] (the packets this engine writes).
uint64_t packet_dwords(std::span<const uint32_t> w) {
    switch (w[0] & 0xFF) {
        case kOpNop: return 1 + ((w[0] >> 16) & 0x3FFF);
        case kOpCopy: return 7;
        case kOpWrite: return 4 + (w[3] & 0xFFFFF) + 1;
        case kOpIndirect: return 6;
        case kOpFence: return 4;
        case kOpPollRegmem: return 6;
        case kOpTimestamp: return 3;
        default: return 1;
    }
}


// `dwords` of command, NOP-padded to a multiple of 8.
SdmaWriter append(hcq::CommandBuffer& out, size_t dwords, uint32_t*& start) {
    const size_t padded = (dwords + kChunkDwords - 1) / kChunkDwords * kChunkDwords;
    start = reinterpret_cast<uint32_t*>(out.append(padded * 4));
    std::fill(start + dwords, start + padded, nop_header(0));
    return SdmaWriter(std::span<uint32_t>(start, dwords));
}

// One 8-dword copy chunk: COPY_LINEAR of n bytes (n > 0) or, for n == 0, a NOP with the same
// layout so that the addresses survive until a size patch needs the chunk again.
void write_chunk(uint32_t* p, uint64_t dst, uint64_t src, uint64_t n) {
    if (n > 0) {
        SdmaWriter(std::span<uint32_t>(p, 7)).copy_linear(dst, src, n);
    } else {
        p[0] = nop_header(6);
        p[1] = 0;
        p[2] = 0;
        p[3] = lo(src);
        p[4] = hi(src);
        p[5] = lo(dst);
        p[6] = hi(dst);
    }
    p[7] = nop_header(0);
}

}  // namespace

CopyQueueEngine::CopyQueueEngine(AmHcqDevice& device, uint64_t ring_bytes)
    : RingQueue(device, hcq::QueueKind::copy, "copy", ring_bytes, 1) {}

CopyQueueEngine::~CopyQueueEngine() { stop(); }

void CopyQueueEngine::start() {
    allocate_ring();
    enable();
}

void CopyQueueEngine::enable() {
    sdma0_queue0_start(device_.chip(), ring_.address().value(), ring_units_, rptr_address().value(), wptr_address().value());
    active_ = true;
}

void CopyQueueEngine::stop() noexcept {
    if (!active_) return;
    active_ = false;
    sdma0_queue0_stop(device_.chip());
}

void CopyQueueEngine::restart() {
    std::lock_guard lock(mutex_);
    stop();
    reset_pointers();
    enable();
}

void CopyQueueEngine::encode_wait(hcq::CommandBuffer& out, GpuVirtualAddress signal, uint64_t value) {
    uint32_t* p = nullptr;
    append(out, 12, p)
        .poll_regmem(signal.value() + 4, sdma::Compare::ge, hi(value), 0xffffffffu, 4, 0xfff)
        .poll_regmem(signal.value(), sdma::Compare::ge, lo(value), 0xffffffffu, 4, 0xfff);
}

void CopyQueueEngine::encode_signal(hcq::CommandBuffer& out, GpuVirtualAddress signal, uint64_t value) {
    uint32_t* p = nullptr;
    const uint32_t data[2] = {lo(value), hi(value)};
    append(out, 6, p).write_linear(signal.value(), data);
}

void CopyQueueEngine::encode_timestamp(hcq::CommandBuffer& out, GpuVirtualAddress dst) {
    uint32_t* p = nullptr;
    append(out, 3, p).timestamp(dst.value());
}

void CopyQueueEngine::encode_memory_barrier(hcq::CommandBuffer& out) {
    uint32_t* p = nullptr;
    append(out, 1, p).nop(1);
}

void CopyQueueEngine::encode_exec(hcq::CommandBuffer&, const hcq::Program&, std::span<const std::byte>, hcq::Dim3, hcq::Dim3) {
    throw std::logic_error("the SDMA copy queue runs no kernels");
}

void CopyQueueEngine::encode_copy(hcq::CommandBuffer& out, GpuVirtualAddress dst, GpuVirtualAddress src, uint64_t size) {
    const uint64_t chunks = std::max<uint64_t>(1, (size + kMaxCopyBytes - 1) / kMaxCopyBytes);
    auto* p = reinterpret_cast<uint32_t*>(out.append(chunks * kChunkDwords * 4));
    for (uint64_t j = 0; j < chunks; ++j) {
        const uint64_t off = j * kMaxCopyBytes;
        write_chunk(p + j * kChunkDwords, dst.value() + off, src.value() + off, size > off ? std::min(size - off, kMaxCopyBytes) : 0);
    }
}

void CopyQueueEngine::patch(std::span<std::byte> command, hcq::Field field, uint64_t value) {
    std::span<uint32_t> w = words_of(command);
    switch (field) {
        case hcq::Field::signal_address:
            if ((w[0] & 0xFF) == kOpPollRegmem) {
                w[1] = lo(value + 4);
                w[2] = hi(value + 4);
                w[7] = lo(value);
                w[8] = hi(value);
            } else {
                w[1] = lo(value);
                w[2] = hi(value);
            }
            return;
        case hcq::Field::signal_value:
            if ((w[0] & 0xFF) == kOpPollRegmem) {
                w[3] = hi(value);
                w[9] = lo(value);
            } else {
                w[4] = lo(value);
                w[5] = hi(value);
            }
            return;
        case hcq::Field::timestamp_address:
            w[1] = lo(value);
            w[2] = hi(value);
            return;
        case hcq::Field::copy_dst:
        case hcq::Field::copy_src: {
            const bool dst = field == hcq::Field::copy_dst;
            for (size_t j = 0; j * kChunkDwords < w.size(); ++j) {
                uint32_t* p = w.data() + j * kChunkDwords;
                const uint64_t v = value + j * kMaxCopyBytes;
                p[dst ? 5 : 3] = lo(v);
                p[dst ? 6 : 4] = hi(v);
            }
            return;
        }
        case hcq::Field::copy_size: {
            const size_t chunks = w.size() / kChunkDwords;
            if (value > chunks * kMaxCopyBytes) {
                throw std::length_error(fmt::format("copy size 0x{:x} needs more than the {} SDMA chunks this command was recorded "
                                                    "with; record the copy again",
                                                    value, chunks));
            }
            for (size_t j = 0; j < chunks; ++j) {
                uint32_t* p = w.data() + j * kChunkDwords;
                const uint64_t src = uint64_t{p[3]} | uint64_t{p[4]} << 32, dst = uint64_t{p[5]} | uint64_t{p[6]} << 32;
                const uint64_t off = j * kMaxCopyBytes;
                write_chunk(p, dst, src, value > off ? std::min(value - off, kMaxCopyBytes) : 0);
            }
            return;
        }
    }
}

void CopyQueueEngine::patch_exec_args(std::span<std::byte>, uint32_t, std::span<const std::byte>) {
    throw std::logic_error("the SDMA copy queue runs no kernels");
}

void CopyQueueEngine::patch_exec_dims(std::span<std::byte>, hcq::Dim3, hcq::Dim3) {
    throw std::logic_error("the SDMA copy queue runs no kernels");
}

uint64_t CopyQueueEngine::placed_bytes(std::span<const uint32_t> words, uint64_t at) const {
    const uint64_t start = at;
    for (size_t i = 0; i < words.size();) {
        const uint64_t n = packet_dwords(words.subspan(i)) * 4;
        if (at % ring_units_ + n > ring_units_) at += ring_units_ - at % ring_units_;
        at += n;
        i += n / 4;
    }
    return at - start;
}

void CopyQueueEngine::fill_to_ring_end() {
    // sdma_packets.hpp's rule: never straddle the ring end; fill the rest with one-dword NOPs.
    const uint64_t offset = (wptr_ % ring_units_) / 4, fill = ring_units_ / 4 - offset;
    std::fill(ring_words_ + offset, ring_words_ + offset + fill, nop_header(0));
    wptr_ += fill * 4;
}

void CopyQueueEngine::place(std::span<const uint32_t> words) {
    for (size_t i = 0; i < words.size();) {
        const uint64_t n = packet_dwords(words.subspan(i));
        const uint64_t offset = (wptr_ % ring_units_) / 4;
        if (offset * 4 + n * 4 > ring_units_) {
            fill_to_ring_end();
            continue;
        }
        std::memcpy(ring_words_ + offset, words.data() + i, n * 4);
        wptr_ += n * 4;
        i += n;
    }
}

uint64_t CopyQueueEngine::finish_and_ring() {
    const uint64_t ticket = ticket_at(wptr_ + 6 * 4 + ((wptr_ % ring_units_ + 24 > ring_units_) ? ring_units_ - wptr_ % ring_units_ : 0));
    uint32_t fence[6];
    const uint32_t data[2] = {lo(ticket), hi(ticket)};
    SdmaWriter(fence).write_linear(fence_address().value(), data);
    place(fence);
    publish_wptr();
    device_.flush_hdp();
    device_.ring_doorbell(kDoorbellSdmaEngine0, wptr_);
    return ticket;
}

uint64_t CopyQueueEngine::submit(std::span<const std::byte> commands) {
    if (commands.size() > max_submit_bytes()) {
        throw UnsupportedError(device_.name(), fmt::format("{}: {} bytes of commands do not fit in the {}-byte ring; bind() the queue",
                                                           name(), commands.size(), ring_units_));
    }
    std::lock_guard lock(mutex_);
    std::span<const uint32_t> words = words_of(commands);
    wait_for_space(placed_bytes(words, wptr_) + 2 * 64);
    place(words);
    return finish_and_ring();
}

uint64_t CopyQueueEngine::submit_bound(GpuVirtualAddress commands, uint64_t size) {
    std::lock_guard lock(mutex_);
    wait_for_space(16 * 4 + 2 * 64);
    if ((wptr_ % ring_units_) + 64 > ring_units_) fill_to_ring_end();  // the NOPs and INDIRECT stay together
    uint32_t ib[16];
    SdmaWriter w(ib, (wptr_ % ring_units_) / 4);
    w.indirect(commands.value(), static_cast<uint32_t>(size / 4));
    for (size_t i = 0; i < w.size(); ++i) {  // the leading NOPs one by one, then the packet whole
        if ((ib[i] & 0xFF) == kOpIndirect) {
            place(std::span<const uint32_t>(ib + i, 6));
            break;
        }
        place(std::span<const uint32_t>(ib + i, 1));
    }
    return finish_and_ring();
}

uint64_t CopyQueueEngine::max_submit_bytes() const { return ring_units_ - 4 * 64; }

std::string CopyQueueEngine::describe() const {
    const uint64_t rptr = read_pointer();
    const uint64_t wptr = hcq::load_acquire(wptr_);
    const uint64_t pending = (wptr % ring_units_ + ring_units_ - rptr % ring_units_) % ring_units_;
    std::string doing = "idle";
    if (ring_words_ != nullptr && pending != 0) {
        const uint32_t* w = ring_words_;
        auto at = [&](uint64_t i) { return w[(rptr / 4 + i) % (ring_units_ / 4)]; };
        switch (at(0) & 0xFF) {
            case kOpPollRegmem:
                doing = fmt::format("executing wait for {:#x} >= {:#x} (32-bit poll)", uint64_t{at(1)} | uint64_t{at(2)} << 32, at(3));
                break;
            case kOpCopy: doing = fmt::format("executing a copy of {} bytes", uint64_t{at(1) & 0x3FFFFFFF} + 1); break;
            case kOpWrite: doing = fmt::format("executing signal of {:#x}", uint64_t{at(1)} | uint64_t{at(2)} << 32); break;
            case kOpIndirect: doing = fmt::format("executing the bound commands at {:#x}", uint64_t{at(1)} | uint64_t{at(2)} << 32); break;
            default: doing = fmt::format("at packet {:#010x}", at(0)); break;
        }
    }
    return fmt::format("{} (SDMA0 queue 0, doorbell {:#x}): ring {:#x} of {} bytes, wptr={} rptr={}, {} bytes pending, {}; "
                       "completed ticket {}",
                       name(), kDoorbellSdmaEngine0, ring_.address().value(), ring_units_, wptr, rptr, pending, doing, completed_ticket());
}

}  // namespace baregpu::am
