#include "drivers/am/sram_staging.hpp"

#include "base/error.hpp"
#include "drivers/am/bridge_trigger.hpp"
#include "drivers/am/hcq_device.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace baregpu::am {

namespace {
constexpr uint64_t kSramBytes = 512 * 1024;  // the engine's 32 slots of 16 KB
constexpr uint64_t kTriggerBytes = 4;

const pci::LinkCapabilities::Window* sram_window(const pci::LinkCapabilities& link) {
    for (const auto& w : link.dma_windows) {
        if (w.size >= kSramBytes) return &w;
    }
    return nullptr;
}
}  // namespace

bool SramStaging::usable(AmHcqDevice& device) { return sram_window(device.chip().pci().link_capabilities()) != nullptr; }

SramStaging::SramStaging(AmHcqDevice& device, uint64_t va) : device_(device) {
    const pci::LinkCapabilities link = device.chip().pci().link_capabilities();
    const pci::LinkCapabilities::Window* sram = sram_window(link);
    if (sram == nullptr) throw UnsupportedError(device.name(), "no bridge SRAM of 512 KB on this link");
    sram_bus_ = sram->bus_address;
    sram_va_ = va;
    direct_read_bytes_ = sram->direct_read_bytes;
    // The GPU reaches both as uncached system memory (tinygrad ops_amd.py USBIface._dma_region).
    AmDevice& chip = device.chip();
    chip.map(sram_va_, sram_bus_, kSramBytes, MapFlags{.system = true, .uncached = true}, false);
    if (sram->read_trigger != 0) {
        const uint64_t trigger_page = sram->read_trigger & ~uint64_t{4095};
        trigger_va_ = va + kSramBytes + (sram->read_trigger - trigger_page) + kBridgeTriggerOffset;
        chip.map(va + kSramBytes, trigger_page, 4096, MapFlags{.system = true, .uncached = true}, false);
    }
    chip.flush_tlbs();
}

void SramStaging::copy_in(hcq::CopyQueue& queue, const hcq::Buffer& dst, std::span<const std::byte> src) {
    pci::PciDevice& pci = device_.chip().pci();
    hcq::Signal& timeline = device_.timeline();
    for (uint64_t off = 0; off < src.size(); off += kSramBytes) {
        const uint64_t len = std::min(kSramBytes, src.size() - off);
        device_.wait_signal_only(timeline, sram_free_at_);  // the queue finished reading the previous chunk
        pci.dma_window_write(BusAddress(sram_bus_), src.subspan(off, len));
        queue.reset();
        const uint64_t value = device_.next_timeline();
        queue.wait(timeline, value - 1)
            .copy(dst.address() + off, GpuVirtualAddress(sram_va_), len)
            .signal(timeline, value)
            .submit();
        sram_free_at_ = value;
    }
}

bool SramStaging::copy_out(hcq::CopyQueue& queue, std::span<std::byte> dst, const hcq::Buffer& src) {
    if (trigger_va_ == 0) return copy_out_direct(queue, dst, src);
    pci::PciDevice& pci = device_.chip().pci();
    hcq::Signal& timeline = device_.timeline();
    if (!trigger_src_) trigger_src_ = device_.memory().allocate(4096, {}, nullptr);
    for (uint64_t off = 0; off < dst.size(); off += kSramBytes) {
        const uint64_t len = std::min(kSramBytes, dst.size() - off);
        pci.dma_window_read_arm(BusAddress(sram_bus_), len);
        queue.reset();
        const uint64_t value = device_.next_timeline();
        queue.wait(timeline, value - 1)
            .copy(GpuVirtualAddress(sram_va_), src.address() + off, len)
            .copy(GpuVirtualAddress(trigger_va_), trigger_src_->address(), kTriggerBytes)
            .signal(timeline, value)
            .submit();
        sram_free_at_ = value;
        try {
            pci.dma_window_read(BusAddress(sram_bus_), dst.subspan(off, len));
        } catch (const TimeoutError& e) {
            device_.fail(fmt::format("copy-out: the bridge never released the SRAM read (the copy queue did not reach its CQ-window "
                                     "write): {}",
                                     e.what()));
            throw;
        }
    }
    return true;
}

bool SramStaging::copy_out_direct(hcq::CopyQueue& queue, std::span<std::byte> dst, const hcq::Buffer& src) {
    if (direct_read_bytes_ == 0) return false;  // the host cannot read this SRAM back
    pci::PciDevice& pci = device_.chip().pci();
    hcq::Signal& timeline = device_.timeline();
    for (uint64_t off = 0; off < dst.size(); off += direct_read_bytes_) {
        const uint64_t len = std::min(direct_read_bytes_, dst.size() - off);
        queue.reset();
        const uint64_t value = device_.next_timeline();
        queue.wait(timeline, value - 1).copy(GpuVirtualAddress(sram_va_), src.address() + off, len).signal(timeline, value).submit();
        sram_free_at_ = value;
        device_.wait_signal_only(timeline, value);
        pci.dma_window_read(BusAddress(sram_bus_), dst.subspan(off, len));
    }
    return true;
}

}  // namespace baregpu::am
