#include "hcq/va_allocator.hpp"

#include "base/checked.hpp"

#include <fmt/format.h>
#include <stdexcept>

namespace baregpu::hcq {

VaAllocator::VaAllocator(GpuVirtualAddress base, uint64_t size) : base_(base), size_(size), bytes_free_(0) {
    if (!base.is_aligned(kPage4K) || size % kPage4K != 0 || size == 0 || !checked_add(base.value(), size)) {
        throw std::invalid_argument(fmt::format("VA range {}+0x{:x} is not a non-empty 4 KiB aligned range", base.hex(), size));
    }
    insert_free(base.value(), size);
}

uint64_t VaAllocator::page_size_for(uint64_t size) {
    for (uint64_t page : {kPage1G, kPage2M, kPage64K}) {
        if (size >= page) return page;
    }
    return kPage4K;
}

std::optional<VaAllocator::Range> VaAllocator::allocate(uint64_t size) {
    // The page size of what is reserved (size rounded up to 4 KiB): 2 MiB - 1 byte reserves 2 MiB.
    auto rounded = align_up(size, kPage4K);
    if (!rounded) return std::nullopt;
    return allocate(size, page_size_for(*rounded));
}

std::optional<VaAllocator::Range> VaAllocator::allocate(uint64_t size, uint64_t alignment) {
    if (size == 0 || !is_power_of_two(alignment) || alignment < kPage4K) return std::nullopt;
    auto rounded = align_up(size, kPage4K);
    if (!rounded) return std::nullopt;
    size = *rounded;

    // Fits: the block [start, start + len) holds `size` bytes at an aligned address.
    auto fits = [&](uint64_t start, uint64_t len) -> std::optional<uint64_t> {
        auto aligned = align_up(start, alignment);
        if (!aligned) return std::nullopt;
        uint64_t pad = *aligned - start;
        if (pad > len || len - pad < size) return std::nullopt;
        return *aligned;
    };

    // Best fit: the smallest blocks that hold `size` first. Alignment padding can make a block
    // that is big enough unusable, so look at a bounded number of candidates, then fall back to
    // the smallest block big enough for any alignment (size + alignment - 4 KiB), which always fits.
    std::optional<uint64_t> chosen;
    uint64_t block_start = 0;
    int looked = 0;
    for (auto it = by_size_.lower_bound({size, 0}); it != by_size_.end() && looked < 32; ++it, ++looked) {
        if (auto at = fits(it->second, it->first)) {
            chosen = at;
            block_start = it->second;
            break;
        }
    }
    if (!chosen) {
        auto worst = checked_add<uint64_t>(size, alignment - kPage4K);
        if (!worst) return std::nullopt;
        auto it = by_size_.lower_bound({*worst, 0});
        if (it == by_size_.end()) return std::nullopt;
        chosen = fits(it->second, it->first);
        block_start = it->second;
        if (!chosen) return std::nullopt;  // cannot happen; kept as a guard
    }

    auto block = by_addr_.find(block_start);
    uint64_t block_len = block->second;
    erase_free(block);
    uint64_t start = *chosen;
    if (start > block_start) insert_free(block_start, start - block_start);
    uint64_t end = start + size, block_end = block_start + block_len;
    if (end < block_end) insert_free(end, block_end - end);
    // The biggest page that fits inside the range and divides its start.
    uint64_t page = page_size_for(size);
    while (start % page != 0) page = page == kPage1G ? kPage2M : page == kPage2M ? kPage64K : kPage4K;
    return Range{GpuVirtualAddress(start), size, page};
}

void VaAllocator::free(GpuVirtualAddress start_addr, uint64_t size) {
    uint64_t start = start_addr.value();
    auto end = checked_add(start, size);
    if (size == 0 || !end || start < base_.value() || *end > base_.value() + size_) {
        throw std::logic_error(fmt::format("VA range {}+0x{:x} is outside {}+0x{:x}", start_addr.hex(), size, base_.hex(), size_));
    }
    auto next = by_addr_.lower_bound(start);
    bool overlaps_next = next != by_addr_.end() && next->first < *end;
    bool overlaps_prev = next != by_addr_.begin() && std::prev(next)->first + std::prev(next)->second > start;
    if (overlaps_next || overlaps_prev) {
        throw std::logic_error(fmt::format("VA range {}+0x{:x} is freed twice or was never allocated", start_addr.hex(), size));
    }
    uint64_t new_start = start, new_end = *end;
    if (next != by_addr_.end() && next->first == new_end) {
        new_end += next->second;
        erase_free(next);
    }
    auto after = by_addr_.lower_bound(start);
    if (after != by_addr_.begin()) {
        auto prev = std::prev(after);
        if (prev->first + prev->second == new_start) {
            new_start = prev->first;
            erase_free(prev);
        }
    }
    insert_free(new_start, new_end - new_start);
}

uint64_t VaAllocator::largest_free() const { return by_size_.empty() ? 0 : by_size_.rbegin()->first; }

void VaAllocator::insert_free(uint64_t start, uint64_t len) {
    by_addr_.emplace(start, len);
    by_size_.emplace(len, start);
    bytes_free_ += len;
}

void VaAllocator::erase_free(std::map<uint64_t, uint64_t>::iterator it) {
    by_size_.erase({it->second, it->first});
    bytes_free_ -= it->second;
    by_addr_.erase(it);
}

}  // namespace baregpu::hcq
