#include "drivers/am/ring_queue.hpp"

#include "base/error.hpp"
#include "drivers/am/hcq_device.hpp"
#include "hcq/clock.hpp"
#include "hcq/signal.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fmt/format.h>
#include <thread>

namespace baregpu::am {

RingQueue::RingQueue(AmHcqDevice& device, hcq::QueueKind kind, std::string name, uint64_t ring_units, uint64_t unit_bytes)
    : Engine(kind, std::move(name)), device_(device), ring_units_(ring_units), unit_bytes_(unit_bytes) {
    const uint64_t bytes = ring_units * unit_bytes;
    if (bytes < 4096 || (bytes & (bytes - 1)) != 0) {
        throw Error(device.name(), fmt::format("{} ring of {} bytes: a power of two of at least 4 KiB is needed", this->name(), bytes));
    }
}

void RingQueue::allocate_ring() {
    ring_ = device_.allocate_ring(ring_units_ * unit_bytes_);  // the engine only reads the ring
    control_ = device_.allocate_owned(4096, {.host = true, .uncached = true});
    std::memset(control_.cpu(), 0, 4096);
    device_.publish_last(control_);  // the write pointer, after the ring it points into
    ring_words_ = reinterpret_cast<uint32_t*>(ring_.cpu());
    wptr_word_ = reinterpret_cast<uint64_t*>(control_.cpu());
    rptr_word_ = reinterpret_cast<uint64_t*>(control_.cpu() + 0x100);
    fence_word_ = reinterpret_cast<uint64_t*>(control_.cpu() + 0x200);
}

void RingQueue::release() noexcept {
    ring_words_ = nullptr;
    wptr_word_ = rptr_word_ = fence_word_ = nullptr;
    ring_ = {};
    control_ = {};
}

uint64_t RingQueue::read_pointer() const noexcept {
    if (rptr_word_ == nullptr) return 0;
    try {
        // What error messages show: the engine's, not an old host copy (shadowed links).
        if (device_.shadowed()) device_.refresh_host(rptr_word_, 0x108);
    } catch (...) {
    }
    return hcq::load_acquire(*rptr_word_);
}

bool RingQueue::refresh_progress() {
    // The engine's read pointer (+0x100) and the fence (+0x200), where the host's copy of the
    // control page must be brought up to date first (AmHcqDevice::shadowed()).
    return fence_word_ != nullptr && device_.shadowed() && device_.refresh_host(rptr_word_, 0x108);
}

uint64_t RingQueue::completed_ticket() const noexcept {
    return fence_word_ ? std::max(base_, hcq::load_acquire(*fence_word_)) : base_;
}

void RingQueue::wait_for_space(uint64_t units) {
    auto used = [&] { return base_ + wptr_ - completed_ticket(); };
    if (used() + units <= ring_units_) return;
    const uint64_t deadline = hcq::host_now_ns() + static_cast<uint64_t>(hcq::default_timeout().count());
    refresh_progress();
    for (; used() + units > ring_units_; refresh_progress()) {
        device_.check_usable();
        device_.check_faults();
        if (hcq::host_now_ns() > deadline) {
            throw TimeoutError(device_.name(), fmt::format("{}: the ring stayed full ({} units needed); {}", name(), units, describe()));
        }
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
}

void RingQueue::wait_ticket(uint64_t ticket, hcq::Duration timeout) {
    const uint64_t deadline = hcq::host_now_ns() + static_cast<uint64_t>(timeout.count());
    // A host wait: when the fence moved, what the finished work wrote is brought to the host too
    // (a bound queue's caller reads signals after its patch waited here).
    auto refresh = [&] {
        if (refresh_progress()) device_.refresh_all_host();
    };
    refresh();
    for (unsigned spin = 0; completed_ticket() < ticket; ++spin, refresh()) {
        device_.check_usable();
        if (spin % 64 == 0) device_.check_faults();
        if (hcq::host_now_ns() > deadline) {
            throw TimeoutError(device_.name(), fmt::format("{}: submission {} not done after {} ms; {}", name(), ticket,
                                                           std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count(),
                                                           describe()));
        }
        if (spin > 256) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
}

void RingQueue::publish_wptr() {
    // Over a shadowed link the ring goes to VRAM as written: every unit since the last publish
    // (one or two pieces, as it wraps), before the write pointer (ShadowMemory publish order).
    if (device_.shadowed() && wptr_ != published_wptr_) {
        const uint64_t ring_bytes = ring_units_ * unit_bytes_;
        const uint64_t units = std::min(wptr_ - published_wptr_, ring_units_);
        const uint64_t first = (wptr_ - units) % ring_units_ * unit_bytes_, bytes = units * unit_bytes_;
        device_.ring_written(ring_, first, std::min(bytes, ring_bytes - first));
        if (first + bytes > ring_bytes) device_.ring_written(ring_, 0, first + bytes - ring_bytes);
        published_wptr_ = wptr_;
    }
    // tinygrad ops_amd.py AMDComputeQueue._submit: the ring's contents, then the write pointer in memory, then the
    // doorbell with the same value (the caller's next step).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    hcq::store_release(*wptr_word_, wptr_);
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

void RingQueue::reset_pointers() {
    base_ += wptr_ + 1;
    wptr_ = 0;
    published_wptr_ = 0;
    hcq::store_release(*wptr_word_, 0);
    hcq::store_release(*rptr_word_, 0);
    hcq::store_release(*fence_word_, 0);
}

}  // namespace baregpu::am
