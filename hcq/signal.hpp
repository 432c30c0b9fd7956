// Signals: 16 bytes of device-visible memory, a 64-bit value at +0 and a 64-bit timestamp (device
// ticks) at +8, that queues write and wait on and the host reads, writes and waits on. Values
// only grow (timeline semantics): a wait is satisfied by value >= target.
#pragma once

#include "base/address.hpp"
#include "hcq/types.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace baregpu::hcq {

class Device;
class SignalPool;

// The layout a device writes. Accessed only through std::atomic_ref (devices and the host
// write it concurrently).
struct alignas(16) SignalSlot {
    uint64_t value;
    uint64_t timestamp;
};
static_assert(sizeof(SignalSlot) == 16);
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free);

inline uint64_t load_acquire(const uint64_t& word) noexcept {
    return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(word)).load(std::memory_order_acquire);
}
inline void store_release(uint64_t& word, uint64_t value) noexcept {
    std::atomic_ref<uint64_t>(word).store(value, std::memory_order_release);
}

class Signal {
public:
    Signal() = default;
    Signal(Signal&& other) noexcept;
    Signal& operator=(Signal&& other) noexcept;
    Signal(const Signal&) = delete;
    Signal& operator=(const Signal&) = delete;
    // Returns the slot to its device's pool, which reuses it only after the device timeline
    // passed every submission made so far.
    ~Signal();

    explicit operator bool() const { return slot_ != nullptr; }

    uint64_t value() const noexcept { return load_acquire(slot_->value); }
    // Host write. Wakes device queues waiting on this signal. Works in the device's error state
    // too (it is a write to memory): setting a gate lets a stuck queue drain before teardown.
    void set(uint64_t value);
    // Raw device ticks of the last timestamp() written here; Device::timestamp_frequency()
    // gives ticks per second.
    uint64_t timestamp() const noexcept { return load_acquire(slot_->timestamp); }

    // Where devices read and write it: value at address(), timestamp at address() + 8.
    GpuVirtualAddress address() const noexcept { return address_; }
    GpuVirtualAddress timestamp_address() const noexcept { return address_ + 8; }
    SignalSlot* slot() const noexcept { return slot_; }
    Device& device() const noexcept;
    const std::string& name() const noexcept { return name_; }
    // "wait <name>" in the profiler's string table (interned on first use).
    uint32_t profile_wait_name() const;

    // Blocks until value() >= target: spins briefly, then sleeps with the device's hook. The
    // timeout is honoured exactly (no extension on progress). Throws TimeoutError naming the
    // signal, the awaited and the last seen value and the device's queue read/write pointers,
    // or DeviceLostError when the device enters its error state meanwhile.
    void wait(uint64_t target, Duration timeout = default_timeout()) const;
    // Same, but returns false on timeout instead of throwing (still throws DeviceLostError).
    bool try_wait(uint64_t target, Duration timeout) const;

private:
    friend class SignalPool;
    friend class Device;
    Signal(SignalPool* pool, SignalSlot* slot, GpuVirtualAddress address, std::string name, std::shared_ptr<Device> keep_alive)
        : keep_alive_(std::move(keep_alive)), pool_(pool), slot_(slot), address_(address), name_(std::move(name)) {}
    // A view of `of`'s memory at another address (where a bus peer's engines reach it). Does not
    // own the slot; `of` must outlive it.
    Signal(const Signal& of, GpuVirtualAddress address)
        : pool_(of.pool_), slot_(of.slot_), address_(address), name_(of.name_), view_(true) {}
    void release() noexcept;

    std::shared_ptr<Device> keep_alive_;  // declared first: destroyed last
    SignalPool* pool_ = nullptr;
    SignalSlot* slot_ = nullptr;
    GpuVirtualAddress address_;
    std::string name_;
    mutable uint32_t profile_wait_name_ = UINT32_MAX;
    bool view_ = false;
};

}  // namespace baregpu::hcq
