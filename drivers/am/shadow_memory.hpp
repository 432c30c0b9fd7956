// Host-visible memory over a link that cannot map device memory for the CPU (the USB bridge,
// drivers/usb): every CPU-mapped HCQ allocation (signals, staging, host / cpu_access buffers,
// rings) is VRAM the GPU uses plus a copy in ordinary host RAM (the shadow) that HCQ's pointers
// point at. The two are synchronized explicitly, at points AmHcqDevice knows (hcq/README.md,
// "Backends without CPU-mappable device memory"):
//   publish()        before a doorbell and after a host signal write: what the host changed since
//                    the last publish goes to VRAM, in an order a reader can rely on: data,
//                    uncached memory (signals, bound commands), rings and code, and last the
//                    write pointers engines poll;
//   refresh_host()   a few words the host polls (a signal slot, a ring's fence) come back;
//   refresh_all()    once the host saw the device progress: every allocation the GPU may write
//                    comes back (uncached first, so data is never older than the signal that
//                    announced it).
// What the host changed is found by comparing the shadow with a snapshot of what VRAM held at the
// last synchronization (8-byte words), so GPU writes to words the host did not touch are never
// overwritten, and a refresh keeps words the host changed since (they are published next). A ring
// is the exception (add's `marked`): its owner says which bytes it wrote (written()), and only
// those are published, as they are, zeros included; it is neither zero-filled nor diffed, since
// an engine reads only the part of its ring a submission wrote.
// Every transfer goes through the chip's VRAM accessor (BAR0 TLPs over the link): nothing here
// reaches device memory any other way.
#pragma once

#include "base/address.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace baregpu::am {

class Vram;

class ShadowMemory {
public:
    explicit ShadowMemory(Vram& vram) : vram_(vram) {}
    ShadowMemory(const ShadowMemory&) = delete;
    ShadowMemory& operator=(const ShadowMemory&) = delete;
    ~ShadowMemory();

    // Shadow `size` bytes (a multiple of 8) of VRAM at FB offset `paddr`, mapped at `va`. Returns
    // the host copy (4 KiB aligned); both copies start zeroed. marked: a ring (host writes only,
    // published from written()); its VRAM is left as it is and the host copy starts zeroed.
    std::byte* add(GpuVirtualAddress va, uint64_t paddr, uint64_t size, bool uncached, bool marked = false);
    void remove(GpuVirtualAddress va) noexcept;
    // Memory the GPU only reads (rings, code): published, never refreshed.
    void host_writes_only(GpuVirtualAddress va);
    // Memory that tells an engine to look (a ring's write pointer, which engines also poll):
    // published after everything else.
    void publish_last(GpuVirtualAddress va);

    // A marked range's owner wrote [offset, offset + bytes) of it: published as it is next time.
    void written(GpuVirtualAddress va, uint64_t offset, uint64_t bytes);

    void publish();
    // Refresh the shadow words covering [host, host + bytes); returns true when any changed.
    bool refresh_host(const void* host, uint64_t bytes);
    void refresh_all();

    struct Stats {
        uint64_t publishes = 0, bytes_published = 0, refreshes = 0, bytes_refreshed = 0;
    };
    Stats stats() const;

private:
    struct Range {
        GpuVirtualAddress va;
        uint64_t paddr = 0;
        uint64_t words = 0;
        bool uncached = false;
        bool host_writes_only = false;
        bool marked = false;  // published from `dirty`, not by diffing (a ring)
        int order = 0;  // publish() order: 0 data, 1 uncached, 2 host writes only, 3 last
        std::byte* host = nullptr;
        std::vector<uint64_t> snapshot;  // what VRAM held at the last synchronization (not for marked)
        std::vector<std::pair<uint64_t, uint64_t>> dirty;  // marked: word ranges [first, end) written since
    };
    void publish_range(Range& r);
    // Reads words [first, first + count) of r from VRAM and merges them; true when a word changed.
    bool refresh_words(Range& r, uint64_t first, uint64_t count);

    Vram& vram_;
    mutable std::mutex mutex_;
    std::map<uint64_t, Range> ranges_;               // by VA
    std::map<const std::byte*, uint64_t> by_host_;  // host copy -> VA
    std::vector<uint64_t> scratch_;
    Stats stats_;
};

}  // namespace baregpu::am
