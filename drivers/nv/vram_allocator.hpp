// Physical VRAM allocator of the NVIDIA driver. VRAM is handed out in naturally aligned chunks of
// 512 MiB, then 2 MiB, then 4 KiB, so that the page table can map an allocation with the largest
// leaves the MMU has (512 MiB PTEs at PDE1, 2 MiB PTEs at PDE0: open-gpu-kernel-modules
// uvm_ampere_mmu.c; tinygrad's nv/nvdev.py takes the same three sizes). When fragmentation
// leaves no aligned big chunk, it steps down to the next size. A `contiguous` request (page tables, USERD, firmware) gets one block. Retired ranges (bad
// pages, reserved firmware regions) are never handed out again.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace baregpu::nv {

inline constexpr uint64_t kVramPage4K = uint64_t{4} << 10;
inline constexpr uint64_t kVramPage2M = uint64_t{2} << 20;
inline constexpr uint64_t kVramPage512M = uint64_t{512} << 20;

// One physically contiguous piece: [offset, offset + size) in VRAM (offset from the start of FB).
struct VramBlock {
    uint64_t offset = 0;
    uint64_t size = 0;
    bool operator==(const VramBlock&) const = default;
};

// What allocate() handed out: blocks in ascending VA order (the order the caller maps them).
// Adjacent chunks that happen to be physically contiguous are merged into one block.
struct VramAllocation {
    std::vector<VramBlock> blocks;
    uint64_t size = 0;  // bytes, a multiple of 4 KiB
};

struct VramStats {
    uint64_t total = 0;          // bytes managed (after retirement)
    uint64_t free = 0;           // bytes free
    uint64_t largest_free = 0;   // the largest free contiguous range
    uint64_t retired = 0;        // bytes retired
    uint64_t allocations = 0;    // live allocations
    uint64_t chunks_512m = 0, chunks_2m = 0, chunks_4k = 0;  // chunks handed out so far, by size
};

class VramAllocator {
public:
    // Manages [base, base + size) of VRAM; both 4 KiB aligned. `device` names the GPU in errors.
    VramAllocator(std::string device, uint64_t base, uint64_t size);

    // `bytes` rounded up to 4 KiB. Throws baregpu::Error (naming the request and the free space)
    // when it cannot be satisfied; nothing is allocated then.
    VramAllocation allocate(uint64_t bytes, bool contiguous = false);
    // Returns every block of `allocation`. Throws baregpu::Error for a block that is not allocated.
    void free(const VramAllocation& allocation);
    // Takes [offset, offset + size) out of service for good. It must be free now.
    void retire(uint64_t offset, uint64_t size);

    VramStats stats() const;

private:
    std::string device_;
    uint64_t base_, size_;
    std::map<uint64_t, uint64_t> free_;       // offset -> size, coalesced
    std::map<uint64_t, uint64_t> allocated_;  // chunk offset -> size
    uint64_t retired_ = 0, allocations_ = 0;
    uint64_t chunks_512m_ = 0, chunks_2m_ = 0, chunks_4k_ = 0;

    bool take_aligned(uint64_t size, uint64_t alignment, uint64_t& offset);
    void give_back(uint64_t offset, uint64_t size);
};

}  // namespace baregpu::nv
