#include "drivers/pci/iova_ranges.hpp"

#include "base/checked.hpp"

#include <fmt/format.h>

namespace baregpu::pci {

std::vector<IovaAllocator::Range> usable_iova_ranges(std::span<const IovaWindow> valid, uint64_t page_size) {
    static constexpr IovaWindow kEverythingBelowMsi{0, kX86MsiWindow.start - 1};
    static constexpr IovaWindow kEverythingAboveMsi{kX86MsiWindow.last + 1, ~uint64_t{0}};
    static constexpr IovaWindow kDefault[] = {kEverythingBelowMsi, kEverythingAboveMsi};
    if (valid.empty()) valid = kDefault;
    if (!is_power_of_two(page_size)) page_size = 4096;

    std::vector<IovaAllocator::Range> out;
    for (const IovaWindow& w : valid) {
        if (w.last < w.start) continue;
        uint64_t start = std::max(w.start, page_size);  // keep page 0 out
        auto aligned_start = align_up(start, page_size);
        if (!aligned_start) continue;
        // Exclusive end, rounded down to a page; a window reaching 2^64 - 1 ends at the last whole page.
        uint64_t end = w.last == ~uint64_t{0} ? (~uint64_t{0} & ~(page_size - 1)) : ((w.last + 1) & ~(page_size - 1));
        if (end <= *aligned_start || *aligned_start > w.last) continue;
        out.push_back({*aligned_start, end});
    }
    return out;
}

std::string describe_iova_windows(std::span<const IovaWindow> windows) {
    if (windows.empty()) return "none reported";
    std::string out;
    for (const IovaWindow& w : windows) {
        if (!out.empty()) out += ", ";
        out += fmt::format("0x{:x}-0x{:x}", w.start, w.last);
    }
    return out;
}

}  // namespace baregpu::pci
