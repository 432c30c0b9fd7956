#include "drivers/pci/sim_bus.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"
#include "drivers/pci/sim_function.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

namespace baregpu::pci::sim {

namespace {

constexpr uint64_t kAllOnes = ~uint64_t{0};
// x86 MSI messages are writes into this window (Intel SDM vol. 3, 11.11.1); an IOMMU keeps it
// out of the IOVA space.
constexpr uint64_t kMsiWindowStart = 0xfee00000;
constexpr uint64_t kMsiWindowEnd = 0xfef00000;
// PCIe Base Spec 6.6.2: software waits 100 ms after initiating FLR before touching the function.
constexpr uint64_t kFlrWaitNs = 100'000'000;

uint64_t ones(unsigned width) { return width >= 8 ? kAllOnes : ((uint64_t{1} << (8 * width)) - 1); }

// One naturally aligned access to a Memory BAR (the offset is aligned to the width). A model's
// engine thread reads and writes the same words (a signal, a WAIT_REG_MEM target): as on a real
// bus these single accesses are not torn, so they are atomic here (relaxed: PCIe orders nothing more).
uint64_t load_word(const std::byte* at, unsigned width) {
    switch (width) {
        case 1: return __atomic_load_n(reinterpret_cast<const uint8_t*>(at), __ATOMIC_RELAXED);
        case 2: return __atomic_load_n(reinterpret_cast<const uint16_t*>(at), __ATOMIC_RELAXED);
        case 4: return __atomic_load_n(reinterpret_cast<const uint32_t*>(at), __ATOMIC_RELAXED);
        default: return __atomic_load_n(reinterpret_cast<const uint64_t*>(at), __ATOMIC_RELAXED);
    }
}
void store_word(std::byte* at, unsigned width, uint64_t value) {
    switch (width) {
        case 1: __atomic_store_n(reinterpret_cast<uint8_t*>(at), static_cast<uint8_t>(value), __ATOMIC_RELAXED); break;
        case 2: __atomic_store_n(reinterpret_cast<uint16_t*>(at), static_cast<uint16_t>(value), __ATOMIC_RELAXED); break;
        case 4: __atomic_store_n(reinterpret_cast<uint32_t*>(at), static_cast<uint32_t>(value), __ATOMIC_RELAXED); break;
        default: __atomic_store_n(reinterpret_cast<uint64_t*>(at), value, __ATOMIC_RELAXED); break;
    }
}

}  // namespace

std::string IommuFault::describe() const {
    std::string text = fmt::format("{}: IOMMU fault: device {} of {} bytes at IOVA {} hit no mapping", device,
                                   write ? "write" : "read", length, address.hex());
    if (!missing_peer_mapping.empty()) text += fmt::format(" (the missing mapping: peer {})", missing_peer_mapping);
    return text;
}

std::string ProtocolViolation::describe() const {
    return fmt::format("{}: {} at {} ({})", device, what, where, source);
}

IommuDomain::IommuDomain()
    // IOVA 0 is never handed out (a DMA to address 0 is a driver bug caught as a fault), nor the
    // MSI window; 48 bits like a 4-level VT-d page table.
    : iova({{0x1000, kMsiWindowStart}, {kMsiWindowEnd, uint64_t{1} << 48}}) {}

bool IommuDomain::translate(uint64_t address, uint64_t length, std::vector<std::span<std::byte>>& out, bool* peer) {
    out.clear();
    if (peer) *peer = false;
    uint64_t at = address;
    uint64_t left = length;
    while (left > 0) {
        auto it = mappings.upper_bound(at);
        if (it == mappings.begin()) return false;
        --it;
        uint64_t offset = at - it->first;
        if (offset >= it->second.size) return false;
        uint64_t n = std::min(left, it->second.size - offset);
        out.emplace_back(it->second.host + offset, n);
        if (peer && !it->second.peer.empty()) *peer = true;
        at += n;
        left -= n;
    }
    return true;
}

SimBus::Function::ZeroPages::~ZeroPages() {
    if (!bytes.empty()) ::munmap(bytes.data(), bytes.size());
}

SimBus::Function::Function(SimBus& owner, PciAddress addr, std::unique_ptr<SimDeviceModel> m,
                           const std::array<uint64_t, kBarCount>& bar_addresses)
    : bus(owner), address(addr), name("sim:" + addr.to_string()), model(std::move(m)), spec(model->spec()),
      config_(spec, bar_addresses) {
    for (const BarSpec& bar : spec.bars) {
        if (bar.kind != BarSpec::Kind::Memory) continue;
        if (bar.storage.empty()) {
            void* p = ::mmap(nullptr, bar.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED) throw SystemError(name, fmt::format("mmap of BAR{}'s {} bytes", bar.index, bar.size), errno);
            owned_memory[bar.index].bytes = {static_cast<std::byte*>(p), bar.size};
            memory[bar.index] = owned_memory[bar.index].bytes;
        } else if (bar.storage.size() != bar.size) {
            throw Error(name, fmt::format("BAR{}: the model's storage is {} bytes, the BAR {}", bar.index,
                                          bar.storage.size(), bar.size));
        } else {
            memory[bar.index] = bar.storage;
        }
    }
    msix_.resize(spec.msix.vectors);
    msix_pending_.assign(spec.msix.vectors, false);
}

SimBus::Function::~Function() {
    // The model's threads may still use this port (DMA, interrupts, violations): stop them while
    // every member is alive; the members declared after `model` are destroyed before it.
    model->disconnect();
}

void SimBus::Function::charge(uint64_t ns) {
    counters.modelled_ns.fetch_add(ns, std::memory_order_relaxed);
    bus.clock_ns_.fetch_add(ns, std::memory_order_relaxed);
}

void SimBus::Function::check_not_gone(const char* operation) const {
    if (gone_.load(std::memory_order_acquire)) {
        throw DeviceLostError(name, fmt::format("{}: the device is gone (removed from the bus)", operation));
    }
}

void SimBus::Function::violation(const std::string& what, const std::string& where, const std::string& source) {
    std::lock_guard lock(bus.mutex_);
    bus.violations_.push_back({name, what, where, source});
    // A driver cannot see the bus's record; someone chasing why a simulated device stopped can.
    static const bool trace = [] {
        const char* v = std::getenv("BAREGPU_SIM_TRACE");
        return v != nullptr && *v != '\0' && *v != '0';
    }();
    if (trace) std::fprintf(stderr, "simulated bus: %s\n", bus.violations_.back().describe().c_str());
}

// ---- config space --------------------------------------------------------------------

uint32_t SimBus::Function::config_read(uint16_t offset, unsigned width) {
    check_not_gone("config read");
    counters.config_reads.fetch_add(1, std::memory_order_relaxed);
    charge(bus.transport_.config_ns);
    if (removed()) return static_cast<uint32_t>(ones(width));
    std::lock_guard lock(config_mutex_);
    if (bus.now_ns() < flr_done_at_ns_) {
        violation("config read while a function-level reset is in progress", fmt::format("config 0x{:03x}", offset),
                  "PCIe Base Spec 6.6.2: wait 100 ms after Initiate FLR");
        return static_cast<uint32_t>(ones(width));
    }
    return config_.read(offset, width);
}

void SimBus::Function::config_write(uint16_t offset, unsigned width, uint32_t value) {
    check_not_gone("config write");
    counters.config_writes.fetch_add(1, std::memory_order_relaxed);
    charge(bus.transport_.config_ns);
    if (removed()) return;
    SimConfigSpace::WriteEffects effects;
    {
        std::lock_guard lock(config_mutex_);
        if (bus.now_ns() < flr_done_at_ns_) {
            violation("config write while a function-level reset is in progress",
                      fmt::format("config 0x{:03x}", offset), "PCIe Base Spec 6.6.2: wait 100 ms after Initiate FLR");
            return;
        }
        effects = config_.write(offset, width, value);
    }
    if (effects.function_level_reset) {
        function_level_reset();
        return;
    }
    if (effects.interrupts_changed) {
        std::lock_guard lock(irq_mutex_);
        deliver_pending_locked();
    }
}

void SimBus::Function::function_level_reset() {
    {
        std::lock_guard lock(config_mutex_);
        config_.reset();
        flr_done_at_ns_ = bus.now_ns() + kFlrWaitNs;
    }
    {
        std::lock_guard lock(irq_mutex_);
        std::fill(msix_.begin(), msix_.end(), MsixEntry{});
        std::fill(msix_pending_.begin(), msix_pending_.end(), false);
    }
    model->function_reset();
}

bool SimBus::Function::bus_master_enabled() {
    std::lock_guard lock(config_mutex_);
    return (config_.command() & cfg::kCommandMaster) != 0;
}

bool SimBus::Function::memory_decode_enabled(const char* access, unsigned bar, uint64_t offset) {
    uint16_t command;
    {
        std::lock_guard lock(config_mutex_);
        command = config_.command();
    }
    if (command & cfg::kCommandMemory) return true;
    violation(fmt::format("MMIO {} with memory decode disabled (the device answers Unsupported Request)", access),
              fmt::format("BAR{}+0x{:x}", bar, offset), "PCI Local Bus Spec 3.0 6.2.2, Command register bit 1");
    return false;
}

// ---- BAR accesses ----------------------------------------------------------------------

bool SimBus::Function::completion_times_out(unsigned bar, uint64_t offset, unsigned width) {
    std::lock_guard lock(fault_mutex_);
    for (auto it = faults_.begin(); it != faults_.end(); ++it) {
        if (it->kind != FaultKind::CompletionTimeout || it->bar != bar) continue;
        if (offset + width <= it->offset || offset - it->offset >= it->length) continue;
        if (--it->count == 0) faults_.erase(it);
        counters.completion_timeouts.fetch_add(1, std::memory_order_relaxed);
        charge(bus.transport_.completion_timeout_ns);
        return true;
    }
    return false;
}

bool SimBus::Function::in_msix_table(unsigned bar, uint64_t offset) const {
    const MsixSpec& m = spec.msix;
    return m.vectors != 0 && bar == m.table_bar && offset >= m.table_offset &&
           offset - m.table_offset < uint64_t{m.vectors} * cfg::kMsixEntrySize;
}

bool SimBus::Function::in_msix_pba(unsigned bar, uint64_t offset) const {
    const MsixSpec& m = spec.msix;
    return m.vectors != 0 && bar == m.pba_bar && offset >= m.pba_offset &&
           offset - m.pba_offset < (uint64_t{m.vectors} + 63) / 64 * 8;
}

uint64_t SimBus::Function::bar_read(unsigned bar, uint64_t offset, unsigned width) {
    check_not_gone("MMIO read");
    counters.mmio_reads.fetch_add(1, std::memory_order_relaxed);
    counters.mmio_bytes_read.fetch_add(width, std::memory_order_relaxed);
    charge(bus.transport_.mmio_read_ns);
    if (removed()) return ones(width);
    if (completion_times_out(bar, offset, width)) return ones(width);
    if (!memory_decode_enabled("read", bar, offset)) return ones(width);
    if (in_msix_table(bar, offset) || in_msix_pba(bar, offset)) return msix_read(bar, offset, width);
    if (!memory[bar].empty()) {
        return load_word(memory[bar].data() + offset, width);
    }
    return model->mmio_read(bar, offset, width);
}

void SimBus::Function::bar_write(unsigned bar, uint64_t offset, unsigned width, uint64_t value) {
    check_not_gone("MMIO write");
    counters.mmio_writes.fetch_add(1, std::memory_order_relaxed);
    counters.mmio_bytes_written.fetch_add(width, std::memory_order_relaxed);
    charge(bus.transport_.mmio_write_ns);
    if (removed()) return;
    if (!memory_decode_enabled("write", bar, offset)) return;
    if (in_msix_table(bar, offset) || in_msix_pba(bar, offset)) {
        msix_write(bar, offset, width, value);
        return;
    }
    if (!memory[bar].empty()) {
        store_word(memory[bar].data() + offset, width, value);
        return;
    }
    model->mmio_write(bar, offset, width, value);
}

void SimBus::Function::bar_read_block(unsigned bar, uint64_t offset, std::span<std::byte> out) {
    if (memory[bar].empty()) {
        // Register BARs see every access, as they would.
        for (size_t done = 0; done < out.size();) {
            unsigned width = ((offset + done) % 4 == 0 && out.size() - done >= 4) ? 4 : 1;
            uint64_t v = bar_read(bar, offset + done, width);
            std::memcpy(out.data() + done, &v, width);
            done += width;
        }
        return;
    }
    check_not_gone("MMIO block read");
    counters.mmio_reads.fetch_add(1, std::memory_order_relaxed);
    counters.mmio_bytes_read.fetch_add(out.size(), std::memory_order_relaxed);
    charge(bus.transport_.mmio_read_ns +
           static_cast<uint64_t>(static_cast<double>(out.size()) / bus.transport_.mmio_bytes_per_ns));
    if (removed() || completion_times_out(bar, offset, 1) || !memory_decode_enabled("read", bar, offset)) {
        std::memset(out.data(), 0xff, out.size());
        return;
    }
    std::memcpy(out.data(), memory[bar].data() + offset, out.size());
}

void SimBus::Function::bar_write_block(unsigned bar, uint64_t offset, std::span<const std::byte> data) {
    if (memory[bar].empty()) {
        for (size_t done = 0; done < data.size();) {
            unsigned width = ((offset + done) % 4 == 0 && data.size() - done >= 4) ? 4 : 1;
            uint64_t v = 0;
            std::memcpy(&v, data.data() + done, width);
            bar_write(bar, offset + done, width, v);
            done += width;
        }
        return;
    }
    check_not_gone("MMIO block write");
    counters.mmio_writes.fetch_add(1, std::memory_order_relaxed);
    counters.mmio_bytes_written.fetch_add(data.size(), std::memory_order_relaxed);
    charge(bus.transport_.mmio_write_ns +
           static_cast<uint64_t>(static_cast<double>(data.size()) / bus.transport_.mmio_bytes_per_ns));
    if (removed() || !memory_decode_enabled("write", bar, offset)) return;
    std::memcpy(memory[bar].data() + offset, data.data(), data.size());
}

std::span<std::byte> SimBus::Function::bar_memory(unsigned bar) {
    if (bar >= kBarCount || memory[bar].empty()) {
        throw Error(name, fmt::format("model asked for the memory of BAR{}, which is not a Memory BAR", bar));
    }
    return memory[bar];
}

// ---- MSI / MSI-X -----------------------------------------------------------------------

uint64_t SimBus::Function::msix_read(unsigned bar, uint64_t offset, unsigned width) {
    std::lock_guard lock(irq_mutex_);
    if (in_msix_pba(bar, offset)) {
        uint64_t first_bit = (offset - spec.msix.pba_offset) * 8;
        uint64_t v = 0;
        for (unsigned bit = 0; bit < 8 * width; ++bit) {
            uint64_t vector = first_bit + bit;
            if (vector < msix_pending_.size() && msix_pending_[vector]) v |= uint64_t{1} << bit;
        }
        return v;
    }
    if (width != 4 && width != 8) {
        violation(fmt::format("{}-byte read of the MSI-X table", width), fmt::format("BAR{}+0x{:x}", bar, offset),
                  "PCI Local Bus Spec 3.0 6.8.2: table accesses are DWORD or QWORD");
        return ones(width);
    }
    uint64_t rel = offset - spec.msix.table_offset;
    const MsixEntry& e = msix_[rel / cfg::kMsixEntrySize];
    uint32_t words[4] = {static_cast<uint32_t>(e.address), static_cast<uint32_t>(e.address >> 32), e.data, e.control};
    unsigned word = static_cast<unsigned>(rel % cfg::kMsixEntrySize) / 4;
    uint64_t v = words[word];
    if (width == 8) v |= uint64_t{words[word + 1]} << 32;
    return v;
}

void SimBus::Function::msix_write(unsigned bar, uint64_t offset, unsigned width, uint64_t value) {
    std::lock_guard lock(irq_mutex_);
    if (in_msix_pba(bar, offset)) {
        violation("write to the MSI-X Pending Bit Array", fmt::format("BAR{}+0x{:x}", bar, offset),
                  "PCI Local Bus Spec 3.0 6.8.2.10: the PBA is read-only");
        return;
    }
    if (width != 4 && width != 8) {
        violation(fmt::format("{}-byte write to the MSI-X table", width), fmt::format("BAR{}+0x{:x}", bar, offset),
                  "PCI Local Bus Spec 3.0 6.8.2: table accesses are DWORD or QWORD");
        return;
    }
    uint64_t rel = offset - spec.msix.table_offset;
    MsixEntry& e = msix_[rel / cfg::kMsixEntrySize];
    unsigned word = static_cast<unsigned>(rel % cfg::kMsixEntrySize) / 4;
    for (unsigned i = 0; i < width / 4; ++i, ++word) {
        uint32_t w = static_cast<uint32_t>(value >> (32 * i));
        switch (word) {
            case 0: e.address = (e.address & 0xffffffff00000000ull) | (w & ~3u); break;
            case 1: e.address = (e.address & 0xffffffffull) | (uint64_t{w} << 32); break;
            case 2: e.data = w; break;
            default: e.control = w & cfg::kMsixEntryMasked; break;
        }
    }
    deliver_pending_locked();
}

void SimBus::Function::deliver_locked(uint64_t msg_address, uint32_t data) {
    auto route = routes_.find(data);
    if (msg_address < kMsiWindowStart || msg_address >= kMsiWindowEnd || route == routes_.end()) {
        counters.interrupts_dropped.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    uint64_t one = 1;
    if (::write(route->second, &one, sizeof one) != sizeof one) {
        counters.interrupts_dropped.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    counters.interrupts_delivered.fetch_add(1, std::memory_order_relaxed);
}

void SimBus::Function::deliver_pending_locked() {
    bool enabled, function_masked;
    {
        std::lock_guard lock(config_mutex_);
        enabled = config_.msix_enabled();
        function_masked = config_.msix_function_masked();
    }
    if (!enabled || function_masked) return;
    for (size_t v = 0; v < msix_.size(); ++v) {
        if (msix_pending_[v] && !(msix_[v].control & cfg::kMsixEntryMasked)) {
            msix_pending_[v] = false;
            deliver_locked(msix_[v].address, msix_[v].data);
        }
    }
}

void SimBus::Function::raise_interrupt(unsigned vector) {
    if (removed() || gone_.load(std::memory_order_acquire)) return;
    bool master;
    bool msix_on, msix_masked;
    SimConfigSpace::MsiState msi;
    {
        std::lock_guard lock(config_mutex_);
        master = (config_.command() & cfg::kCommandMaster) != 0;
        msix_on = config_.msix_enabled();
        msix_masked = config_.msix_function_masked();
        msi = config_.msi();
    }
    std::lock_guard lock(irq_mutex_);
    // An MSI is a memory write by the device: without bus mastering it cannot be sent
    // (PCI Local Bus Spec 3.0 6.8.1).
    if (!master) {
        counters.interrupts_dropped.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    if (msix_on) {
        if (vector >= msix_.size()) {
            counters.interrupts_dropped.fetch_add(1, std::memory_order_relaxed);
            return;
        }
        if (msix_masked || (msix_[vector].control & cfg::kMsixEntryMasked)) {
            msix_pending_[vector] = true;
            return;
        }
        deliver_locked(msix_[vector].address, msix_[vector].data);
        return;
    }
    if (msi.enabled && vector < msi.vectors) {
        // Multiple-message MSI: the device replaces the low log2(vectors) bits of the data.
        uint32_t data = (msi.data & ~(msi.vectors - 1)) | vector;
        deliver_locked(msi.address, data);
        return;
    }
    counters.interrupts_dropped.fetch_add(1, std::memory_order_relaxed);
}

void SimBus::Function::route_interrupt(uint32_t message_data, int eventfd) {
    std::lock_guard lock(irq_mutex_);
    routes_[message_data] = eventfd;
}

void SimBus::Function::clear_interrupt_routes() {
    std::lock_guard lock(irq_mutex_);
    routes_.clear();
}

// ---- DMA -------------------------------------------------------------------------------

void SimBus::Function::record_iommu_fault(uint64_t fault_address, uint64_t length, bool write) {
    // Called with iommu->mutex held.
    std::string missing;
    auto it = iommu->dropped.upper_bound(fault_address);
    if (it != iommu->dropped.begin() && fault_address - std::prev(it)->first < std::prev(it)->second.size) {
        --it;
        missing = fmt::format("{} at IOVA {:#x}+{:#x}", it->second.peer, it->first, it->second.size);
    }
    counters.iommu_faults.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(bus.mutex_);
    bus.iommu_faults_.push_back({name, BusAddress(fault_address), length, write, std::move(missing)});
    if (unread_iommu_faults.size() < 64) unread_iommu_faults.push_back({BusAddress(fault_address), length, write});
}

bool SimBus::Function::dma(uint64_t dma_address, uint64_t length, bool write,
                           const std::function<void(std::span<std::byte>, uint64_t)>& copy) {
    if (removed() || gone_.load(std::memory_order_acquire)) return false;
    if (!bus_master_enabled()) {
        violation(fmt::format("device {} of {} bytes at {} with bus mastering disabled", write ? "write" : "read",
                              length, BusAddress(dma_address).hex()),
                  "Command register bit 2", "PCI Local Bus Spec 3.0 6.2.2: a function may not master the bus");
        return false;
    }
    const uint64_t link_ns =
        bus.transport_.dma_setup_ns + static_cast<uint64_t>(static_cast<double>(length) / bus.transport_.dma_bytes_per_ns);
    charge(link_ns);
    counters.dma_ns.fetch_add(link_ns, std::memory_order_relaxed);
    std::vector<std::span<std::byte>> segments;
    bool peer = false;
    {
        std::lock_guard lock(iommu->mutex);
        if (!range_within(dma_address, length, ~uint64_t{0}) || !iommu->translate(dma_address, length, segments, &peer)) {
            record_iommu_fault(dma_address, length, write);
            return false;
        }
        uint64_t done = 0;
        for (std::span<std::byte> seg : segments) {
            copy(seg, done);
            done += seg.size();
        }
    }
    if (peer) {
        // Into another function's BAR: peer-to-peer, not host memory.
        (write ? counters.peer_writes : counters.peer_reads).fetch_add(1, std::memory_order_relaxed);
        (write ? counters.peer_bytes_written : counters.peer_bytes_read).fetch_add(length, std::memory_order_relaxed);
    } else if (write) {
        counters.dma_writes.fetch_add(1, std::memory_order_relaxed);
        counters.dma_bytes_written.fetch_add(length, std::memory_order_relaxed);
    } else {
        counters.dma_reads.fetch_add(1, std::memory_order_relaxed);
        counters.dma_bytes_read.fetch_add(length, std::memory_order_relaxed);
    }
    return true;
}

bool SimBus::Function::dma_read(BusAddress dma_address, std::span<std::byte> out) {
    return dma(dma_address.value(), out.size(), false,
               [&](std::span<std::byte> seg, uint64_t at) { std::memcpy(out.data() + at, seg.data(), seg.size()); });
}

bool SimBus::Function::dma_write(BusAddress dma_address, std::span<const std::byte> data) {
    return dma(dma_address.value(), data.size(), true,
               [&](std::span<std::byte> seg, uint64_t at) { std::memcpy(seg.data(), data.data() + at, seg.size()); });
}

std::byte* SimBus::Function::dma_host_memory(BusAddress at, uint64_t bytes) {
    if (removed() || !bus_master_enabled()) return nullptr;
    std::vector<std::span<std::byte>> segments;
    std::lock_guard lock(iommu->mutex);
    if (!iommu->translate(at.value(), bytes, segments) || segments.size() != 1) return nullptr;
    return segments.front().data();
}

bool SimBus::Function::with_host_memory(BusAddress at, uint64_t bytes, const std::function<void(std::span<std::byte>)>& use) {
    if (removed() || !bus_master_enabled()) return false;
    std::vector<std::span<std::byte>> segments;
    // Held across `use`: a DmaBuffer's release erases its mapping under this lock before it unmaps
    // the memory, so the bytes outlive the call.
    std::lock_guard lock(iommu->mutex);
    if (!iommu->translate(at.value(), bytes, segments) || segments.size() != 1) return false;
    use(segments.front());
    return true;
}

// ---- the bus ---------------------------------------------------------------------------

SimBus::SimBus(Transport transport) : transport_(std::move(transport)) {}

SimBus::~SimBus() = default;

PciAddress SimBus::attach(std::unique_ptr<SimDeviceModel> model) {
    PciAddress address;
    {
        std::lock_guard lock(mutex_);
        for (uint8_t dev = 1; dev < 32; ++dev) {
            address = PciAddress{0, 0, dev, 0};
            bool taken = std::any_of(functions_.begin(), functions_.end(),
                                     [&](const auto& f) { return f->address == address; });
            if (!taken) break;
            if (dev == 31) throw Error("sim", "the simulated bus is full (31 devices)");
        }
    }
    return attach(std::move(model), address);
}

PciAddress SimBus::attach(std::unique_ptr<SimDeviceModel> model, PciAddress address) {
    DeviceSpec spec = model->spec();
    std::lock_guard lock(mutex_);
    for (const auto& f : functions_) {
        if (f->address == address) throw Error("sim", fmt::format("{} is already taken on the simulated bus", address.to_string()));
    }
    // Place BARs as firmware would: naturally aligned, 32-bit ones below 4 GiB.
    std::array<uint64_t, kBarCount> bar_addresses{};
    for (const BarSpec& bar : spec.bars) {
        uint64_t& next = bar.is_64bit ? next_bar64_ : next_bar32_;
        uint64_t base = align_up(next, std::max<uint64_t>(bar.size, 4096)).value_or(0);
        bar_addresses[bar.index] = base;
        next = base + std::max<uint64_t>(bar.size, 4096);
    }
    auto function = std::make_unique<Function>(*this, address, std::move(model), bar_addresses);
    function->model->connect(*function);
    functions_.push_back(std::move(function));
    return address;
}

SimBus::Function& SimBus::function(PciAddress address) const {
    std::lock_guard lock(mutex_);
    for (const auto& f : functions_) {
        if (f->address == address) return *f;
    }
    throw Error("sim", fmt::format("no simulated device at {}", address.to_string()));
}

std::vector<PciAddress> SimBus::functions() const {
    std::lock_guard lock(mutex_);
    std::vector<PciAddress> out;
    for (const auto& f : functions_) out.push_back(f->address);
    return out;
}

SimDeviceModel& SimBus::model(PciAddress address) { return *function(address).model; }

Counters SimBus::counters(PciAddress address) const {
    const auto& c = function(address).counters;
    auto get = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
    return Counters{get(c.config_reads),      get(c.config_writes),     get(c.mmio_reads),
                    get(c.mmio_writes),       get(c.mmio_bytes_read),   get(c.mmio_bytes_written),
                    get(c.dma_reads),         get(c.dma_writes),        get(c.dma_bytes_read),
                    get(c.dma_bytes_written), get(c.interrupts_delivered), get(c.interrupts_dropped),
                    get(c.completion_timeouts), get(c.iommu_faults),    get(c.modelled_ns),
                    get(c.peer_reads),        get(c.peer_writes),       get(c.peer_bytes_read),
                    get(c.peer_bytes_written), get(c.dma_ns)};
}

void SimBus::reset_counters(PciAddress address) {
    auto& c = function(address).counters;
    for (std::atomic<uint64_t>* v :
         {&c.config_reads, &c.config_writes, &c.mmio_reads, &c.mmio_writes, &c.mmio_bytes_read, &c.mmio_bytes_written,
          &c.dma_reads, &c.dma_writes, &c.dma_bytes_read, &c.dma_bytes_written, &c.interrupts_delivered,
          &c.interrupts_dropped, &c.completion_timeouts, &c.iommu_faults, &c.modelled_ns, &c.peer_reads, &c.peer_writes,
          &c.peer_bytes_read, &c.peer_bytes_written, &c.dma_ns}) {
        v->store(0, std::memory_order_relaxed);
    }
}

void SimBus::inject(PciAddress address, Fault fault) {
    Function& f = function(address);
    switch (fault.kind) {
        case FaultKind::SurpriseRemoval: f.removed_.store(true, std::memory_order_release); break;
        case FaultKind::DeviceGone:
            f.removed_.store(true, std::memory_order_release);
            f.gone_.store(true, std::memory_order_release);
            break;
        case FaultKind::CompletionTimeout: {
            if (fault.count == 0) return;
            std::lock_guard lock(f.fault_mutex_);
            f.faults_.push_back(fault);
            break;
        }
    }
}

size_t SimBus::drop_peer_mappings(PciAddress address) {
    Function& f = function(address);
    std::lock_guard lock(f.iommu->mutex);
    size_t dropped = 0;
    for (auto it = f.iommu->mappings.begin(); it != f.iommu->mappings.end();) {
        if (it->second.peer.empty()) {
            ++it;
            continue;
        }
        f.iommu->dropped.insert_or_assign(it->first, it->second);
        it = f.iommu->mappings.erase(it);
        ++dropped;
    }
    return dropped;
}

void SimBus::clear_faults(PciAddress address) {
    Function& f = function(address);
    f.removed_.store(false, std::memory_order_release);
    f.gone_.store(false, std::memory_order_release);
    std::lock_guard lock(f.fault_mutex_);
    f.faults_.clear();
}

std::vector<ProtocolViolation> SimBus::violations() const {
    std::lock_guard lock(mutex_);
    return violations_;
}

std::vector<IommuFault> SimBus::iommu_faults() const {
    std::lock_guard lock(mutex_);
    return iommu_faults_;
}

void SimBus::clear_violations() {
    std::lock_guard lock(mutex_);
    violations_.clear();
    iommu_faults_.clear();
}

}  // namespace baregpu::pci::sim
