#include "drivers/am/shadow_memory.hpp"

#include "drivers/am/vram.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <stdexcept>
#include <utility>

namespace baregpu::am {

namespace {

// In memory only the host writes (rings, code), runs of changed words closer than this are
// published as one transfer: a transfer costs a USB round trip (~100 µs), far more than the few
// unchanged bytes it carries along. Elsewhere an unchanged word is never written: the host's copy
// of it may be older than what the GPU wrote there since (a signal next to the one the host set).
constexpr uint64_t kGapWords = 512;

uint64_t load(const std::byte* host, uint64_t word) {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<std::byte*>(host) + word * 8))
        .load(std::memory_order_acquire);
}

}  // namespace

ShadowMemory::~ShadowMemory() {
    for (auto& [va, r] : ranges_) std::free(r.host);
}

std::byte* ShadowMemory::add(GpuVirtualAddress va, uint64_t paddr, uint64_t size, bool uncached, bool marked) {
    const uint64_t bytes = (size + 4095) & ~uint64_t{4095};
    auto* host = static_cast<std::byte*>(std::aligned_alloc(4096, bytes));
    if (host == nullptr) throw std::bad_alloc();
    std::memset(host, 0, bytes);
    Range r;
    r.va = va;
    r.paddr = paddr;
    r.words = size / 8;
    r.uncached = uncached;
    r.marked = marked;
    r.host_writes_only = marked;
    r.order = marked ? 2 : uncached ? 1 : 0;
    r.host = host;
    try {
        std::lock_guard lock(mutex_);
        if (!marked) {
            // Device and host copy start equal (zero): an engine may read its control words before
            // the first doorbell publishes anything (a queue's write pointer at activation). A ring
            // is read only where a submission wrote it: zero-filling 1 MiB one TLP per dword would
            // cost over a quarter of a second of link time for nothing.
            r.snapshot.assign(r.words, 0);
            vram_.fill_zero(paddr, r.words * 8);
            ++stats_.publishes;
            stats_.bytes_published += r.words * 8;
        }
        by_host_[host] = va.value();
        ranges_[va.value()] = std::move(r);
    } catch (...) {
        std::free(host);
        throw;
    }
    return host;
}

void ShadowMemory::remove(GpuVirtualAddress va) noexcept {
    std::lock_guard lock(mutex_);
    auto it = ranges_.find(va.value());
    if (it == ranges_.end()) return;
    by_host_.erase(it->second.host);
    std::free(it->second.host);
    ranges_.erase(it);
}

void ShadowMemory::host_writes_only(GpuVirtualAddress va) {
    std::lock_guard lock(mutex_);
    auto it = ranges_.find(va.value());
    if (it == ranges_.end()) return;
    it->second.host_writes_only = true;
    it->second.order = std::max(it->second.order, 2);
}

void ShadowMemory::publish_last(GpuVirtualAddress va) {
    std::lock_guard lock(mutex_);
    auto it = ranges_.find(va.value());
    if (it != ranges_.end()) it->second.order = 3;
}

void ShadowMemory::written(GpuVirtualAddress va, uint64_t offset, uint64_t bytes) {
    if (bytes == 0) return;
    std::lock_guard lock(mutex_);
    auto it = ranges_.find(va.value());
    if (it == ranges_.end() || !it->second.marked) throw std::logic_error("ShadowMemory::written on a range that is not a marked one");
    Range& r = it->second;
    const uint64_t first = offset / 8, end = std::min(r.words, (offset + bytes + 7) / 8);
    if (first >= end) throw std::out_of_range("ShadowMemory::written past the range's end");
    r.dirty.emplace_back(first, end);
}

void ShadowMemory::publish_range(Range& r) {
    if (r.marked) {
        // What the owner wrote, as it is, in address order with overlaps merged.
        std::sort(r.dirty.begin(), r.dirty.end());
        for (size_t i = 0; i < r.dirty.size();) {
            uint64_t first = r.dirty[i].first, end = r.dirty[i].second;
            for (++i; i < r.dirty.size() && r.dirty[i].first <= end; ++i) end = std::max(end, r.dirty[i].second);
            vram_.write(r.paddr + first * 8, std::span(r.host + first * 8, (end - first) * 8));
            ++stats_.publishes;
            stats_.bytes_published += (end - first) * 8;
        }
        r.dirty.clear();
        return;
    }
    auto write = [&](uint64_t first, uint64_t count) {
        scratch_.resize(count);
        for (uint64_t i = 0; i < count; ++i) scratch_[i] = r.snapshot[first + i] = load(r.host, first + i);
        vram_.write(r.paddr + first * 8, std::as_bytes(std::span(scratch_.data(), count)));
        ++stats_.publishes;
        stats_.bytes_published += count * 8;
    };
    for (uint64_t i = 0; i < r.words;) {
        if (load(r.host, i) == r.snapshot[i]) {
            ++i;
            continue;
        }
        // A run of changed words, extended over short unchanged gaps.
        const uint64_t gap = r.host_writes_only ? kGapWords : 1;
        uint64_t end = i + 1, last_changed = i;
        while (end < r.words && end - last_changed <= gap) {
            if (load(r.host, end) != r.snapshot[end]) last_changed = end;
            ++end;
        }
        write(i, last_changed + 1 - i);
        i = last_changed + 1;
    }
}

void ShadowMemory::publish() {
    std::lock_guard lock(mutex_);
    // Data first, then signals: a queue that waits for a signal the host sets after writing data
    // finds the data once it sees the signal. Commands before the write pointers: an engine that
    // polls its write pointer in memory (not only the doorbell) must not run ahead of its ring.
    for (int order = 0; order <= 3; ++order) {
        for (auto& [va, r] : ranges_) {
            if (r.order == order) publish_range(r);
        }
    }
}

bool ShadowMemory::refresh_words(Range& r, uint64_t first, uint64_t count) {
    if (count == 0) return false;
    scratch_.resize(count);
    vram_.read(r.paddr + first * 8, std::as_writable_bytes(std::span(scratch_.data(), count)));
    ++stats_.refreshes;
    stats_.bytes_refreshed += count * 8;
    bool changed = false;
    for (uint64_t i = 0; i < count; ++i) {
        const uint64_t w = first + i, device = scratch_[i];
        if (device == r.snapshot[w]) continue;
        // The host's copy follows the device unless the host changed the word since the last
        // synchronization (then the host's value wins and is published next).
        uint64_t expected = r.snapshot[w];
        if (std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(r.host + w * 8))
                .compare_exchange_strong(expected, device, std::memory_order_acq_rel)) {
            changed = true;
        }
        r.snapshot[w] = device;
    }
    return changed;
}

bool ShadowMemory::refresh_host(const void* host, uint64_t bytes) {
    const auto* p = static_cast<const std::byte*>(host);
    std::lock_guard lock(mutex_);
    auto it = by_host_.upper_bound(p);
    if (it == by_host_.begin()) return false;
    --it;
    Range& r = ranges_.at(it->second);
    const uint64_t offset = static_cast<uint64_t>(p - r.host);
    if (offset >= r.words * 8 || r.marked) return false;  // a ring: the device never writes it
    const uint64_t first = offset / 8;
    const uint64_t last = std::min(r.words, (offset + bytes + 7) / 8);
    return refresh_words(r, first, last - first);
}

void ShadowMemory::refresh_all() {
    std::lock_guard lock(mutex_);
    // Uncached memory (signals) first: data read after a signal is at least as new as it.
    for (bool uncached : {true, false}) {
        for (auto& [va, r] : ranges_) {
            if (r.uncached == uncached && !r.host_writes_only) refresh_words(r, 0, r.words);
        }
    }
}

ShadowMemory::Stats ShadowMemory::stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

}  // namespace baregpu::am
