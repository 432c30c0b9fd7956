#include "drivers/am/sram_copy.hpp"

#include "drivers/am/sdma_queue.hpp"

#include "base/error.hpp"
#include "drivers/am/bridge_trigger.hpp"
#include "drivers/am/dwords.hpp"
#include "drivers/am/page_table.hpp"
#include "drivers/am/registers.hpp"
#include "drivers/am/sdma_packets.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>
#include <cstring>

namespace baregpu::am {

namespace {

// tinygrad ops_amd.py USBIface._dma_region / AMDAllocator._copyin: the bridge SRAM as the GPU sees
// it. The host learns the windows from LinkCapabilities; these are only checked against what it says.
constexpr uint64_t kWindowBytes = 256 * 1024;  // two halves of the 512 KB SRAM: engine slots 0 and 16
constexpr uint64_t kFenceOffset = 0x800;  // in the first small window (sys_buf + 0x800)
constexpr uint32_t kSentinelTag = 0x51000000;  // | seq & 0xffffff, as tinygrad's copyin
constexpr uint64_t kSector = 512;
// GPU VAs: VRAM identity-offset from kVmStart, the SRAM windows 2 GiB above it (above any VRAM this
// driver supports a BAR for).
constexpr uint64_t kWindowVa = kVmStart + (uint64_t{2} << 30);
constexpr std::chrono::seconds kDrainTimeout{10};

uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

}  // namespace

SramCopy::SramCopy(AmDevice& chip, uint64_t ring_paddr) : chip_(chip), pci_(chip.pci()), ring_paddr_(ring_paddr) {
    const pci::LinkCapabilities link = pci_.link_capabilities();
    if (link.dma_windows.size() < 3 || link.dma_windows[0].size < 2 * kWindowBytes || link.dma_windows[1].size <= kFenceOffset + 8 ||
        link.dma_windows[0].read_trigger != link.dma_windows[2].bus_address) {
        throw UnsupportedError(pci_.name(), "SRAM copies need a link with DMA windows (a USB bridge's SRAM); this one has none");
    }
    sram_ = link.dma_windows[0];
    small_ = link.dma_windows[1];
    cq_ = link.dma_windows[2];
    const auto& sram = sram_;
    const auto& small = small_;
    // The GPU reaches the windows through its page tables as uncached system memory (tinygrad ops_amd.py USBIface._dma_region).
    chip_.map(kWindowVa, sram.bus_address, 2 * kWindowBytes, MapFlags{.system = true, .uncached = true}, false);
    chip_.map(kWindowVa + 2 * kWindowBytes, small.bus_address, small.size, MapFlags{.system = true, .uncached = true}, false);
    chip_.map(trigger_va() & ~uint64_t{4095}, cq_.bus_address, cq_.size, MapFlags{.system = true, .uncached = true}, false);
    // All of VRAM at kVmStart + its offset: the ring and every copy's source or destination,
    // in the fewest leaves (one 1 GiB page where sizes allow), so no copy writes page tables.
    if (ring_paddr_ + kRingBytes + 4096 > chip_.vram_size()) {
        throw Error(pci_.name(), fmt::format("SRAM copy ring at VRAM {:#x} is beyond VRAM ({:#x} bytes)", ring_paddr_, chip_.vram_size()));
    }
    chip_.map(kVmStart, 0, chip_.vram_size(), MapFlags{}, false);
    chip_.flush_tlbs();
    // Stale sentinels from an earlier owner must not match: both windows and the fence start zeroed.
    wire_[0].assign(kWindowBytes, std::byte{0});
    wire_[1].assign(kWindowBytes, std::byte{0});
    pci_.dma_window_write(BusAddress(sram.bus_address), wire_[0]);
    pci_.dma_window_write(BusAddress(sram.bus_address + kWindowBytes), wire_[1]);
    const std::byte zeros[8]{};
    pci_.dma_window_write(BusAddress(small.bus_address + kFenceOffset), zeros);
    enable_sdma();
}

SramCopy::~SramCopy() { disable_sdma(); }

void SramCopy::enable_sdma() {
    const uint64_t ring = kVmStart + ring_paddr_, rptr = ring + kRingBytes, wptr = rptr + 8;
    // The pointers start at 0 in VRAM (one 16-byte stream).
    const std::byte zeros[16]{};
    pci_.bar(0).write_block(BarOffset(ring_paddr_ + kRingBytes), zeros);
    sdma0_queue0_stop(chip_);  // a ring a previous owner left enabled
    sdma0_queue0_start(chip_, ring, kRingBytes, rptr, wptr);
}

void SramCopy::disable_sdma() noexcept { sdma0_queue0_stop(chip_); }

void SramCopy::submit(std::span<const uint32_t> packets) {
    const uint64_t bytes = packets.size() * 4;
    if (bytes > kRingBytes) {
        throw Error(pci_.name(), fmt::format("SRAM copy: {} bytes of SDMA packets do not fit the {} KiB ring", bytes, kRingBytes / 1024));
    }
    // A submit that does not fit before the ring's end is not split: the tail becomes NOPs (zero
    // dwords) and the whole submit starts at ring offset 0 (tinygrad ops_amd.py AMDCopyQueue._submit, USB).
    uint64_t offset = wptr_ % kRingBytes;
    if (offset + bytes > kRingBytes) {
        std::vector<std::byte> pad(kRingBytes - offset, std::byte{0});
        pci_.bar(0).write_block(BarOffset(ring_paddr_ + offset), pad);
        wptr_ += pad.size();
        offset = 0;
    }
    pci_.bar(0).write_block(BarOffset(ring_paddr_ + offset), std::as_bytes(packets));
    wptr_ += bytes;
    // The engine reads the write pointer from memory, then the doorbell says it moved.
    pci_.bar(0).write64(BarOffset(ring_paddr_ + kRingBytes + 8), wptr_);
    pci_.bar(2).write64(BarOffset(uint64_t{kDoorbellSdmaEngine0} * 8), wptr_);
}

uint64_t SramCopy::read_fence() {
    const auto& small = small_;
    uint64_t v = 0;
    pci_.dma_window_read(BusAddress(small.bus_address + kFenceOffset), std::as_writable_bytes(std::span(&v, 1)));
    return v;
}

void SramCopy::wait_fence(uint64_t at_least, const char* what, uint64_t chunk) {
    const auto deadline = pci_.now() + kDrainTimeout;
    uint64_t seen = read_fence();
    while (seen < at_least) {
        if (pci_.now() >= deadline) {
            throw TimeoutError(pci_.name(), fmt::format("GPU did not drain {} chunk {} in {} s: fence at sys_buf+{:#x} is {}, expected >= {} "
                                                        "(hung SDMA0?)",
                                                        what, chunk, kDrainTimeout.count(), kFenceOffset, seen, at_least));
        }
        ++stats_.fence_polls;
        seen = read_fence();
    }
}

void SramCopy::check_vram(uint64_t address, uint64_t size, const char* what) const {
    if (address > chip_.vram_size() || size > chip_.vram_size() - address) {
        throw Error(pci_.name(), fmt::format("{} of {} bytes at VRAM {:#x}: beyond VRAM ({:#x} bytes)", what, size, address, chip_.vram_size()));
    }
}

void SramCopy::copy_in(uint64_t vram_dst, std::span<const std::byte> data) {
    if (data.empty()) return;
    check_vram(vram_dst, data.size(), "copy-in");
    const auto& sram = sram_;
    const uint64_t payload = kWindowBytes - kSector;  // room for the sentinel's sector
    const uint64_t chunks = (data.size() + payload - 1) / payload;
    const uint64_t first = seq_ + 1;
    // 1. One submit for every chunk: wait for the sentinel, copy, write the fence.
    std::vector<uint32_t> ring(chunks * 24);
    sdma::SdmaWriter w(ring);
    for (uint64_t i = 0; i < chunks; ++i) {
        const uint64_t seq = first + i, size = std::min(payload, data.size() - i * payload);
        const uint64_t window = kWindowVa + (i % 2) * kWindowBytes;
        const uint64_t sentinel_at = window + round_up(size + 4, kSector) - 4;
        w.poll_regmem(sentinel_at, sdma::Compare::eq, kSentinelTag | (seq & 0xffffff));
        w.copy_linear(kVmStart + vram_dst + i * payload, window, size);
        const uint32_t fence[2] = {lo(seq), hi(seq)};
        w.write_linear(kWindowVa + 2 * kWindowBytes + kFenceOffset, fence);
    }
    submit(w.words());
    // 2. Per chunk: the window's previous occupant (seq - 2) must be drained before it is
    //    overwritten; then [payload][pad][sentinel] goes out asynchronously.
    std::array<uint64_t, 2> in_flight{};  // the asynchronous write into each window, 0 when none
    for (uint64_t i = 0; i < chunks; ++i) {
        const uint64_t seq = first + i, size = std::min(payload, data.size() - i * payload);
        // The window's previous transfer must have left the host (its staging buffer is reused),
        // and the GPU must have drained that chunk (seq - 2) before it is overwritten.
        pci_.dma_window_wait(std::exchange(in_flight[i % 2], 0));
        if (seq >= 3) wait_fence(seq - 2, "copy-in", i);
        std::vector<std::byte>& wire = wire_[i % 2];
        const uint64_t wire_bytes = round_up(size + 4, kSector);
        std::memcpy(wire.data(), data.data() + i * payload, size);
        std::memset(wire.data() + size, 0, wire_bytes - size);
        const uint32_t sentinel = kSentinelTag | (seq & 0xffffff);
        std::memcpy(wire.data() + wire_bytes - 4, &sentinel, 4);
        in_flight[i % 2] = pci_.dma_window_write_async(BusAddress(sram.bus_address + (i % 2) * kWindowBytes), std::span(wire.data(), wire_bytes));
        ++stats_.chunks;
    }
    for (uint64_t& t : in_flight) pci_.dma_window_wait(std::exchange(t, 0));
    seq_ = first + chunks - 1;
    // 3. Synchronous: the last fence proves every chunk reached VRAM.
    wait_fence(seq_, "copy-in", chunks - 1);
}

uint64_t SramCopy::trigger_va() const { return kWindowVa + 2 * kWindowBytes + small_.size + kBridgeTriggerOffset; }

void SramCopy::copy_out(uint64_t vram_src, std::span<std::byte> out) {
    if (out.empty()) return;
    check_vram(vram_src, out.size(), "copy-out");
    // tinygrad ops_amd.py AMDAllocator._copyout: per chunk, arm the engine for a read of the whole
    // SRAM from slot 0, have SDMA copy VRAM into it and then write the CQ window, which releases
    // the bulk IN (asm2464pd-firmware README.md, pcie/test_sram_verify.py). The bulk IN returning
    // is the proof that the GPU finished: no fence to poll, no host-written count in sys_buf.
    const uint64_t chunk_bytes = 2 * kWindowBytes;
    for (uint64_t off = 0; off < out.size(); off += chunk_bytes) {
        const uint64_t size = std::min(chunk_bytes, out.size() - off);
        pci_.dma_window_read_arm(BusAddress(sram_.bus_address), size);
        std::array<uint32_t, 16> packets{};
        sdma::SdmaWriter w(packets);
        w.copy_linear(kWindowVa, kVmStart + vram_src + off, size);
        const uint32_t cqe[1] = {0};
        w.write_linear(trigger_va(), cqe);
        submit(w.words());
        pci_.dma_window_read(BusAddress(sram_.bus_address), out.subspan(off, size));
        ++stats_.chunks;
    }
}

}  // namespace baregpu::am
