#include "drivers/pci/usb_pci_device.hpp"

#include "base/error.hpp"
#include "drivers/pci/resizable_bar.hpp"
#include "drivers/usb/asm24_protocol.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

namespace baregpu::pci {

namespace {

// Type-1 header registers (Linux include/uapi/linux/pci_regs.h).
constexpr uint16_t kPrimaryBus = 0x18, kMemoryBase = 0x20, kMemoryLimit = 0x22, kPrefMemoryBase = 0x24, kPrefMemoryLimit = 0x26,
                   kPrefBaseUpper32 = 0x28, kPrefLimitUpper32 = 0x2c;
constexpr uint64_t kBarAlign = 2ull << 20;  // tinygrad advances each BAR by round_up(size, 2 MB)
constexpr size_t kMaxBatch = 64 * 1024;  // one stream write carries at most this much
constexpr size_t kMaxStream = 1 << 20;  // block reads/writes are split into streams of 1 MiB

uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

class UsbPciDevice;

class UsbBarHandler final : public MmioHandler {
public:
    UsbBarHandler(UsbPciDevice& device, unsigned bar) : device_(device), bar_(bar) {}
    uint64_t mmio_read(uint64_t offset, unsigned width) override;
    void mmio_write(uint64_t offset, unsigned width, uint64_t value) override;
    void mmio_read_block(uint64_t offset, std::span<std::byte> out) override;
    void mmio_write_block(uint64_t offset, std::span<const std::byte> data) override;

private:
    UsbPciDevice& device_;
    unsigned bar_;
};

class UsbPciDevice final : public PciDevice {
public:
    UsbPciDevice(std::unique_ptr<usb::UsbBackend> usb, const UsbOpenOptions& options)
        : PciDevice(usb->name(), PciAddress{0, kUsbGpuBus, 0, 0}), bridge_(usb::open_bridge(std::move(usb))) {
        for (unsigned b : options.write_once_bars) {
            if (b < kBarCount) write_once_[b] = true;
        }
        set_warning("behind a USB bridge: every register access is a USB round trip, no interrupts, DMA only into 512 KB of bridge SRAM");
        bring_up();
    }

    ~UsbPciDevice() override {
        try {
            flush();
        } catch (const Error&) {
            // The bridge is gone or refuses: nothing more can be written, and a destructor must not throw.
        }
    }

    std::string_view backend() const override { return "usb"; }
    std::optional<std::string> peer_refusal(PciDevice& owner) override {
        return fmt::format("no peer access: {} sits behind a USB bridge, which forwards only its own transfers (DMA into the bridge's "
                           "SRAM); peer-to-peer DMA with {} needs both devices on PCIe", name(), owner.name());
    }
    uint16_t config_size() const override { return cfg::kConfigSizeExtended; }

    uint32_t config_read(uint16_t offset, unsigned width) override {
        check_config_access(offset, width);
        std::lock_guard lock(mutex_);
        flush_locked();
        return bridge_->config_read(kUsbGpuBus, 0, 0, offset, width);
    }
    void config_write(uint16_t offset, unsigned width, uint32_t value) override {
        check_config_access(offset, width);
        std::lock_guard lock(mutex_);
        flush_locked();
        forget_written();
        bridge_->config_write(kUsbGpuBus, 0, 0, offset, width, value);
    }

    std::unique_ptr<DmaBuffer> alloc_dma(uint64_t size, PageSize) override {
        throw UnsupportedError(name(), fmt::format("alloc_dma({} bytes): a GPU behind the USB bridge can DMA only into the bridge's SRAM "
                                                   "(512 KB at bus {:#x}, 4 KB at {:#x} and {:#x}), which the host cannot map; place "
                                                   "host-visible memory in VRAM (link_capabilities().host_dma is false)",
                                                   size, usb::asm24::kGpuSram, usb::asm24::kGpuSysBuf, usb::asm24::kGpuCqBuf));
    }
    void enable_interrupts(InterruptKind, unsigned) override {
        throw UnsupportedError(name(), "no interrupt path over the USB bridge (MSI writes are not forwarded to the host): poll");
    }
    void disable_interrupts() override {}
    void reset_function() override {
        throw UnsupportedError(name(), "function-level reset over the USB bridge is not implemented; use the GPU's own reset (mode1)");
    }
    void delay(std::chrono::nanoseconds duration) override {
        std::lock_guard lock(mutex_);
        flush_locked();
        bridge_->usb().sleep(duration);
    }
    std::chrono::nanoseconds now() override { return bridge_->usb().now(); }

    LinkCapabilities link_capabilities() const override {
        LinkCapabilities c;
        c.bar_mmap = false;
        c.host_dma = false;
        c.interrupts = false;
        c.host_dma_bytes = usb::asm24::kSramBytes + 2 * usb::asm24::kSmallWindowBytes;
        c.register_round_trip = true;
        // The SRAM behind the bulk engine (custom firmware: 16 KB slots, read back after a device
        // write to the CQ window; stock firmware: WRITE(16) sectors, no read) and the two 4 KB
        // windows the host reaches byte-wise through XDATA.
        const usb::SramAccess sram = bridge_->sram_access();
        c.dma_windows = {{usb::asm24::kGpuSram, usb::asm24::kSramBytes, sram.write_alignment, sram.readable ? usb::asm24::kGpuCqBuf : 0,
                          sram.readable ? 0 : sram.xdata_alias},
                         {usb::asm24::kGpuSysBuf, usb::asm24::kSmallWindowBytes, 1},
                         {usb::asm24::kGpuCqBuf, usb::asm24::kSmallWindowBytes, 1}};
        return c;
    }

    // The SRAM window through the bulk engine (whole 512-byte sectors: the pad after `data` up to
    // the next sector boundary is zeroed), the small windows through XDATA.
    void dma_window_write(BusAddress address, std::span<const std::byte> data) override {
        std::lock_guard lock(mutex_);
        flush_locked();
        forget_written();
        const Window w = window_of(address.value(), data.size(), "dma_window_write");
        if (w.xdata == 0) {
            bridge_->sram_write(w.offset, data);
        } else {
            bridge_->xdata_write(static_cast<uint16_t>(w.xdata + w.offset), data);
        }
    }
    // The SRAM window asynchronously when `data` is whole 512-byte sectors (no pad to stage):
    // the arm now, the bulk OUT in flight until dma_window_wait.
    uint64_t dma_window_write_async(BusAddress address, std::span<const std::byte> data) override {
        {
            std::lock_guard lock(mutex_);
            const Window w = window_of(address.value(), data.size(), "dma_window_write_async");
            if (w.xdata == 0 && !data.empty() && data.size() % usb::asm24::kSectorBytes == 0) {
                flush_locked();
                forget_written();
                // libusb's buffer is not const; an OUT transfer only reads it.
                return bridge_->sram_write_async(w.offset, std::span(const_cast<std::byte*>(data.data()), data.size()));
            }
        }
        dma_window_write(address, data);
        return 0;
    }
    void dma_window_wait(uint64_t token) override {
        if (token == 0) return;
        std::lock_guard lock(mutex_);
        bridge_->reap(token);
    }

    void dma_window_read_arm(BusAddress address, uint64_t bytes) override {
        std::lock_guard lock(mutex_);
        flush_locked();
        const Window w = window_of(address.value(), bytes, "dma_window_read_arm");
        if (w.xdata != 0) return;  // XDATA windows read directly
        if (!bridge_->sram_access().readable) return;  // read directly through the XDATA alias, if at all (dma_window_read)
        bridge_->sram_read_arm(w.offset, bytes);
        armed_read_ = {address.value(), bytes};
    }

    void dma_window_read(BusAddress address, std::span<std::byte> out) override {
        std::lock_guard lock(mutex_);
        flush_locked();
        const Window w = window_of(address.value(), out.size(), "dma_window_read");
        if (w.xdata == 0 && !bridge_->sram_access().readable) {
            // No read engine (the stock firmware): the first bytes of the SRAM through their XDATA alias.
            const uint64_t alias = bridge_->sram_access().xdata_alias;
            if (w.offset + out.size() > alias) {
                throw UnsupportedError(name(), fmt::format("dma_window_read of {} bytes at {:#x}: through the {} the host reads only the "
                                                           "SRAM's first {} bytes (XDATA {:#06x})",
                                                           out.size(), address.value(), bridge_->firmware(), alias,
                                                           usb::asm24::kXdataBulkWindow));
            }
            bridge_->xdata_read(static_cast<uint16_t>(usb::asm24::kXdataBulkWindow + w.offset), out);
        } else if (w.xdata == 0) {
            // The SRAM engine releases a read only after the device wrote the CQ window
            // (asm2464pd-firmware README.md): without the arm and the trigger this would wait
            // out the bulk IN timeout.
            if (!armed_read_ || armed_read_->first != address.value() || armed_read_->second != out.size()) {
                throw Error(name(), fmt::format("dma_window_read of {} bytes at {:#x}: an SRAM read needs dma_window_read_arm of the "
                                                "same range, then a device write to {:#x}",
                                                out.size(), address.value(), usb::asm24::kGpuCqBuf));
            }
            armed_read_.reset();
            bridge_->sram_read_data(out);
        } else {
            bridge_->xdata_read(static_cast<uint16_t>(w.xdata + w.offset), out);
        }
    }

    // ---- BAR access, called by UsbBarHandler ----
    uint64_t bar_read(unsigned bar, uint64_t offset, unsigned width) {
        std::lock_guard lock(mutex_);
        flush_locked();
        const uint64_t address = bar_info(bar).bus_base + offset;
        if (width >= 4) {
            uint64_t v = 0;
            bridge_->mem_read(address, std::span(reinterpret_cast<std::byte*>(&v), width));
            return v;
        }
        // Sub-dword: one non-posted MRd with byte enables.
        const unsigned lane = static_cast<unsigned>(address & 3);
        usb::tlp::Request r{usb::tlp::kMRd64, usb::tlp::byte_enables(width, lane), usb::tlp::Mode::Single, address & ~uint64_t{3}, 0};
        return (bridge_->single_tlp(r) >> (8 * lane)) & ((1u << (8 * width)) - 1);
    }

    void bar_write(unsigned bar, uint64_t offset, unsigned width, uint64_t value) {
        std::lock_guard lock(mutex_);
        const uint64_t address = bar_info(bar).bus_base + offset;
        if (write_once_[bar]) {
            auto [it, fresh] = last_written_.try_emplace(address, value);
            if (!fresh && it->second == value) {
                ++coalesced_;
                return;
            }
            it->second = value;
        } else {
            forget_written();
        }
        if (width < 4) {
            flush_locked();
            const unsigned lane = static_cast<unsigned>(address & 3);
            usb::tlp::Request r{usb::tlp::kMWr64, usb::tlp::byte_enables(width, lane), usb::tlp::Mode::Single, address & ~uint64_t{3},
                                static_cast<uint32_t>(value << (8 * lane))};
            bridge_->single_tlp(r);
            return;
        }
        std::byte bytes[8];
        std::memcpy(bytes, &value, 8);
        // Prefetchable memory may have writes merged (PCI Local Bus 3.0, 6.2.5.1): batch adjacent
        // dword writes into one stream. A 64-bit write goes as its own stream; the firmware still
        // sends it as two dword TLPs, low dword first (asm2464pd-firmware pcie_pio.h): no
        // register sees a single 64-bit access over this bridge.
        if (bar_info(bar).prefetchable && width == 4 && !write_once_[bar]) {
            if (!batch_.empty() && batch_address_ + batch_.size() == address && batch_.size() + 4 <= kMaxBatch) {
                batch_.insert(batch_.end(), bytes, bytes + 4);
                return;
            }
            flush_locked();
            batch_address_ = address;
            batch_.assign(bytes, bytes + 4);
            return;
        }
        flush_locked();
        if (width == 4) {
            write_dword_locked(address, static_cast<uint32_t>(value));
            return;
        }
        bridge_->mem_write(address, std::span<const std::byte>(bytes, width));
    }

    // One posted mode-0 TLP carrying its dword (0xF0 OUT, usb.py pcie_request): one control
    // transfer, where a stream of one dword is two (the arm and the bulk OUT).
    void write_dword_locked(uint64_t address, uint32_t value) {
        bridge_->single_tlp(usb::tlp::Request{usb::tlp::kMWr64, 0x0f, usb::tlp::Mode::Single, address, value});
    }

    void bar_read_block(unsigned bar, uint64_t offset, std::span<std::byte> out) {
        std::lock_guard lock(mutex_);
        flush_locked();
        const uint64_t address = bar_info(bar).bus_base + offset;
        if (address % 4 != 0 || out.size() % 4 != 0) {
            for (size_t i = 0; i < out.size(); ++i) {
                const uint64_t at = address + i;
                usb::tlp::Request r{usb::tlp::kMRd64, usb::tlp::byte_enables(1, at & 3), usb::tlp::Mode::Single, at & ~uint64_t{3}, 0};
                out[i] = std::byte(bridge_->single_tlp(r) >> (8 * (at & 3)));
            }
            return;
        }
        for (size_t done = 0; done < out.size(); done += kMaxStream) {
            bridge_->mem_read(address + done, out.subspan(done, std::min(kMaxStream, out.size() - done)));
        }
    }

    void bar_write_block(unsigned bar, uint64_t offset, std::span<const std::byte> data) {
        std::lock_guard lock(mutex_);
        flush_locked();
        if (!write_once_[bar]) forget_written();
        else last_written_.clear();  // a block write to a write-once BAR is not tracked: forget it all
        const uint64_t address = bar_info(bar).bus_base + offset;
        size_t head = 0;
        // Unaligned edges byte by byte (single TLPs with byte enables), the middle as streams.
        while (head < data.size() && (address + head) % 4 != 0) write_byte(address + head, data[head]), ++head;
        size_t tail = data.size();
        while (tail > head && (tail - head) % 4 != 0) --tail;
        for (size_t done = head; done < tail; done += kMaxStream) {
            bridge_->mem_write(address + done, data.subspan(done, std::min(kMaxStream, tail - done)));
        }
        for (size_t i = tail; i < data.size(); ++i) write_byte(address + i, data[i]);
    }

    void flush() {
        std::lock_guard lock(mutex_);
        flush_locked();
    }

    const usb::TransferCounters& counters() const { return bridge_->counters(); }
    std::string firmware() const { return bridge_->firmware(); }
    uint64_t coalesced() const { return coalesced_; }

protected:
    MmioRegion map_bar(unsigned index) override {
        handlers_[index] = std::make_unique<UsbBarHandler>(*this, index);
        return MmioRegion(fmt::format("{} BAR{}", name(), index), handlers_[index].get(), bar_info(index).size);
    }

private:
    struct Window {
        uint16_t xdata;  // 0: the SRAM engine
        uint64_t offset;
    };
    Window window_of(uint64_t bus, uint64_t size, const char* what) const {
        namespace a24 = usb::asm24;
        auto inside = [&](uint64_t base, uint64_t bytes) { return bus >= base && bus - base < bytes && size <= bytes - (bus - base); };
        if (inside(a24::kGpuSram, a24::kSramBytes)) {
            const uint64_t offset = bus - a24::kGpuSram;
            const uint64_t align = bridge_->sram_access().write_alignment;
            if (offset % align != 0) {
                throw Error(name(), fmt::format("{} at {:#x}: the SRAM is reached in {} through the {} ({:#x} + n * {:#x})", what, bus,
                                                align == a24::kSramSlotBytes ? "16 KB slots" : fmt::format("{}-byte units", align),
                                                bridge_->firmware(), a24::kGpuSram, align));
            }
            return {0, offset};
        }
        if (inside(a24::kGpuSysBuf, a24::kSmallWindowBytes)) return {a24::kXdataSysBuf, bus - a24::kGpuSysBuf};
        if (inside(a24::kGpuCqBuf, a24::kSmallWindowBytes)) return {a24::kXdataCqBuf, bus - a24::kGpuCqBuf};
        throw Error(name(), fmt::format("{} of {} bytes at {:#x}: outside the bridge's DMA windows (512 KB at {:#x}, 4 KB at {:#x} and {:#x})",
                                        what, size, bus, a24::kGpuSram, a24::kGpuSysBuf, a24::kGpuCqBuf));
    }

    void write_byte(uint64_t at, std::byte b) {
        usb::tlp::Request r{usb::tlp::kMWr64, usb::tlp::byte_enables(1, at & 3), usb::tlp::Mode::Single, at & ~uint64_t{3},
                            static_cast<uint32_t>(b) << (8 * (at & 3))};
        bridge_->single_tlp(r);
    }

    // A repeated write is skipped only when nothing else was written since: any other write may be
    // new work (a ring, a reset) that the repeated doorbell value must announce again.
    void forget_written() {
        if (!last_written_.empty()) last_written_.clear();
    }

    void flush_locked() {
        if (batch_.empty()) return;
        std::vector<std::byte> data = std::move(batch_);
        batch_.clear();
        if (data.size() == 4) {
            uint32_t v;
            std::memcpy(&v, data.data(), 4);
            write_dword_locked(batch_address_, v);
            return;
        }
        bridge_->mem_write(batch_address_, data);
    }

    // Link up, bridges, resizable BARs, BAR placement: tinygrad's USBPCIDevice and pci_setup_usb_bars order.
    void bring_up() {
        bridge_->bring_link_up();
        // Each bridge on buses 0..3: bus numbers in one dword (primary | secondary << 8 |
        // subordinate << 16: "All 3 values must be written at the same time"), the memory windows
        // open from the BAR bases to the top, then I/O, memory and bus master on.
        for (uint8_t bus = 0; bus < kUsbGpuBus; ++bus) {
            bridge_->config_write(bus, 0, 0, kPrimaryBus, 4, uint32_t{bus} | uint32_t(bus + 1) << 8 | uint32_t{kUsbGpuBus} << 16);
            bridge_->config_write(bus, 0, 0, kMemoryBase, 2, static_cast<uint32_t>(kUsbMemBase >> 16) & 0xfff0);
            bridge_->config_write(bus, 0, 0, kMemoryLimit, 2, 0xffff);
            bridge_->config_write(bus, 0, 0, kPrefMemoryBase, 2, static_cast<uint32_t>(kUsbPrefMemBase >> 16) & 0xfff0);
            bridge_->config_write(bus, 0, 0, kPrefMemoryLimit, 2, 0xffff);
            bridge_->config_write(bus, 0, 0, kPrefBaseUpper32, 4, static_cast<uint32_t>(kUsbPrefMemBase >> 32));
            bridge_->config_write(bus, 0, 0, kPrefLimitUpper32, 4, 0xffffffff);
            bridge_->config_write(bus, 0, 0, cfg::kCommand, 2, cfg::kCommandIo | cfg::kCommandMemory | cfg::kCommandMaster);
        }
        uint32_t id = 0xffffffff;
        try {
            id = config_read32(cfg::kVendorId);
        } catch (const ProtocolError&) {
            // Unsupported Request: nothing answers at 04:00.0 (an empty slot), reported below.
        }
        if (id == 0xffffffff || id == 0) {
            throw DeviceLostError(name(), fmt::format("no function at {:02x}:00.0 behind the bridge (vendor/device reads {:#010x} or "
                                                      "Unsupported Request): is a GPU in the enclosure's slot and powered?",
                                                      kUsbGpuBus, id));
        }
        grow_resizable_bars();
        assign_bars();
        // Memory decode on, bus mastering off: the driver turns it on (as VFIO hands a device over).
        config_write16(cfg::kCommand, cfg::kCommandMemory);
    }

    // Every resizable BAR to its largest supported size (Resizable BAR, PCIe Base Spec 4.0 7.8.6).
    void grow_resizable_bars() {
        const std::optional<uint16_t> cap = find_extended_capability(cfg::kExtCapResizableBar);
        if (!cap) return;
        for (const ResizableBar& rb : read_resizable_bars(*this)) {
            if (rb.supported_sizes.empty()) continue;
            const uint64_t largest = rb.supported_sizes.back();
            unsigned log2_mb = 0;
            while ((uint64_t{1} << (20 + log2_mb)) < largest) ++log2_mb;
            for (unsigned e = 0; e < kBarCount; ++e) {
                const uint16_t ctrl = static_cast<uint16_t>(*cap + rebar::kControl + e * rebar::kEntryStride);
                const uint32_t v = config_read32(ctrl);
                if ((v & rebar::kCtrlBarIndexMask) != rb.bar) continue;
                config_write32(ctrl, (v & ~rebar::kCtrlBarSizeMask) | (log2_mb << rebar::kCtrlBarSizeShift));
                break;
            }
        }
    }

    // Size, then place prefetchable BARs from 32 GB and the rest from 256 MB (pci_setup_usb_bars).
    void assign_bars() {
        std::array<BarInfo, kBarCount> bars = size_bars(*this);
        uint64_t next_mem = kUsbMemBase, next_pref = kUsbPrefMemBase;
        for (BarInfo& b : bars) {
            if (!b.is_memory()) continue;
            uint64_t& next = b.prefetchable ? next_pref : next_mem;
            next = round_up(next, b.size);  // a BAR is naturally aligned to its size
            if (!b.is_64bit() && next + b.size > (uint64_t{1} << 32)) {
                throw UnsupportedError(name(), fmt::format("{} does not fit below 4 GB at {:#x}", b.describe(), next));
            }
            b.bus_base = next;
            const uint16_t reg = static_cast<uint16_t>(cfg::kBar0 + 4 * b.index);
            config_write32(reg, static_cast<uint32_t>(next));
            if (b.is_64bit()) config_write32(static_cast<uint16_t>(reg + 4), static_cast<uint32_t>(next >> 32));
            next += round_up(b.size, kBarAlign);
        }
        set_bar_infos(bars);
    }

    std::unique_ptr<usb::Bridge> bridge_;
    std::mutex mutex_;  // the controller, the write batch, the write cache
    std::array<std::unique_ptr<UsbBarHandler>, kBarCount> handlers_;
    std::array<bool, kBarCount> write_once_{};
    std::map<uint64_t, uint64_t> last_written_;
    uint64_t coalesced_ = 0;
    std::vector<std::byte> batch_;
    uint64_t batch_address_ = 0;
    std::optional<std::pair<uint64_t, uint64_t>> armed_read_;  // the SRAM read armed (bus address, bytes)
};

uint64_t UsbBarHandler::mmio_read(uint64_t offset, unsigned width) { return device_.bar_read(bar_, offset, width); }
void UsbBarHandler::mmio_write(uint64_t offset, unsigned width, uint64_t value) { device_.bar_write(bar_, offset, width, value); }
void UsbBarHandler::mmio_read_block(uint64_t offset, std::span<std::byte> out) { device_.bar_read_block(bar_, offset, out); }
void UsbBarHandler::mmio_write_block(uint64_t offset, std::span<const std::byte> data) { device_.bar_write_block(bar_, offset, data); }

}  // namespace

std::unique_ptr<PciDevice> open_usb_device(std::unique_ptr<usb::UsbBackend> usb, const UsbOpenOptions& options) {
    return std::make_unique<UsbPciDevice>(std::move(usb), options);
}

const usb::TransferCounters* usb_transfer_counters(PciDevice& device) {
    auto* d = dynamic_cast<UsbPciDevice*>(&device);
    return d ? &d->counters() : nullptr;
}

std::optional<std::string> usb_bridge_firmware(PciDevice& device) {
    auto* d = dynamic_cast<UsbPciDevice*>(&device);
    return d ? std::optional<std::string>(d->firmware()) : std::nullopt;
}

uint64_t usb_coalesced_writes(PciDevice& device) {
    auto* d = dynamic_cast<UsbPciDevice*>(&device);
    return d ? d->coalesced() : 0;
}

}  // namespace baregpu::pci
