// The `sim` backend: a PciDevice on the simulated bus. It does what the VFIO kernel driver
// would do for us on real hardware — enable memory decode at open, program MSI/MSI-X and route
// the messages to eventfds, save and restore config state around an FLR — through the
// function's config space and BARs, so the model sees the same transactions.
#include "base/checked.hpp"
#include "base/error.hpp"
#include "drivers/pci/host_memory.hpp"
#include "drivers/pci/sim_function.hpp"

#include <fmt/format.h>
#include <thread>

namespace baregpu::pci::sim {

namespace {
constexpr uint64_t kMsiAddress = 0xfee00000;  // x86 local APIC message address (Intel SDM 11.11.1)
constexpr auto kFlrWait = std::chrono::milliseconds(100);  // PCIe Base Spec 6.6.2
}  // namespace

class SimPciDevice final : public PciDevice {
public:
    explicit SimPciDevice(SimBus::Function& function) : PciDevice(function.name, function.address), function_(function) {
        // As vfio-pci's open does (pci_enable_device): memory decode on, bus mastering off.
        config_write16(cfg::kCommand, static_cast<uint16_t>((config_read16(cfg::kCommand) | cfg::kCommandMemory) &
                                                            ~cfg::kCommandMaster));
        set_bar_infos(size_bars(*this));
        for (unsigned i = 0; i < kBarCount; ++i) handlers_[i] = BarHandler{this, i};
    }

    ~SimPciDevice() override {
        try {
            if (interrupt_vectors() != 0) disable_interrupts();
        } catch (const Error&) {
            // A removed device cannot be told anything; the routes go with the function.
        }
        function_.clear_interrupt_routes();
        function_.opened.store(false, std::memory_order_release);
    }

    std::string_view backend() const override { return "sim"; }

    uint16_t config_size() const override { return function_.spec.pci_express ? 4096 : 256; }

    uint32_t config_read(uint16_t offset, unsigned width) override {
        check_config_access(offset, width);
        return function_.config_read(offset, width);
    }

    void config_write(uint16_t offset, unsigned width, uint32_t value) override {
        check_config_access(offset, width);
        function_.config_write(offset, width, value);
    }

    std::unique_ptr<DmaBuffer> alloc_dma(uint64_t size, PageSize page_size) override {
        function_.check_not_gone("DMA allocation");
        HostMemory memory = HostMemory::allocate(name(), size, page_size, /*lock=*/false);
        uint64_t bytes = memory.bytes().size();
        std::shared_ptr<IommuDomain> iommu = function_.iommu;
        uint64_t iova;
        {
            std::lock_guard lock(iommu->mutex);
            auto got = iommu->iova.allocate(bytes, static_cast<uint64_t>(page_size), dma_address_limit());
            if (!got) {
                throw Error(name(), fmt::format("no free IOVA range of {} below the device's {}-bit DMA limit",
                                                format_size(bytes), dma_address_bits()));
            }
            iova = *got;
            iommu->mappings.emplace(iova, IommuDomain::Mapping{bytes, memory.bytes().data()});
        }
        std::span<std::byte> cpu = memory.release();
        return std::make_unique<DmaBuffer>(name(), cpu, page_size, std::vector<BusAddress>{BusAddress(iova)},
                                           [iommu, iova, cpu] {
                                               {
                                                   std::lock_guard lock(iommu->mutex);
                                                   iommu->mappings.erase(iova);
                                                   iommu->iova.free(iova, cpu.size());
                                               }
                                               HostMemory::release_mapping(cpu);
                                           });
    }

    // Peer-to-peer on the simulated bus: the peer's BAR bytes mapped into this function's IOMMU
    // domain at an IOVA of ours, as VFIO_IOMMU_MAP_DMA of a BAR mmap does on a real host; the
    // bus counts what lands there as peer traffic, not host DMA. Functions on different SimBus
    // objects are behind different (simulated) root complexes and refused.
    std::optional<std::string> peer_refusal(PciDevice& owner) override {
        if (auto why = PciDevice::peer_refusal(owner)) return why;
        auto* peer = dynamic_cast<SimPciDevice*>(&owner);
        if (peer == nullptr || &peer->function_.bus != &function_.bus) {
            return fmt::format("{} and {} are behind different root complexes (two simulated buses) with no ACS peer forwarding "
                               "between them; open both on one bus (the URI option bus=<name>)",
                               name(), owner.name());
        }
        return std::nullopt;
    }

    std::unique_ptr<BusMapping> map_peer_bar_impl(PciDevice& owner, unsigned bar, uint64_t offset, uint64_t size) override {
        auto& peer = static_cast<SimPciDevice&>(owner);
        std::span<std::byte> memory = peer.function_.memory[bar];
        if (memory.empty()) {
            throw UnsupportedError(name(), fmt::format("no peer access: BAR{} of {} holds registers, not memory", bar, owner.name()));
        }
        return map_into_iommu(memory.subspan(offset, size),
                              fmt::format("BAR{}+{:#x} of {} (bus address {:#x})", bar, offset, owner.name(),
                                          owner.bar_info(bar).bus_base + offset));
    }

    std::vector<IommuFaultRecord> take_iommu_faults() override {
        std::lock_guard lock(function_.bus.mutex_);
        return std::exchange(function_.unread_iommu_faults, {});
    }

    std::unique_ptr<BusMapping> map_foreign_host(std::span<std::byte> memory) override {
        return map_into_iommu(memory, {});
    }

    void enable_interrupts(InterruptKind kind, unsigned vectors) override {
        function_.check_not_gone("enable interrupts");
        if (interrupt_vectors() != 0) disable_interrupts();
        if (vectors == 0) throw Error(name(), "asked to enable 0 interrupt vectors");
        std::vector<UniqueFd> fds;
        for (unsigned v = 0; v < vectors; ++v) fds.push_back(make_eventfd(name()));
        program_interrupts(kind, std::move(fds));
    }

    void disable_interrupts() override {
        if (auto msi = find_capability(cfg::kCapMsi)) {
            uint16_t at = static_cast<uint16_t>(*msi + cfg::kMsiFlags);
            config_write16(at, config_read16(at) & ~(cfg::kMsiFlagsEnable | cfg::kMsiFlagsMultipleEnableMask));
        }
        if (auto msix = find_capability(cfg::kCapMsix)) {
            uint16_t at = static_cast<uint16_t>(*msix + cfg::kMsixFlags);
            config_write16(at, config_read16(at) & ~cfg::kMsixFlagsEnable);
        }
        function_.clear_interrupt_routes();
        irq_fds().clear();
    }

    void reset_function() override {
        function_.check_not_gone("function-level reset");
        auto exp = find_capability(cfg::kCapPciExpress);
        if (!exp || !(config_read32(static_cast<uint16_t>(*exp + cfg::kExpDevCap)) & cfg::kExpDevCapFlr)) {
            throw UnsupportedError(name(), "the device does not support function-level reset (no FLR in DevCap)");
        }
        // Save what FLR clears, as Linux's pci_reset_function does (pci_save_state).
        std::array<uint32_t, 16> header{};
        for (unsigned i = 0; i < header.size(); ++i) header[i] = config_read32(static_cast<uint16_t>(4 * i));
        unsigned vectors = interrupt_vectors();
        bool msix = vectors != 0 && function_.spec.msix.vectors != 0 &&
                    (config_read16(static_cast<uint16_t>(*find_capability(cfg::kCapMsix) + cfg::kMsixFlags)) &
                     cfg::kMsixFlagsEnable);
        std::vector<UniqueFd> saved_fds = std::move(irq_fds());
        irq_fds().clear();
        function_.clear_interrupt_routes();

        uint16_t devctl = static_cast<uint16_t>(*exp + cfg::kExpDevCtl);
        config_write16(devctl, config_read16(devctl) | cfg::kExpDevCtlInitiateFlr);
        delay(kFlrWait);

        // Restore the header from 0x0c on (BARs, interrupt line), the command register last,
        // then the interrupt setup onto the caller's same eventfds.
        for (unsigned i = 3; i < header.size(); ++i) config_write32(static_cast<uint16_t>(4 * i), header[i]);
        config_write16(cfg::kCommand, static_cast<uint16_t>(header[1] & 0xffff));
        if (vectors != 0) program_interrupts(msix ? InterruptKind::MsiX : InterruptKind::Msi, std::move(saved_fds));
    }

    void delay(std::chrono::nanoseconds duration) override {
        function_.spend_ns(static_cast<uint64_t>(duration.count()));
        std::this_thread::yield();  // let model threads run, as real time passing would
    }

    std::chrono::nanoseconds now() override { return std::chrono::nanoseconds(function_.now_ns()); }

protected:
    MmioRegion map_bar(unsigned index) override {
        function_.check_not_gone("BAR mapping");
        for (const BarSpec& bar : function_.spec.bars) {
            if (bar.index == index && bar.kind == BarSpec::Kind::Memory && bar.cpu_mappable &&
                function_.bus.transport().bar_mmap) {
                return MmioRegion(fmt::format("{} BAR{}", name(), index), function_.memory[index].data(), bar_info(index).size);
            }
        }
        return MmioRegion(fmt::format("{} BAR{}", name(), index), &handlers_[index], bar_info(index).size);
    }

private:
    // `peer` names a peer BAR; empty for host memory.
    std::unique_ptr<BusMapping> map_into_iommu(std::span<std::byte> memory, std::string peer) {
        function_.check_not_gone("peer mapping");
        std::shared_ptr<IommuDomain> iommu = function_.iommu;
        const uint64_t bytes = align_up(memory.size(), uint64_t{4096}).value_or(0);
        uint64_t iova;
        {
            std::lock_guard lock(iommu->mutex);
            // 2 MiB aligned, so a GPU maps the alias with its large leaves.
            auto got = iommu->iova.allocate(bytes, 2ull << 20, dma_address_limit());
            if (!got) throw Error(name(), fmt::format("no free IOVA range of {} for a peer mapping", format_size(bytes)));
            iova = *got;
            iommu->mappings.emplace(iova, IommuDomain::Mapping{memory.size(), memory.data(), peer});
        }
        std::string what = peer.empty() ? fmt::format("{} of host memory", format_size(memory.size())) : peer;
        return std::make_unique<BusMapping>(BusAddress(iova), memory.size(), std::move(what), [iommu, iova, bytes] {
            std::lock_guard lock(iommu->mutex);
            iommu->mappings.erase(iova);
            iommu->dropped.erase(iova);
            iommu->iova.free(iova, bytes);
        });
    }

    struct BarHandler final : MmioHandler {
        BarHandler() = default;
        BarHandler(SimPciDevice* d, unsigned b) : device(d), bar(b) {}
        uint64_t mmio_read(uint64_t offset, unsigned width) override {
            return device->function_.bar_read(bar, offset, width);
        }
        void mmio_write(uint64_t offset, unsigned width, uint64_t value) override {
            device->function_.bar_write(bar, offset, width, value);
        }
        void mmio_read_block(uint64_t offset, std::span<std::byte> out) override {
            device->function_.bar_read_block(bar, offset, out);
        }
        void mmio_write_block(uint64_t offset, std::span<const std::byte> data) override {
            device->function_.bar_write_block(bar, offset, data);
        }
        SimPciDevice* device = nullptr;
        unsigned bar = 0;
    };

    // Each open gets its own slice of message data values, like vectors on a CPU.
    uint32_t allocate_message_data(unsigned vectors) {
        static std::atomic<uint32_t> next{0x100};
        uint32_t align = 1;
        while (align < vectors) align <<= 1;
        uint32_t base;
        uint32_t expected = next.load();
        do {
            base = (expected + align - 1) & ~(align - 1);
        } while (!next.compare_exchange_weak(expected, base + align));
        return base;
    }

    // Routes one message per eventfd in `fds` and programs the capability; irq_fds() takes them.
    void program_interrupts(InterruptKind kind, std::vector<UniqueFd> fds) {
        irq_fds() = std::move(fds);
        try {
            if (kind == InterruptKind::Msi) {
                enable_msi(interrupt_vectors());
            } else {
                enable_msix(interrupt_vectors());
            }
        } catch (...) {
            function_.clear_interrupt_routes();
            irq_fds().clear();
            throw;
        }
    }

    void enable_msi(unsigned vectors) {
        auto cap = find_capability(cfg::kCapMsi);
        if (!cap) throw UnsupportedError(name(), "the device has no MSI capability");
        uint16_t flags = config_read16(static_cast<uint16_t>(*cap + cfg::kMsiFlags));
        unsigned capable = 1u << ((flags & cfg::kMsiFlagsMultipleCapableMask) >> 1);
        if (vectors > capable) {
            throw UnsupportedError(name(), fmt::format("MSI supports {} vector(s), {} asked for", capable, vectors));
        }
        unsigned log2 = 0;
        while ((1u << log2) < vectors) ++log2;
        uint32_t data = allocate_message_data(1u << log2);
        for (unsigned v = 0; v < vectors; ++v) {
            function_.route_interrupt(data + v, interrupt_fd(v));
        }
        bool is64 = (flags & cfg::kMsiFlags64Bit) != 0;
        config_write32(static_cast<uint16_t>(*cap + cfg::kMsiAddressLo), static_cast<uint32_t>(kMsiAddress));
        if (is64) config_write32(static_cast<uint16_t>(*cap + cfg::kMsiAddressHi), 0);
        config_write16(static_cast<uint16_t>(*cap + (is64 ? cfg::kMsiData64 : cfg::kMsiData32)),
                       static_cast<uint16_t>(data));
        flags = static_cast<uint16_t>((flags & ~cfg::kMsiFlagsMultipleEnableMask) | (log2 << 4) | cfg::kMsiFlagsEnable);
        config_write16(static_cast<uint16_t>(*cap + cfg::kMsiFlags), flags);
    }

    void enable_msix(unsigned vectors) {
        auto cap = find_capability(cfg::kCapMsix);
        if (!cap) throw UnsupportedError(name(), "the device has no MSI-X capability");
        uint16_t flags = config_read16(static_cast<uint16_t>(*cap + cfg::kMsixFlags));
        unsigned table_size = (flags & cfg::kMsixFlagsTableSizeMask) + 1u;
        if (vectors > table_size) {
            throw UnsupportedError(name(), fmt::format("MSI-X table has {} entries, {} asked for", table_size, vectors));
        }
        uint32_t table = config_read32(static_cast<uint16_t>(*cap + cfg::kMsixTable));
        MmioRegion& region = bar(table & cfg::kMsixBirMask);
        uint64_t table_offset = table & ~cfg::kMsixBirMask;
        // Enable with the function masked while the table is programmed (PCI 3.0 6.8.2.3).
        config_write16(static_cast<uint16_t>(*cap + cfg::kMsixFlags),
                       static_cast<uint16_t>(flags | cfg::kMsixFlagsEnable | cfg::kMsixFlagsMaskAll));
        uint32_t data = allocate_message_data(vectors);
        for (unsigned v = 0; v < vectors; ++v) {
            function_.route_interrupt(data + v, interrupt_fd(v));
            BarOffset entry(table_offset + uint64_t{v} * cfg::kMsixEntrySize);
            region.write32(entry + cfg::kMsixEntryAddressLo, static_cast<uint32_t>(kMsiAddress));
            region.write32(entry + cfg::kMsixEntryAddressHi, 0);
            region.write32(entry + cfg::kMsixEntryData, data + v);
            region.write32(entry + cfg::kMsixEntryVectorControl, 0);
        }
        config_write16(static_cast<uint16_t>(*cap + cfg::kMsixFlags),
                       static_cast<uint16_t>((flags | cfg::kMsixFlagsEnable) & ~cfg::kMsixFlagsMaskAll));
    }

    SimBus::Function& function_;
    std::array<BarHandler, kBarCount> handlers_{};
};

std::unique_ptr<PciDevice> SimBus::open(PciAddress address) {
    Function& f = function(address);
    f.check_not_gone("open");
    bool expected = false;
    if (!f.opened.compare_exchange_strong(expected, true)) {
        throw BusyError(f.name, ::getpid(), "already opened by this process; close the other PciDevice first");
    }
    try {
        return std::make_unique<SimPciDevice>(f);
    } catch (...) {
        f.opened.store(false);
        throw;
    }
}

}  // namespace baregpu::pci::sim
