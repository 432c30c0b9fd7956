// Host memory as CPU-device memory. Each CPU device reserves a window of the process's address
// space (PROT_NONE, nothing committed) and hcq's VA manager places buffers in it; a buffer's
// device address is its host address. The process-wide PageTable records which ranges are
// mapped, and the command processors check every address a packet names against it: a packet
// that touches unmapped memory faults the device the way a GPU's MMU would.
#pragma once

#include "base/address.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <shared_mutex>
#include <string>

namespace baregpu::cpu {

// Every CPU device's mapped memory. All CPU devices are one peer group: they see each other's
// memory at the same addresses, so one table serves them all.
class PageTable {
public:
    static PageTable& instance();

    void map(uint64_t start, uint64_t size);
    // Also forgets the read-only marks inside the range.
    void unmap(uint64_t start, uint64_t size);
    // Host memory a CPU device did not allocate (hcq::Device::import_host_memory): mapped while any
    // import of exactly this range lives. False, and nothing mapped, when the range overlaps a
    // mapped range that is not an import of the same range (the caller copies instead).
    bool map_external(uint64_t start, uint64_t size);
    void unmap_external(uint64_t start, uint64_t size);
    // Mark part of a mapped range read-only (program code and constants): packets may read it,
    // a packet that writes it faults, as a write to a read-only GPU page does.
    void mark_read_only(uint64_t start, uint64_t size);

    // True when [start, start + size) is covered by mapped ranges (and, for a write, none of it
    // is read-only). On success, [*lo, *hi) is the single mapped range holding start and
    // *writable says whether all of it may be written (for callers that cache it).
    bool contains(uint64_t start, uint64_t size, bool write, uint64_t* lo = nullptr, uint64_t* hi = nullptr,
                  bool* writable = nullptr) const;
    // Bumped by every unmap and protection change: a cached range is valid while this is unchanged.
    uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }

private:
    // Whether [start, end) overlaps a read-only range. Under mutex_.
    bool read_only_overlap(uint64_t start, uint64_t end) const;

    mutable std::shared_mutex mutex_;
    std::map<uint64_t, uint64_t> ranges_;     // start -> end (exclusive)
    std::map<uint64_t, uint64_t> read_only_;  // start -> end (exclusive), inside ranges_
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> external_;  // start -> (end, imports), inside ranges_
    std::atomic<uint64_t> generation_{1};
};

// One cached page-table lookup; one per command processor.
class RangeCache {
public:
    bool contains(uint64_t start, uint64_t size, bool write) noexcept {
        uint64_t end = start + size;
        if (end >= start && start >= lo_ && end <= hi_ && (writable_ || !write) && generation_ == PageTable::instance().generation()) {
            return true;
        }
        uint64_t generation = PageTable::instance().generation();
        uint64_t lo = 0, hi = 0;
        bool writable = false;
        if (!PageTable::instance().contains(start, size, write, &lo, &hi, &writable)) return false;
        if (end <= hi) {
            lo_ = lo;
            hi_ = hi;
            writable_ = writable;
            generation_ = generation;
        }
        return true;
    }

private:
    uint64_t lo_ = 1, hi_ = 0, generation_ = 0;
    bool writable_ = false;
};

// A CPU device's reserved window.
class AddressSpace {
public:
    // Reserves `size` bytes (rounded up to 1 GiB) aligned to 1 GiB. Throws SystemError.
    AddressSpace(std::string device, uint64_t size);
    ~AddressSpace();
    AddressSpace(const AddressSpace&) = delete;
    AddressSpace& operator=(const AddressSpace&) = delete;

    GpuVirtualAddress base() const { return GpuVirtualAddress(reinterpret_cast<uintptr_t>(base_)); }
    uint64_t size() const { return size_; }

    // Commit read/write memory at va (inside the window, zero-filled) and record it in the
    // page table. Page sizes of 2 MiB and up ask for transparent huge pages.
    std::byte* map(GpuVirtualAddress va, uint64_t size, uint64_t page_size);
    // Release the pages and the page-table entry; the range becomes PROT_NONE again.
    void unmap(GpuVirtualAddress va, uint64_t size) noexcept;
    // mprotect, for program images (code read+execute, constants read-only); a range without
    // PROT_WRITE is marked read-only in the page table too. Throws SystemError.
    void protect(GpuVirtualAddress va, uint64_t size, int prot);

private:
    std::string device_;
    std::byte* base_ = nullptr;
    uint64_t size_ = 0;
};

}  // namespace baregpu::cpu
