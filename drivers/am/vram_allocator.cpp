#include "drivers/am/vram_allocator.hpp"

#include <algorithm>
#include <stdexcept>

namespace baregpu::am {

namespace {
constexpr uint64_t kPage = 4096;
uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

VramAllocator::VramAllocator(uint64_t begin, uint64_t end) : begin_(begin), end_(end) {
    if (begin % kPage || end % kPage || end < begin) throw std::invalid_argument("VRAM range must be 4 KiB aligned");
    if (end > begin) insert_free(begin, end - begin);
    free_bytes_ = end - begin;
}

void VramAllocator::insert_free(uint64_t begin, uint64_t size) {
    auto next = free_.lower_bound(begin);
    if (next != free_.end() && next->first < begin + size) throw std::logic_error("VRAM extent freed twice");
    if (next != free_.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second > begin) throw std::logic_error("VRAM extent freed twice");
        if (prev->first + prev->second == begin) {
            begin = prev->first;
            size += prev->second;
            free_.erase(prev);
        }
    }
    if (next != free_.end() && next->first == begin + size) {
        size += next->second;
        free_.erase(next);
    }
    free_[begin] = size;
}

void VramAllocator::take(uint64_t at, uint64_t size) {
    auto it = std::prev(free_.upper_bound(at));
    const uint64_t start = it->first, length = it->second;
    free_.erase(it);
    if (at > start) free_[start] = at - start;
    if (at + size < start + length) free_[at + size] = start + length - (at + size);
    free_bytes_ -= size;
}

std::vector<VramExtent> VramAllocator::allocate(uint64_t size, uint64_t alignment, bool allow_scatter) {
    if (size == 0 || size % kPage) throw std::invalid_argument("VRAM allocations are 4 KiB multiples");
    alignment = std::max(alignment, kPage);
    if (size > free_bytes_) return {};
    // Best fit among the ranges that hold it aligned: keeps large ranges for large buffers.
    uint64_t best_at = 0, best_waste = UINT64_MAX;
    for (const auto& [start, length] : free_) {
        const uint64_t at = align_up(start, alignment);
        if (at + size > start + length) continue;
        const uint64_t waste = length - size;
        if (waste < best_waste) {
            best_waste = waste;
            best_at = at;
        }
    }
    if (best_waste != UINT64_MAX) {
        take(best_at, size);
        return {{best_at, size}};
    }
    if (!allow_scatter) return {};
    // Fragmented: the largest ranges first, so the page table still gets the biggest leaves it can.
    std::vector<std::pair<uint64_t, uint64_t>> ranges(free_.begin(), free_.end());
    std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    std::vector<VramExtent> out;
    uint64_t left = size;
    for (const auto& [start, length] : ranges) {
        if (left == 0) break;
        const uint64_t n = std::min(left, length);
        take(start, n);
        out.push_back({start, n});
        left -= n;
    }
    return out;
}

void VramAllocator::free(const VramExtent& extent) {
    if (extent.paddr < begin_ || extent.paddr + extent.size > end_) throw std::logic_error("VRAM extent outside the heap");
    insert_free(extent.paddr, extent.size);
    free_bytes_ += extent.size;
}

uint64_t VramAllocator::largest_free() const {
    uint64_t best = 0;
    for (const auto& [start, length] : free_) best = std::max(best, length);
    return best;
}

}  // namespace baregpu::am
