#include "drivers/cpu/address_space.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"

#include <cerrno>
#include <fmt/format.h>
#include <iterator>
#include <mutex>
#include <sys/mman.h>

namespace baregpu::cpu {

PageTable& PageTable::instance() {
    static PageTable* table = new PageTable;  // outlives every device, whatever the exit order
    return *table;
}

void PageTable::map(uint64_t start, uint64_t size) {
    std::unique_lock lock(mutex_);
    ranges_[start] = start + size;
}

void PageTable::unmap(uint64_t start, uint64_t size) {
    std::unique_lock lock(mutex_);
    ranges_.erase(start);
    for (auto it = read_only_.lower_bound(start); it != read_only_.end() && it->first < start + size;) it = read_only_.erase(it);
    generation_.fetch_add(1, std::memory_order_acq_rel);
}

bool PageTable::map_external(uint64_t start, uint64_t size) {
    auto end = checked_add(start, size);
    if (!end || size == 0) return false;
    std::unique_lock lock(mutex_);
    if (auto it = external_.find(start); it != external_.end() && it->second.first == *end) {
        ++it->second.second;
        return true;
    }
    auto it = ranges_.upper_bound(start);
    if (it != ranges_.begin() && std::prev(it)->second > start) return false;
    if (it != ranges_.end() && it->first < *end) return false;
    ranges_[start] = *end;
    external_[start] = {*end, 1};
    return true;
}

void PageTable::unmap_external(uint64_t start, uint64_t size) {
    std::unique_lock lock(mutex_);
    auto it = external_.find(start);
    if (it == external_.end() || it->second.first != start + size || --it->second.second > 0) return;
    external_.erase(it);
    ranges_.erase(start);
    generation_.fetch_add(1, std::memory_order_acq_rel);
}

void PageTable::mark_read_only(uint64_t start, uint64_t size) {
    if (size == 0) return;
    std::unique_lock lock(mutex_);
    read_only_[start] = start + size;
    generation_.fetch_add(1, std::memory_order_acq_rel);
}

bool PageTable::read_only_overlap(uint64_t start, uint64_t end) const {
    auto it = read_only_.upper_bound(start);
    if (it != read_only_.begin() && std::prev(it)->second > start) return true;
    return it != read_only_.end() && it->first < end;
}

bool PageTable::contains(uint64_t start, uint64_t size, bool write, uint64_t* lo, uint64_t* hi, bool* writable) const {
    auto end = checked_add(start, size);
    if (!end) return false;
    std::shared_lock lock(mutex_);
    auto it = ranges_.upper_bound(start);
    if (it == ranges_.begin()) return false;
    --it;
    if (start >= it->second) return false;
    if (lo) *lo = it->first;
    if (hi) *hi = it->second;
    if (writable) *writable = !read_only_overlap(it->first, it->second);
    // Walk across adjacent ranges (two buffers side by side are both mapped).
    uint64_t covered = it->second;
    while (covered < *end) {
        ++it;
        if (it == ranges_.end() || it->first != covered) return false;
        covered = it->second;
    }
    return !write || !read_only_overlap(start, *end);
}

AddressSpace::AddressSpace(std::string device, uint64_t size) : device_(std::move(device)) {
    constexpr uint64_t kAlign = 1ull << 30;
    auto rounded = align_up(size, kAlign);
    if (!rounded || *rounded == 0) throw Error(device_, fmt::format("address space of 0x{:x} bytes is not usable", size));
    size_ = *rounded;
    uint64_t span = size_ + kAlign;
    void* p = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        throw SystemError(device_, fmt::format("reserve 0x{:x} bytes of address space (lower it with ?va=)", span), errno);
    }
    auto raw = reinterpret_cast<uintptr_t>(p);
    uintptr_t aligned = (raw + kAlign - 1) & ~(kAlign - 1);
    if (aligned > raw) munmap(p, aligned - raw);
    uintptr_t tail = raw + span - (aligned + size_);
    if (tail) munmap(reinterpret_cast<void*>(aligned + size_), tail);
    base_ = reinterpret_cast<std::byte*>(aligned);
}

AddressSpace::~AddressSpace() {
    if (base_) munmap(base_, size_);
}

std::byte* AddressSpace::map(GpuVirtualAddress va, uint64_t size, uint64_t page_size) {
    auto* p = reinterpret_cast<std::byte*>(va.value());
    if (p < base_ || p + size > base_ + size_) {
        throw Error(device_, fmt::format("mapping {}+0x{:x} is outside the device's window", va.hex(), size));
    }
    void* got = mmap(p, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (got == MAP_FAILED) throw SystemError(device_, fmt::format("map 0x{:x} bytes at {}", size, va.hex()), errno);
    if (page_size >= (2ull << 20)) madvise(p, size, MADV_HUGEPAGE);  // a hint; 4 KiB pages still work
    PageTable::instance().map(va.value(), size);
    return p;
}

void AddressSpace::unmap(GpuVirtualAddress va, uint64_t size) noexcept {
    PageTable::instance().unmap(va.value(), size);
    // Replace the pages with a fresh reservation: the memory is returned and any stray access
    // faults instead of reading stale data.
    mmap(reinterpret_cast<void*>(va.value()), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
}

void AddressSpace::protect(GpuVirtualAddress va, uint64_t size, int prot) {
    if (size == 0) return;
    if (mprotect(reinterpret_cast<void*>(va.value()), size, prot) != 0) {
        throw SystemError(device_, fmt::format("mprotect {}+0x{:x}", va.hex(), size), errno);
    }
    if (!(prot & PROT_WRITE)) PageTable::instance().mark_read_only(va.value(), size);
}

}  // namespace baregpu::cpu
