#include "vram_allocator.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace baregpu::nv {

VramAllocator::VramAllocator(std::string device, uint64_t base, uint64_t size)
    : device_(std::move(device)), base_(base), size_(size) {
    if (base % kVramPage4K != 0 || size % kVramPage4K != 0 || size == 0 || !checked_add(base, size))
        throw Error(device_, fmt::format("VRAM allocator: range base {:#x} size {:#x} must be non-empty and "
                                         "4 KiB aligned", base, size));
    free_[base] = size;
}

// First fit of `size` bytes at an `alignment` boundary; splits the free range around it.
bool VramAllocator::take_aligned(uint64_t size, uint64_t alignment, uint64_t& offset) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        uint64_t start = it->first, len = it->second;
        auto aligned = align_up(start, alignment);
        if (!aligned || *aligned - start > len || len - (*aligned - start) < size) continue;
        free_.erase(it);
        if (*aligned > start) free_[start] = *aligned - start;
        uint64_t end = *aligned + size, range_end = start + len;
        if (range_end > end) free_[end] = range_end - end;
        offset = *aligned;
        return true;
    }
    return false;
}

void VramAllocator::give_back(uint64_t offset, uint64_t size) {
    auto [it, inserted] = free_.emplace(offset, size);
    if (!inserted) throw Error(device_, fmt::format("VRAM allocator: {:#x} freed twice", offset));
    auto next = std::next(it);
    if (next != free_.end() && offset + size == next->first) {
        it->second += next->second;
        free_.erase(next);
    }
    if (it != free_.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second == offset) {
            prev->second += it->second;
            free_.erase(it);
        }
    }
}

VramAllocation VramAllocator::allocate(uint64_t bytes, bool contiguous) {
    auto rounded = align_up(bytes, kVramPage4K);
    if (bytes == 0 || !rounded)
        throw Error(device_, fmt::format("VRAM allocator: cannot allocate {:#x} bytes", bytes));
    VramAllocation out;
    out.size = *rounded;
    auto fail = [&](const char* why) {
        return Error(device_, fmt::format("VRAM allocator: out of VRAM for {:#x} bytes{} ({}); free {:#x} of {:#x}, "
                                          "largest free range {:#x}", *rounded, contiguous ? " contiguous" : "", why,
                                          stats().free, size_, stats().largest_free));
    };
    if (contiguous) {
        // The biggest alignment the size can use, so large leaves still map it; then any 4 KiB.
        for (uint64_t alignment : {kVramPage512M, kVramPage2M, kVramPage4K}) {
            if (alignment != kVramPage4K && *rounded < alignment) continue;
            uint64_t offset = 0;
            if (take_aligned(*rounded, alignment, offset)) {
                allocated_[offset] = *rounded;
                out.blocks.push_back({offset, *rounded});
                ++allocations_;
                return out;
            }
        }
        throw fail("no contiguous range is large enough");
    }
    std::vector<VramBlock> chunks;
    uint64_t remaining = *rounded;
    uint64_t n512 = 0, n2 = 0, n4 = 0;
    for (uint64_t chunk : {kVramPage512M, kVramPage2M, kVramPage4K}) {
        while (remaining >= chunk) {
            uint64_t offset = 0;
            if (!take_aligned(chunk, chunk, offset)) break;  // fragmented: step down
            chunks.push_back({offset, chunk});
            remaining -= chunk;
            (chunk == kVramPage512M ? n512 : chunk == kVramPage2M ? n2 : n4)++;
        }
    }
    if (remaining != 0) {
        for (const auto& c : chunks) give_back(c.offset, c.size);
        throw fail("not enough free 4 KiB pages");
    }
    chunks_512m_ += n512;
    chunks_2m_ += n2;
    chunks_4k_ += n4;
    for (const auto& c : chunks) {
        allocated_[c.offset] = c.size;
        if (!out.blocks.empty() && out.blocks.back().offset + out.blocks.back().size == c.offset)
            out.blocks.back().size += c.size;
        else
            out.blocks.push_back(c);
    }
    ++allocations_;
    return out;
}

void VramAllocator::free(const VramAllocation& allocation) {
    // Validate everything first, so that a bad free changes nothing.
    std::vector<std::pair<uint64_t, uint64_t>> chunks;
    for (const auto& block : allocation.blocks) {
        uint64_t at = block.offset, end = block.offset + block.size;
        while (at < end) {
            auto it = allocated_.find(at);
            if (it == allocated_.end() || at + it->second > end)
                throw Error(device_, fmt::format("VRAM allocator: free of block [{:#x}, {:#x}) that was not allocated "
                                                 "as such (at {:#x})", block.offset, end, at));
            chunks.emplace_back(at, it->second);
            at += it->second;
        }
    }
    for (auto [offset, size] : chunks) {
        allocated_.erase(offset);
        give_back(offset, size);
    }
    if (allocations_ > 0) --allocations_;
}

void VramAllocator::retire(uint64_t offset, uint64_t size) {
    if (offset % kVramPage4K != 0 || size % kVramPage4K != 0 || size == 0)
        throw Error(device_, fmt::format("VRAM allocator: retire [{:#x}, +{:#x}) must be 4 KiB aligned", offset, size));
    auto it = free_.upper_bound(offset);
    if (it == free_.begin() || std::prev(it)->first + std::prev(it)->second < offset + size)
        throw Error(device_, fmt::format("VRAM allocator: retire [{:#x}, {:#x}): not all of it is free", offset,
                                         offset + size));
    --it;
    uint64_t start = it->first, len = it->second;
    free_.erase(it);
    if (offset > start) free_[start] = offset - start;
    if (start + len > offset + size) free_[offset + size] = start + len - offset - size;
    retired_ += size;
}

VramStats VramAllocator::stats() const {
    VramStats s;
    s.total = size_ - retired_;
    for (const auto& [offset, len] : free_) {
        s.free += len;
        s.largest_free = std::max(s.largest_free, len);
    }
    s.retired = retired_;
    s.allocations = allocations_;
    s.chunks_512m = chunks_512m_;
    s.chunks_2m = chunks_2m_;
    s.chunks_4k = chunks_4k_;
    return s;
}

}  // namespace baregpu::nv
