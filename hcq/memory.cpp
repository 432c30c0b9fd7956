#include "hcq/memory.hpp"

#include "base/error.hpp"
#include "hcq/device.hpp"

#include <fmt/format.h>
#include <stdexcept>

namespace baregpu::hcq {

detail::Allocation::~Allocation() {
    if (manager) manager->release(*this);
}

std::span<std::byte> Buffer::bytes() const {
    if (!alloc_->cpu) {
        throw UnsupportedError(device().name(), fmt::format("buffer at {} (0x{:x} bytes) is not mapped for the CPU; allocate it "
                                                            "with host or cpu_access, or use Device::copy_out",
                                                            address().hex(), size_));
    }
    return {alloc_->cpu + offset_, size_};
}

Buffer Buffer::view(uint64_t offset, uint64_t size) const {
    if (offset > size_ || size > size_ - offset) {
        throw std::out_of_range(fmt::format("view 0x{:x}+0x{:x} is outside a buffer of 0x{:x} bytes", offset, size, size_));
    }
    return Buffer(alloc_, offset_ + offset, size);
}

Device& Buffer::device() const { return alloc_->manager->device(); }

MemoryManager::MemoryManager(Device& device, MemoryBackend& backend, GpuVirtualAddress va_base, uint64_t va_size, uint64_t capacity)
    : device_(device), backend_(backend), capacity_(capacity), va_(va_base, va_size) {}

MemoryManager::~MemoryManager() { collect_all(); }

Buffer MemoryManager::allocate(uint64_t size, const BufferOptions& options, std::shared_ptr<Device> keep_alive) {
    if (size == 0) throw std::invalid_argument(device_.name() + ": cannot allocate a buffer of 0 bytes");
    std::optional<VaAllocator::Range> range;
    for (bool waited = false;; waited = true) {
        uint64_t retiring_until = 0;
        {
            std::lock_guard lock(mutex_);
            // Free what already retired before looking for space.
            collect_locked(device_.completed_timeline());
            range = va_.allocate(size);
            if (range && (range->size > capacity_ || mapped_ > capacity_ - range->size)) {
                va_.free(range->start, range->size);
                range.reset();
            }
            if (range) {
                mapped_ += range->size;
                break;
            }
            if (!retired_.empty()) retiring_until = retired_.back().timeline_value;
        }
        // Memory freed by the user may still be retiring: wait (bounded) for the device to pass
        // it, then look again. Not synchronize(): running out of memory is not a hang, and the
        // callers of allocate may hold locks that synchronize's bookkeeping takes.
        const Duration timeout = default_timeout();
        if (waited || retiring_until == 0 || !device_.timeline().try_wait(retiring_until, timeout)) {
            std::lock_guard lock(mutex_);
            std::string retiring =
                retiring_ ? fmt::format("; 0x{:x} bytes are freed but still in use by work the device has not finished (timeline "
                                        "'{}' is at {}, they retire at {})",
                                        retiring_, device_.timeline().name(), device_.completed_timeline(), retiring_until)
                          : std::string();
            throw Error(device_.name(), fmt::format("out of device memory: asked for 0x{:x} bytes; 0x{:x} of 0x{:x} bytes are "
                                                    "mapped, largest free address range 0x{:x}{}; free buffers or synchronize()",
                                                    size, mapped_, capacity_, va_.largest_free(), retiring));
        }
    }
    std::byte* cpu = nullptr;
    try {
        cpu = backend_.map_memory(range->start, range->size, range->page_size, options);
    } catch (const DeviceLostError& e) {
        // The device went away while the backend mapped: it may have written part of the
        // mapping (page-table entries, then a TLB flush that failed). The range is never handed
        // out again, and the device is in its error state: every later call says it was lost.
        device_.fail(e.what());
        throw;
    } catch (...) {
        std::lock_guard lock(mutex_);
        va_.free(range->start, range->size);
        mapped_ -= range->size;
        throw;
    }
    auto alloc = std::make_shared<detail::Allocation>();
    alloc->address = range->start;
    alloc->size = size;
    alloc->reserved = range->size;
    alloc->page_size = range->page_size;
    alloc->cpu = cpu;
    alloc->options = options;
    alloc->keep_alive = std::move(keep_alive);
    {
        std::lock_guard lock(mutex_);
        alloc->id = next_id_++;
    }
    alloc->manager = this;  // last: from here on the destructor frees it
    return Buffer(std::move(alloc), 0, size);
}

Buffer MemoryManager::adopt_host(std::byte* data, uint64_t size, std::shared_ptr<void> owner, std::shared_ptr<Device> keep_alive) {
    if (size == 0) throw std::invalid_argument(device_.name() + ": cannot import 0 bytes of host memory");
    std::optional<GpuVirtualAddress> va = backend_.map_host_memory(data, size);
    if (!va) {
        throw UnsupportedError(device_.name(), fmt::format("cannot address host memory it did not allocate (0x{:x} bytes at {}); copy it in "
                                                           "(Device::copy_in)",
                                                           size, static_cast<const void*>(data)));
    }
    auto alloc = std::make_shared<detail::Allocation>();
    alloc->address = *va;
    alloc->size = size;
    alloc->reserved = size;
    alloc->page_size = 4096;
    alloc->cpu = data;
    alloc->options = BufferOptions{.host = true};
    alloc->keep_alive = std::move(keep_alive);
    alloc->host_owner = std::move(owner);
    {
        std::lock_guard lock(mutex_);
        alloc->id = next_id_++;
    }
    alloc->manager = this;  // last: from here on the destructor releases it
    return Buffer(std::move(alloc), 0, size);
}

void MemoryManager::release(detail::Allocation& alloc) noexcept {
    Retired r{0, alloc.address, alloc.reserved, alloc.cpu, std::move(alloc.host_owner)};
    // Whatever was submitted until now may still use the memory: retire it by the last timeline
    // value reserved. Nothing submitted later can name it (the buffer is gone).
    uint64_t reserved = device_.timeline_value() - 1;
    uint64_t completed = device_.completed_timeline();
    std::lock_guard lock(mutex_);
    if (completed >= reserved && retired_.empty()) {
        free_now(r);
        return;
    }
    r.timeline_value = reserved;
    if (!r.host_owner) retiring_ += r.reserved;
    retired_.push_back(r);
}

void MemoryManager::collect(uint64_t completed) {
    std::lock_guard lock(mutex_);
    collect_locked(completed);
}

void MemoryManager::collect_locked(uint64_t completed) noexcept {
    while (!retired_.empty() && retired_.front().timeline_value <= completed) {
        if (!retired_.front().host_owner) retiring_ -= retired_.front().reserved;
        free_now(retired_.front());
        retired_.pop_front();
    }
}

void MemoryManager::collect_all() noexcept {
    std::lock_guard lock(mutex_);
    while (!retired_.empty()) {
        if (!retired_.front().host_owner) retiring_ -= retired_.front().reserved;
        free_now(retired_.front());
        retired_.pop_front();
    }
}

void MemoryManager::free_now(const Retired& r) noexcept {
    if (r.host_owner) {  // adopt_host's: the owner's memory goes back to the owner
        backend_.unmap_host_memory(r.address, r.reserved);
        return;
    }
    backend_.unmap_memory(r.address, r.reserved, r.cpu);
    va_.free(r.address, r.reserved);
    mapped_ -= r.reserved;
}

uint64_t MemoryManager::bytes_mapped() const {
    std::lock_guard lock(mutex_);
    return mapped_;
}

uint64_t MemoryManager::bytes_retiring() const {
    std::lock_guard lock(mutex_);
    return retiring_;
}

size_t MemoryManager::va_fragments() const {
    std::lock_guard lock(mutex_);
    return va_.fragments();
}

uint64_t MemoryManager::va_bytes_free() const {
    std::lock_guard lock(mutex_);
    return va_.bytes_free();
}

}  // namespace baregpu::hcq
