#include "hcq/signal_pool.hpp"

#include "hcq/device.hpp"

namespace baregpu::hcq {

namespace {
constexpr uint64_t kPageBytes = 4096;
}

Signal SignalPool::acquire(uint64_t initial, std::string name, std::shared_ptr<Device> keep_alive) {
    std::lock_guard lock(mutex_);
    uint64_t completed = device_.completed_timeline();
    while (!retired_.empty() && retired_.front().timeline_value <= completed) {
        free_.push_back(retired_.front().slot);
        retired_.pop_front();
    }
    if (free_.empty()) {
        Buffer page = device_.allocate_internal(kPageBytes, BufferOptions{.host = true, .cpu_access = true, .uncached = true});
        auto* slots = reinterpret_cast<SignalSlot*>(page.cpu());
        size_t n = kPageBytes / sizeof(SignalSlot);
        // Hand out low addresses first.
        for (size_t i = n; i-- > 0;) free_.push_back({slots + i, page.address() + i * sizeof(SignalSlot)});
        pages_.push_back(std::move(page));
    }
    Free f = free_.back();
    free_.pop_back();
    store_release(f.slot->timestamp, 0);
    store_release(f.slot->value, initial);
    if (name.empty()) {
        names_.erase(f.address.value());
    } else {
        names_[f.address.value()] = name;
    }
    return Signal(this, f.slot, f.address, std::move(name), std::move(keep_alive));
}

void SignalPool::release(SignalSlot* slot, GpuVirtualAddress address) noexcept {
    uint64_t reserved = device_.timeline_value() - 1;
    std::lock_guard lock(mutex_);
    // The name stays until the slot is reused: a profile read later still names the signal.
    retired_.push_back({reserved, {slot, address}});
}

std::string SignalPool::name_of(GpuVirtualAddress address) {
    std::lock_guard lock(mutex_);
    auto it = names_.find(address.value());
    return it == names_.end() ? std::string() : it->second;
}

void SignalPool::collect(uint64_t completed) {
    std::lock_guard lock(mutex_);
    while (!retired_.empty() && retired_.front().timeline_value <= completed) {
        free_.push_back(retired_.front().slot);
        retired_.pop_front();
    }
}

void SignalPool::clear() noexcept {
    std::lock_guard lock(mutex_);
    free_.clear();
    retired_.clear();
    names_.clear();
    pages_.clear();
}

}  // namespace baregpu::hcq
