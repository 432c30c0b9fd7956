// Device memory: Buffer (a range of a device's virtual address space, optionally mapped for the
// CPU), its options, and the MemoryManager that hands out VA ranges, asks the backend to back
// them, and retires freed memory by device timeline value so that nothing a queue may still
// touch is reused.
#pragma once

#include "base/address.hpp"
#include "hcq/va_allocator.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>

namespace baregpu::hcq {

class Device;
class MemoryManager;

struct BufferOptions {
    // System memory the device reaches over the bus, instead of the device's own memory. Always
    // mapped for the CPU.
    bool host = false;
    // Device memory mapped for the CPU too (through the BAR on a PCIe GPU).
    bool cpu_access = false;
    // Not cached by the device: signals, mailboxes, anything the CPU polls.
    bool uncached = false;

    bool cpu_mapped() const { return host || cpu_access; }
};

namespace detail {

// One allocation. Shared by every Buffer view of it; the last one out hands it back to the
// MemoryManager, which retires it by timeline value.
struct Allocation {
    MemoryManager* manager = nullptr;
    GpuVirtualAddress address;
    uint64_t size = 0;      // bytes asked for
    uint64_t reserved = 0;  // bytes of VA reserved (size rounded up to 4 KiB)
    uint64_t page_size = 0;
    std::byte* cpu = nullptr;
    BufferOptions options;
    uint64_t id = 0;
    std::shared_ptr<Device> keep_alive;  // null for the device's own internal allocations
    // Host memory the device did not allocate (Device::import_host_memory): its owner, released
    // once no submitted work can touch the memory. Null for the device's own memory.
    std::shared_ptr<void> host_owner;

    Allocation() = default;
    Allocation(const Allocation&) = delete;
    Allocation& operator=(const Allocation&) = delete;
    ~Allocation();
};

}  // namespace detail

// A range of device memory. Cheap to copy: copies and views share one allocation, which is
// freed when the last of them is destroyed (and reused only once the device timeline says no
// submitted work can touch it). A Buffer made by the user keeps its Device alive.
class Buffer {
public:
    Buffer() = default;

    explicit operator bool() const { return alloc_ != nullptr; }
    GpuVirtualAddress address() const { return alloc_->address + offset_; }
    uint64_t size() const { return size_; }
    // The CPU mapping, or nullptr when the memory is not CPU-mapped (device-local without
    // cpu_access).
    std::byte* cpu() const { return alloc_->cpu ? alloc_->cpu + offset_ : nullptr; }
    // The CPU mapping as a span; throws UnsupportedError when the buffer is not CPU-mapped.
    std::span<std::byte> bytes() const;
    template <typename T>
    std::span<T> as() const {
        auto b = bytes();
        return {reinterpret_cast<T*>(b.data()), b.size() / sizeof(T)};
    }

    // A view of [offset, offset + size) of this buffer, sharing its allocation. Throws
    // std::out_of_range when the range is not inside this buffer.
    Buffer view(uint64_t offset, uint64_t size) const;

    Device& device() const;
    const BufferOptions& options() const { return alloc_->options; }
    // Identity of the underlying allocation (views of one allocation share it), and this view's
    // offset inside it: what a dependency tracker compares.
    uint64_t allocation_id() const { return alloc_->id; }
    uint64_t offset() const { return offset_; }
    // The page size the backend may map this allocation with.
    uint64_t page_size() const { return alloc_->page_size; }

private:
    friend class MemoryManager;
    Buffer(std::shared_ptr<detail::Allocation> alloc, uint64_t offset, uint64_t size)
        : alloc_(std::move(alloc)), offset_(offset), size_(size) {}

    std::shared_ptr<detail::Allocation> alloc_;
    uint64_t offset_ = 0;
    uint64_t size_ = 0;
};

// What a backend implements to back VA ranges with memory.
class MemoryBackend {
public:
    // Back [va, va + size) with memory (size is a multiple of 4 KiB, va is aligned to
    // page_size). Returns the CPU mapping, or nullptr when the memory is not CPU-mapped. Throws
    // baregpu::Error (out of memory, mapping failed) with the device name.
    virtual std::byte* map_memory(GpuVirtualAddress va, uint64_t size, uint64_t page_size, const BufferOptions& options) = 0;
    // Undo map_memory. Called only once no submitted work can touch the range.
    virtual void unmap_memory(GpuVirtualAddress va, uint64_t size, std::byte* cpu) noexcept = 0;
    // Host memory the caller owns, addressed by the device as it is (no copy): the device address
    // of [data, data + size), or nullopt when this device cannot address it (the default: a GPU
    // would need the pages pinned and mapped through its IOMMU and page tables; not done).
    virtual std::optional<GpuVirtualAddress> map_host_memory(std::byte* data, uint64_t size) {
        (void)data, (void)size;
        return std::nullopt;
    }
    // Undo map_host_memory, once no submitted work can touch the range.
    virtual void unmap_host_memory(GpuVirtualAddress va, uint64_t size) noexcept { (void)va, (void)size; }

protected:
    ~MemoryBackend() = default;
};

// Hands out device memory. Thread-safe.
class MemoryManager {
public:
    // capacity: the most bytes that may be mapped at once (the device's memory size).
    MemoryManager(Device& device, MemoryBackend& backend, GpuVirtualAddress va_base, uint64_t va_size, uint64_t capacity);
    ~MemoryManager();

    // keep_alive: the device handle a user buffer holds (null for the device's own buffers).
    // Throws baregpu::Error naming the device, the size asked and what is in use when the
    // memory or the address space is exhausted even after waiting for retiring memory.
    Buffer allocate(uint64_t size, const BufferOptions& options, std::shared_ptr<Device> keep_alive);
    // [data, data + size) of host memory as a buffer, without a copy (MemoryBackend::
    // map_host_memory); `owner` is released once no submitted work can touch it. Throws
    // UnsupportedError naming the device when the backend cannot address it.
    Buffer adopt_host(std::byte* data, uint64_t size, std::shared_ptr<void> owner, std::shared_ptr<Device> keep_alive);

    // Free what retired at or below `completed` (the device timeline's value).
    void collect(uint64_t completed);
    // Free everything retiring now, without asking the device (at device teardown, after its
    // queues stopped).
    void collect_all() noexcept;

    uint64_t bytes_mapped() const;
    uint64_t bytes_retiring() const;
    uint64_t capacity() const { return capacity_; }
    Device& device() const { return device_; }
    // VA statistics (for tests of fragmentation).
    size_t va_fragments() const;
    uint64_t va_bytes_free() const;

    // Called by Allocation's destructor.
    void release(detail::Allocation& alloc) noexcept;

private:
    struct Retired {
        uint64_t timeline_value;
        GpuVirtualAddress address;
        uint64_t reserved;
        std::byte* cpu;
        std::shared_ptr<void> host_owner;  // adopt_host's memory: not from the VA range, not counted as mapped
    };
    void free_now(const Retired& r) noexcept;
    void collect_locked(uint64_t completed) noexcept;

    Device& device_;
    MemoryBackend& backend_;
    uint64_t capacity_;
    mutable std::mutex mutex_;
    VaAllocator va_;
    uint64_t mapped_ = 0;
    uint64_t retiring_ = 0;
    uint64_t next_id_ = 1;
    std::deque<Retired> retired_;  // in timeline order
};

}  // namespace baregpu::hcq
