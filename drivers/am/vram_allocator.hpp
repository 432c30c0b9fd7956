// Physical VRAM for HCQ buffers: the range above boot memory and the page-table pool, handed out
// as few, large, aligned extents so the page table can map them with 2 MiB / 1 GiB leaves
// (tinygrad's `PhysicalAllocator` prefers contiguous, huge-page-aligned
// chunks for the same reason). Addresses are FB-relative byte offsets. Not thread-safe: the
// HCQ device calls it under its memory lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace baregpu::am {

struct VramExtent {
    uint64_t paddr = 0;  // FB-relative
    uint64_t size = 0;
};

class VramAllocator {
public:
    // Manages [begin, end); both 4 KiB aligned.
    VramAllocator(uint64_t begin, uint64_t end);

    // `size` bytes (a 4 KiB multiple). One extent aligned to `alignment` when a free range can
    // hold it (the huge-page case); with `allow_scatter`, otherwise several extents, largest
    // first, each aligned to 4 KiB. Returns an empty vector when VRAM cannot hold `size` at all.
    std::vector<VramExtent> allocate(uint64_t size, uint64_t alignment, bool allow_scatter);
    void free(const VramExtent& extent);

    uint64_t capacity() const { return end_ - begin_; }
    uint64_t free_bytes() const { return free_bytes_; }
    // The largest single free range (what a contiguous allocation can get).
    uint64_t largest_free() const;
    size_t fragments() const { return free_.size(); }

private:
    void insert_free(uint64_t begin, uint64_t size);
    void take(uint64_t at, uint64_t size);

    uint64_t begin_, end_;
    uint64_t free_bytes_ = 0;
    std::map<uint64_t, uint64_t> free_;  // start -> size, coalesced
};

}  // namespace baregpu::am
