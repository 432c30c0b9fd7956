// Copies between host memory and VRAM for links whose device-visible system memory is a few
// fixed windows the host reaches by transfer (LinkCapabilities::dma_windows: the ASM2464 bridge's
// SRAM). tinygrad ops_amd.py AMDAllocator._copyin (USB path): the host streams chunks into two SRAM windows, each ending in
// an in-band sentinel; SDMA0 polls for the sentinel (POLL_REGMEM), copies the window into VRAM and
// writes the chunk's sequence number to a fence in the small window the host reads. Copy-out
// (ops_amd.py _copyout) arms an SRAM read, lets SDMA copy into the SRAM and write the CQ window,
// which is what releases the bridge's bulk IN. No timing is assumed in either direction: the
// sentinel proves the data landed, the fence and the released read that the GPU finished with
// it. Uses SDMA0 queue 0, so it must not run beside the HCQ copy queue.
#pragma once

#include "drivers/am/am_device.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace baregpu::am {

struct SramCopyStats {
    uint64_t chunks = 0;
    uint64_t fence_polls = 0;  // fence reads beyond the one per chunk (the GPU had not drained yet)
};

class SramCopy {
public:
    // Takes `ring_paddr` .. +kRingBytes + 4 KiB of VRAM for its ring and pointers. Throws
    // UnsupportedError when the link has no DMA windows (a PCIe slot: use the HCQ copy queue).
    SramCopy(AmDevice& chip, uint64_t ring_paddr);
    ~SramCopy();
    SramCopy(const SramCopy&) = delete;
    SramCopy& operator=(const SramCopy&) = delete;

    static constexpr uint64_t kRingBytes = 64 * 1024;

    // VRAM physical addresses below vram_size().
    void copy_in(uint64_t vram_dst, std::span<const std::byte> data);
    void copy_out(uint64_t vram_src, std::span<std::byte> out);
    const SramCopyStats& stats() const { return stats_; }

private:
    void enable_sdma();
    void disable_sdma() noexcept;
    void submit(std::span<const uint32_t> packets);
    uint64_t read_fence();
    void check_vram(uint64_t address, uint64_t size, const char* what) const;
    void wait_fence(uint64_t at_least, const char* what, uint64_t chunk);

    AmDevice& chip_;
    pci::PciDevice& pci_;
    uint64_t ring_paddr_;
    uint64_t trigger_va() const;  // where SDMA writes to release a copy-out's read (the CQ window)

    pci::LinkCapabilities::Window sram_, small_, cq_;  // the bulk SRAM, the fence window, the CQ window
    uint64_t wptr_ = 0;  // bytes, monotonic
    uint64_t seq_ = 0;  // chunks sent, across calls: sentinels and fences never repeat
    SramCopyStats stats_;
    std::vector<std::byte> wire_[2];
};

}  // namespace baregpu::am
