// Where signals come from: 4 KiB pages of host-visible, device-uncached memory, cut into 256
// slots. A released slot is reused only after the device timeline passed the value reserved
// when it was released, so a queue still writing the old signal cannot corrupt a new one.
#pragma once

#include "hcq/memory.hpp"
#include "hcq/signal.hpp"

#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace baregpu::hcq {

class SignalPool {
public:
    explicit SignalPool(Device& device) : device_(device) {}

    Signal acquire(uint64_t initial, std::string name, std::shared_ptr<Device> keep_alive);
    void release(SignalSlot* slot, GpuVirtualAddress address) noexcept;
    void collect(uint64_t completed);
    Device& device() const { return device_; }
    // Drop every page (device teardown).
    void clear() noexcept;
    // The name of the signal at `address` (live, or released and not yet reused), or empty.
    std::string name_of(GpuVirtualAddress address);

private:
    struct Free {
        SignalSlot* slot;
        GpuVirtualAddress address;
    };
    struct Retired {
        uint64_t timeline_value;
        Free slot;
    };
    Device& device_;
    std::mutex mutex_;
    std::vector<Buffer> pages_;
    std::vector<Free> free_;
    std::deque<Retired> retired_;
    std::unordered_map<uint64_t, std::string> names_;
};

}  // namespace baregpu::hcq
