// The GPU virtual address space manager. Every allocation starts on the largest page size that
// fits inside it (1 GiB, 2 MiB, 64 KiB or 4 KiB), so a backend can map it with the biggest pages
// its MMU has. Best fit over free ranges kept by address and by size, with neighbour coalescing
// on free, so the free list never holds more than (live allocations + 1) fragments and freeing
// everything restores one range. Not thread-safe: the MemoryManager holds the lock.
#pragma once

#include "base/address.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace baregpu::hcq {

class VaAllocator {
public:
    static constexpr uint64_t kPage4K = 4ull << 10;
    static constexpr uint64_t kPage64K = 64ull << 10;
    static constexpr uint64_t kPage2M = 2ull << 20;
    static constexpr uint64_t kPage1G = 1ull << 30;

    struct Range {
        GpuVirtualAddress start;
        uint64_t size;       // bytes reserved: the request rounded up to 4 KiB
        uint64_t page_size;  // the largest page size that is <= size and divides start
    };

    // Manages [base, base + size). base and size must be 4 KiB aligned (else std::invalid_argument).
    VaAllocator(GpuVirtualAddress base, uint64_t size);

    // The largest page size (1 GiB, 2 MiB, 64 KiB, 4 KiB) that is <= size; 4 KiB for smaller sizes.
    static uint64_t page_size_for(uint64_t size);

    // A range of at least `size` bytes aligned to page_size_for(size rounded up to 4 KiB). nullopt when nothing fits
    // (or size is 0 or overflows).
    std::optional<Range> allocate(uint64_t size);
    // Same with an explicit power-of-two alignment (>= 4 KiB).
    std::optional<Range> allocate(uint64_t size, uint64_t alignment);

    // Returns a range from allocate() (start and the Range's size). Freeing a range that overlaps
    // free space (double free, never allocated) throws std::logic_error and changes nothing.
    void free(GpuVirtualAddress start, uint64_t size);

    uint64_t bytes_free() const { return bytes_free_; }
    uint64_t largest_free() const;
    size_t fragments() const { return by_addr_.size(); }
    GpuVirtualAddress base() const { return base_; }
    uint64_t size() const { return size_; }

private:
    void insert_free(uint64_t start, uint64_t size);
    void erase_free(std::map<uint64_t, uint64_t>::iterator it);

    GpuVirtualAddress base_;
    uint64_t size_;
    uint64_t bytes_free_;
    std::map<uint64_t, uint64_t> by_addr_;            // start -> size
    std::set<std::pair<uint64_t, uint64_t>> by_size_;  // (size, start)
};

}  // namespace baregpu::hcq
