// HCQ's copy_in / copy_out over a link whose only device-visible system memory is a bridge's SRAM
// (pci::LinkCapabilities::dma_windows: the ASM2464's 512 KB; copy_out needs the window's
// read_trigger, which the custom firmware has and the stock firmware does not). tinygrad
// ops_amd.py AMDAllocator._copyin / _copyout (USB): the host moves data with the SRAM engine's bulk
// transfers ("700 MB/s", asm2464pd-firmware README.md) and the HCQ copy queue moves it between the
// SRAM and VRAM, instead of staging through CPU-mapped VRAM that the host could reach only through
// BAR streams (one TLP per dword, "3.6 MB/s write, 1.8 MB/s read").
//   copy_in:  per 512 KB chunk (the whole SRAM, one arm and one bulk OUT), once the copy queue has
//             drained the previous chunk (its timeline value), then copy SRAM -> VRAM on the queue.
//             One submission per 512 KB: a submission costs about as much link time as 256 KB of
//             data (ring words one TLP per dword, the write pointer, the HDP flush, the doorbell:
//             each a USB round trip), so two 256 KB halves in flight (tinygrad's shape) lose more
//             to the second submission than they gain by overlapping the GPU's copy.
//   copy_out: per 512 KB chunk, arm the SRAM read, copy VRAM -> SRAM and then write the CQ window
//             (the read's trigger) on the queue, then take the data: the bulk IN returns only
//             after the trigger, so the data is complete when it does. Without the trigger (the
//             stock firmware): 4 KB at a time through the SRAM's XDATA alias.
#pragma once

#include "hcq/memory.hpp"
#include "hcq/queue.hpp"

#include <cstdint>
#include <optional>
#include <span>

namespace baregpu::am {

class AmHcqDevice;

class SramStaging {
public:
    // The GPU VA range [va, va + kVaBytes) must be free; the windows are mapped there.
    SramStaging(AmHcqDevice& device, uint64_t va);
    static constexpr uint64_t kVaBytes = 2ull << 20;

    // Whether `device`'s link has such an SRAM window.
    static bool usable(AmHcqDevice& device);

    // Under the device's submission mutex (hcq::Device::copy_in_through_link's contract).
    void copy_in(hcq::CopyQueue& queue, const hcq::Buffer& dst, std::span<const std::byte> src);
    // false (nothing done) where the host cannot read the SRAM back: the caller copies another way.
    bool copy_out(hcq::CopyQueue& queue, std::span<std::byte> dst, const hcq::Buffer& src);

private:
    // Without a read trigger (the stock firmware): per chunk of the directly readable bytes (4 KB
    // through XDATA), copy VRAM -> SRAM on the queue, wait for it, read the chunk.
    bool copy_out_direct(hcq::CopyQueue& queue, std::span<std::byte> dst, const hcq::Buffer& src);
    uint64_t direct_read_bytes_ = 0;
    AmHcqDevice& device_;
    uint64_t sram_bus_ = 0, sram_va_ = 0, trigger_va_ = 0;
    std::optional<hcq::Buffer> trigger_src_;  // what the queue copies into the CQ window (contents do not matter)
    uint64_t sram_free_at_ = 0;  // timeline value after which the SRAM may be overwritten
};

}  // namespace baregpu::am
