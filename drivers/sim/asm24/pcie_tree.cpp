#include "drivers/sim/asm24/pcie_tree.hpp"

#include "base/error.hpp"
#include "drivers/usb/asm24_protocol.hpp"

#include <fmt/format.h>

#include <bit>
#include <cstring>

namespace baregpu::sim::asm24 {

using usb::tlp::Completion;
using usb::tlp::CompletionStatus;
namespace a24 = usb::asm24;

namespace {
constexpr const char* kBridgeSpec = "PCI-to-PCI Bridge Architecture Specification 1.2, chapter 3";
constexpr const char* kTreeSource = "tinygrad runtime/support/system.py (pci_setup_usb_bars, USBPCIDevice) and usb.py";
// Type-1 header offsets (pci_regs.h): PCI_PRIMARY_BUS 0x18, PCI_MEMORY_BASE 0x20 ... PCI_BRIDGE_CONTROL 0x3e.
constexpr uint16_t kBusNumbers = 0x18, kMemBase = 0x20, kMemLimit = 0x22, kPrefBase = 0x24, kPrefLimit = 0x26, kPrefBaseUpper = 0x28,
                   kPrefLimitUpper = 0x2c, kBridgeControl = 0x3e;
}  // namespace

BridgeHeader::BridgeHeader() {
    // ASMedia's PCI vendor ID (pci.ids 1b21); the device ID is a placeholder: no public source
    // gives the ASM2464's internal bridge IDs.
    bytes_[0x00] = 0x21, bytes_[0x01] = 0x1b, bytes_[0x02] = 0x64, bytes_[0x03] = 0x24;
    bytes_[0x0a] = 0x04, bytes_[0x0b] = 0x06;  // class 0x0604: PCI-to-PCI bridge
    bytes_[0x0e] = 0x01;  // header type 1
    bytes_[kPrefBase] = 0x01, bytes_[kPrefLimit] = 0x01;  // 64-bit prefetchable window (bits 3:0 = 1)
}

uint32_t BridgeHeader::read(uint16_t offset, unsigned width) const {
    uint32_t v = 0;
    for (unsigned i = 0; i < width; ++i) v |= uint32_t{bytes_[offset + i]} << (8 * i);
    return v;
}

std::string BridgeHeader::write(uint16_t offset, unsigned width, uint32_t value) {
    if (offset <= kBusNumbers + 2 && offset + width > kBusNumbers) {
        // tinygrad pci_setup_usb_bars: "All 3 values must be written at the same time" (primary, secondary, subordinate).
        if (offset != kBusNumbers || width != 4) {
            return fmt::format("bus numbers written with a {}-byte access at {:#x}; the bridge takes primary, secondary and "
                               "subordinate in one dword write at 0x18",
                               width, offset);
        }
        bytes_[0x18] = static_cast<uint8_t>(value), bytes_[0x19] = static_cast<uint8_t>(value >> 8);
        bytes_[0x1a] = static_cast<uint8_t>(value >> 16);
        return {};
    }
    for (unsigned i = 0; i < width; ++i) {
        const uint16_t at = static_cast<uint16_t>(offset + i);
        uint8_t byte = static_cast<uint8_t>(value >> (8 * i));
        uint8_t writable = 0;
        if (at == 0x04) writable = 0x07;  // I/O, memory, bus master
        else if (at == 0x05) writable = 0x04;  // INTx disable
        else if (at == kMemBase || at == kMemLimit || at == kPrefBase || at == kPrefLimit) writable = 0xf0;  // bits 3:0 read-only
        else if ((at > kMemBase && at < kPrefBaseUpper && at % 2 == 1) || (at >= kPrefBaseUpper && at < 0x30)) writable = 0xff;
        else if (at == kBridgeControl || at == kBridgeControl + 1) writable = 0xff;
        bytes_[at] = static_cast<uint8_t>((bytes_[at] & ~writable) | (byte & writable));
    }
    return {};
}

bool BridgeHeader::forwards_memory(uint64_t address) const {
    if ((command() & 0x2) == 0) return false;  // memory space enable
    const uint64_t mem_base = uint64_t{read(kMemBase, 2) & 0xfff0u} << 16;
    const uint64_t mem_limit = (uint64_t{read(kMemLimit, 2) & 0xfff0u} << 16) | 0xfffff;
    if (mem_base <= mem_limit && address >= mem_base && address <= mem_limit) return true;
    const uint64_t pref_base = (uint64_t{read(kPrefBase, 2) & 0xfff0u} << 16) | uint64_t{read(kPrefBaseUpper, 4)} << 32;
    const uint64_t pref_limit = ((uint64_t{read(kPrefLimit, 2) & 0xfff0u} << 16) | 0xfffff) | uint64_t{read(kPrefLimitUpper, 4)} << 32;
    return pref_base <= pref_limit && address >= pref_base && address <= pref_limit;
}

PcieTree::PcieTree(std::string name, std::unique_ptr<pci::sim::SimDeviceModel> endpoint, std::atomic<uint64_t>& clock, ViolationSink sink)
    : name_(std::move(name)), clock_(clock),
      epoch_(std::chrono::steady_clock::now()), sink_(std::move(sink)), model_(std::move(endpoint)), sram_(a24::kSramBytes),
      sys_buf_(a24::kSmallWindowBytes), cq_buf_(a24::kSmallWindowBytes) {
    bridges_.resize(kBridgeCount);
    if (model_) {
        spec_ = model_->spec();
        config_.emplace(spec_, std::array<uint64_t, pci::kBarCount>{});  // BARs unassigned: the driver assigns them
        for (const pci::sim::BarSpec& bar : spec_.bars) {
            if (bar.kind != pci::sim::BarSpec::Kind::Memory) continue;
            if (!bar.storage.empty()) {
                memory_[bar.index] = bar.storage;
            } else {
                owned_[bar.index].assign(bar.size, std::byte{0});
                memory_[bar.index] = owned_[bar.index];
            }
        }
        model_->connect(*this);
    }
}

PcieTree::~PcieTree() {
    if (model_) model_->disconnect();
}

Completion PcieTree::config(const usb::tlp::Request& r) {
    const uint32_t a = static_cast<uint32_t>(r.address);
    const uint8_t bus = static_cast<uint8_t>(a >> 24), dev = (a >> 19) & 0x1f, fn = (a >> 16) & 7;
    const uint16_t reg = a & 0xffc;
    Completion ur{0, CompletionStatus::UnsupportedRequest, 0};
    const unsigned be = r.byte_enables;
    const unsigned width = static_cast<unsigned>(std::popcount(be)), lane = static_cast<unsigned>(std::countr_zero(be | 0x10u));
    if (be == 0 || be > 0xf || (be >> lane) != (1u << width) - 1 || (width != 1 && width != 2 && width != 4) || lane % width != 0) {
        violation(fmt::format("config request with byte enables {:#x}: not one naturally aligned 1, 2 or 4-byte access", be),
                  r.describe(), "the simulated bridge (a modelling limit: drivers/sim/asm24/README.md)");
        return ur;
    }
    if ((bus == 0) != ((r.fmt_type & 1) == 0)) {
        violation(fmt::format("type {} configuration request to bus {}", r.fmt_type & 1, bus), r.describe(),
                  "PCI Express Base Specification 2.2.7: type 0 for the bus below the root, type 1 beyond");
        return ur;
    }
    const uint16_t offset = static_cast<uint16_t>(reg + lane);
    const bool write = usb::tlp::is_config_write(r.fmt_type);
    const uint32_t value = (r.value >> (8 * lane)) & (width == 4 ? 0xffffffffu : (1u << (8 * width)) - 1);
    // Which element of the chain (bridge 0..3, endpoint 4) sits at `bus`: bridge 0 on the root bus,
    // element k+1 on bridge k's secondary bus. Type-1 requests are forwarded while bus lies in
    // (secondary, subordinate].
    int element = -1;
    if (bus == 0) {
        element = 0;
    } else {
        for (unsigned k = 0; k < kBridgeCount; ++k) {
            const BridgeHeader& br = bridges_[k];
            if (bus == br.secondary() && br.secondary() != 0) {
                element = static_cast<int>(k) + 1;
                break;
            }
            if (!(bus > br.secondary() && bus <= br.subordinate())) break;
        }
    }
    if (element < 0 || dev != 0 || fn != 0) return ur;  // no route or an empty slot: UR, as a root port answers
    Completion ok{0, CompletionStatus::Successful, 0};
    if (element < static_cast<int>(kBridgeCount)) {
        BridgeHeader& br = bridges_[static_cast<unsigned>(element)];
        if (write) {
            if (std::string v = br.write(offset, width, value); !v.empty()) {
                violation(v, r.describe(), kTreeSource);
                return Completion{0, CompletionStatus::CompleterAbort, 0};
            }
        } else {
            ok.data = br.read(reg, 4);
        }
        return ok;
    }
    if (!model_) return ur;
    std::lock_guard lock(config_mutex_);
    if (offset + width > config_->size()) return ur;
    if (write) {
        pci::sim::SimConfigSpace::WriteEffects effects = config_->write(offset, width, value);
        if (effects.function_level_reset) {
            config_->reset();
            model_->function_reset();
        }
    } else {
        ok.data = config_->read(reg, 4);
    }
    return ok;
}

std::optional<PcieTree::Hit> PcieTree::decode(uint64_t address, uint64_t length) {
    if (!model_) return std::nullopt;
    for (const BridgeHeader& br : bridges_) {
        if (!br.forwards_memory(address) || !br.forwards_memory(address + length - 1)) return std::nullopt;
    }
    std::lock_guard lock(config_mutex_);
    if ((config_->command() & pci::cfg::kCommandMemory) == 0) return std::nullopt;
    for (const pci::sim::BarSpec& bar : spec_.bars) {
        uint64_t base = config_->read(static_cast<uint16_t>(pci::cfg::kBar0 + 4 * bar.index), 4) & pci::cfg::kBarMemAddressMask;
        if (bar.is_64bit) base |= uint64_t{config_->read(static_cast<uint16_t>(pci::cfg::kBar0 + 4 * bar.index + 4), 4)} << 32;
        if (base == 0) continue;  // unassigned
        if (address >= base && address - base < bar.size && length <= bar.size - (address - base)) return Hit{bar.index, address - base};
    }
    return std::nullopt;
}

bool PcieTree::memory_read(uint64_t address, std::span<std::byte> out) {
    const std::optional<Hit> hit = decode(address, out.size());
    if (!hit) return false;
    if (!memory_[hit->bar].empty()) {
        std::memcpy(out.data(), memory_[hit->bar].data() + hit->offset, out.size());
        return true;
    }
    // A 2-DW request at a qword-aligned address is one 64-bit access to the register. The firmware
    // sends it as two dword TLPs (pcie_pio.h); the simulated endpoints still take one access
    // (issue 32 B4: the sim Navi's rule for a doorbell in halves is not settled).
    if (out.size() == 8 && hit->offset % 8 == 0) {
        const uint64_t v = model_->mmio_read(hit->bar, hit->offset, 8);
        std::memcpy(out.data(), &v, 8);
        return true;
    }
    if (out.size() < 4) {
        const uint64_t v = model_->mmio_read(hit->bar, hit->offset, static_cast<unsigned>(out.size()));
        std::memcpy(out.data(), &v, out.size());
        return true;
    }
    for (size_t i = 0; i < out.size(); i += 4) {
        const uint32_t v = static_cast<uint32_t>(model_->mmio_read(hit->bar, hit->offset + i, 4));
        std::memcpy(out.data() + i, &v, 4);
    }
    return true;
}

bool PcieTree::memory_write(uint64_t address, std::span<const std::byte> data) {
    const std::optional<Hit> hit = decode(address, data.size());
    if (!hit) return false;
    if (!memory_[hit->bar].empty()) {
        std::memcpy(memory_[hit->bar].data() + hit->offset, data.data(), data.size());
        return true;
    }
    // As in memory_read: a qword-aligned 2-DW write is one 64-bit access (issue 32 B4).
    if (data.size() == 8 && hit->offset % 8 == 0) {
        uint64_t v = 0;
        std::memcpy(&v, data.data(), 8);
        model_->mmio_write(hit->bar, hit->offset, 8, v);
        return true;
    }
    if (data.size() < 4) {
        uint64_t v = 0;
        std::memcpy(&v, data.data(), data.size());
        model_->mmio_write(hit->bar, hit->offset, static_cast<unsigned>(data.size()), v);
        return true;
    }
    for (size_t i = 0; i < data.size(); i += 4) {
        uint32_t v = 0;
        std::memcpy(&v, data.data() + i, 4);
        model_->mmio_write(hit->bar, hit->offset + i, 4, v);
    }
    return true;
}

std::span<std::byte> PcieTree::sram_span(uint64_t address, uint64_t length) {
    auto inside = [&](uint64_t base, std::vector<std::byte>& bytes) -> std::span<std::byte> {
        if (address >= base && address - base < bytes.size() && length <= bytes.size() - (address - base)) {
            return std::span(bytes).subspan(address - base, length);
        }
        return {};
    };
    if (auto s = inside(a24::kGpuSram, sram_); !s.empty()) return s;
    if (auto s = inside(a24::kGpuSysBuf, sys_buf_); !s.empty()) return s;
    return inside(a24::kGpuCqBuf, cq_buf_);
}

// The link's modelled clock advances by what each transfer, poll and register access would cost
// instead of sleeping, so it runs far ahead of wall time (a host polling a signal charges a round
// trip per read in a microsecond of emulation) and a timestamp taken from it could show a kernel
// longer than the host waited for it. A timestamp counter is a real clock, so the endpoint's
// counter reads wall time; transfer figures come from the link clock (Device::link_clock_ns).
uint64_t PcieTree::timestamp_ns() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - epoch_).count());
}

bool PcieTree::upstream_path_open() const {
    // Bus Master Enable on a bridge gates forwarding of requests from below (PCI-to-PCI Bridge
    // Architecture Specification 1.2, 3.2.2.3.1); the endpoint needs its own too.
    for (const BridgeHeader& br : bridges_) {
        if ((br.command() & pci::cfg::kCommandMaster) == 0) return false;
    }
    std::lock_guard lock(config_mutex_);
    return (config_->command() & pci::cfg::kCommandMaster) != 0;
}

bool PcieTree::dma_read(BusAddress address, std::span<std::byte> out) {
    if (!upstream_path_open()) {
        violation("DMA read while bus mastering is off on the endpoint or a bridge", fmt::format("{:#x}", address.value()), kBridgeSpec);
        return false;
    }
    std::lock_guard lock(sram_mutex_);
    std::span<std::byte> s = sram_span(address.value(), out.size());
    if (s.empty() && !out.empty()) {
        violation(fmt::format("DMA read of {} bytes outside the bridge SRAM windows (512 KB at {:#x}, 4 KB at {:#x} and {:#x})", out.size(),
                              a24::kGpuSram, a24::kGpuSysBuf, a24::kGpuCqBuf),
                  fmt::format("{:#x}", address.value()), kTreeSource);
        return false;
    }
    std::memcpy(out.data(), s.data(), out.size());
    return true;
}

bool PcieTree::dma_write(BusAddress address, std::span<const std::byte> data) {
    if (!upstream_path_open()) {
        violation("DMA write while bus mastering is off on the endpoint or a bridge", fmt::format("{:#x}", address.value()), kBridgeSpec);
        return false;
    }
    std::lock_guard lock(sram_mutex_);
    std::span<std::byte> s = sram_span(address.value(), data.size());
    if (s.empty() && !data.empty()) {
        violation(fmt::format("DMA write of {} bytes outside the bridge SRAM windows (512 KB at {:#x}, 4 KB at {:#x} and {:#x})", data.size(),
                              a24::kGpuSram, a24::kGpuSysBuf, a24::kGpuCqBuf),
                  fmt::format("{:#x}", address.value()), kTreeSource);
        return false;
    }
    std::memcpy(s.data(), data.data(), data.size());
    if (s.data() >= cq_buf_.data() && s.data() < cq_buf_.data() + cq_buf_.size()) cq_writes_.fetch_add(1);
    return true;
}

std::byte* PcieTree::dma_host_memory(BusAddress address, uint64_t bytes) {
    if (!upstream_path_open()) return nullptr;
    std::span<std::byte> s = sram_span(address.value(), bytes);
    return s.empty() ? nullptr : s.data();
}

void PcieTree::raise_interrupt(unsigned vector) {
    (void)vector;
    // MSI writes go upstream to an address the bridge does not forward to the host: over USB there
    // is no interrupt path (tinygrad polls over USB). Counted, like an unrouted MSI on the bus.
    interrupts_dropped_.fetch_add(1);
}

bool PcieTree::bus_master_enabled() {
    std::lock_guard lock(config_mutex_);
    return config_ && (config_->command() & pci::cfg::kCommandMaster) != 0;
}

std::span<std::byte> PcieTree::bar_memory(unsigned bar) { return bar < memory_.size() ? memory_[bar] : std::span<std::byte>{}; }

void PcieTree::violation(const std::string& what, const std::string& where, const std::string& source) { sink_(what, where, source); }

}  // namespace baregpu::sim::asm24
