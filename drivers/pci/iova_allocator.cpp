#include "drivers/pci/iova_allocator.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace baregpu::pci {

IovaAllocator::IovaAllocator(std::vector<Range> usable) {
    std::sort(usable.begin(), usable.end(), [](const Range& a, const Range& b) { return a.start < b.start; });
    for (const Range& r : usable) {
        if (r.end <= r.start) continue;
        if (!free_.empty()) {
            auto last = std::prev(free_.end());
            if (r.start <= last->second) {
                last->second = std::max(last->second, r.end);
                continue;
            }
        }
        free_.emplace(r.start, r.end);
    }
}

std::optional<uint64_t> IovaAllocator::allocate(uint64_t size, uint64_t alignment, uint64_t limit) {
    if (size == 0 || !is_power_of_two(alignment)) return std::nullopt;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        auto start = align_up(it->first, alignment);
        if (!start) break;
        auto end = checked_add<uint64_t>(*start, size);
        if (!end || *end > it->second) continue;
        if (*end > limit) break;  // ranges are sorted; everything later is higher still
        uint64_t range_start = it->first, range_end = it->second;
        free_.erase(it);
        if (range_start < *start) free_.emplace(range_start, *start);
        if (*end < range_end) free_.emplace(*end, range_end);
        return *start;
    }
    return std::nullopt;
}

void IovaAllocator::free(uint64_t start, uint64_t size) {
    uint64_t end = start + size;
    auto next = free_.lower_bound(start);
    if ((next != free_.end() && next->first < end) ||
        (next != free_.begin() && std::prev(next)->second > start)) {
        throw Error("", fmt::format("IOVA range 0x{:x}+0x{:x} is freed twice or was never allocated", start, size));
    }
    // Coalesce with the neighbours on either side.
    if (next != free_.end() && next->first == end) {
        end = next->second;
        next = free_.erase(next);
    }
    if (next != free_.begin()) {
        auto prev = std::prev(next);
        if (prev->second == start) {
            prev->second = end;
            return;
        }
    }
    free_.emplace(start, end);
}

uint64_t IovaAllocator::bytes_free() const {
    uint64_t total = 0;
    for (const auto& [start, end] : free_) total += end - start;
    return total;
}

}  // namespace baregpu::pci
