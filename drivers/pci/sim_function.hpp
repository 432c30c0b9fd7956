// The simulated bus's state for one attached function, and the SimPort its model talks to.
// Internal to drivers/pci (sim_bus.cpp, sim_pci_device.cpp); models only see SimPort.
#pragma once

#include "drivers/pci/iova_allocator.hpp"
#include "drivers/pci/sim_bus.hpp"
#include "drivers/pci/sim_config_space.hpp"

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace baregpu::pci::sim {

// The IOMMU domain of one function: which IOVA ranges map which host bytes. Shared with the
// DmaBuffers it handed out, so a buffer freed late still unmaps safely.
struct IommuDomain {
    struct Mapping {
        uint64_t size;
        std::byte* host;
        // A peer's BAR ("BAR0+0x0 of sim:0000:00:02.0 (bus address 0x4000000000)"); empty for host memory.
        std::string peer = {};
    };
    std::mutex mutex;
    std::map<uint64_t, Mapping> mappings;  // iova -> mapping
    std::map<uint64_t, Mapping> dropped;  // peer mappings SimBus::drop_peer_mappings removed, for fault messages
    IovaAllocator iova;

    IommuDomain();
    // Host bytes for [address, address + length), or false if any byte is unmapped. *peer: whether
    // any of them is a peer's BAR rather than host memory.
    bool translate(uint64_t address, uint64_t length, std::vector<std::span<std::byte>>& out, bool* peer = nullptr);
};

struct SimBus::Function final : SimPort {
    Function(SimBus& bus, PciAddress address, std::unique_ptr<SimDeviceModel> model,
             const std::array<uint64_t, kBarCount>& bar_addresses);
    ~Function() override;  // disconnects the model before any member goes

    // SimPort
    bool dma_read(BusAddress address, std::span<std::byte> out) override;
    std::byte* dma_host_memory(BusAddress address, uint64_t bytes) override;
    bool with_host_memory(BusAddress address, uint64_t bytes, const std::function<void(std::span<std::byte>)>& use) override;
    bool dma_write(BusAddress address, std::span<const std::byte> data) override;
    void raise_interrupt(unsigned vector) override;
    std::span<std::byte> bar_memory(unsigned bar) override;
    bool bus_master_enabled() override;
    void violation(const std::string& what, const std::string& where, const std::string& source) override;
    uint64_t now_ns() const override { return bus.now_ns(); }
    void spend_ns(uint64_t ns) override { bus.clock_ns_.fetch_add(ns, std::memory_order_relaxed); }
    const std::string& device_name() const override { return name; }

    // The driver side, called by SimPciDevice.
    uint32_t config_read(uint16_t offset, unsigned width);
    void config_write(uint16_t offset, unsigned width, uint32_t value);
    uint64_t bar_read(unsigned bar, uint64_t offset, unsigned width);
    void bar_write(unsigned bar, uint64_t offset, unsigned width, uint64_t value);
    void bar_read_block(unsigned bar, uint64_t offset, std::span<std::byte> out);
    void bar_write_block(unsigned bar, uint64_t offset, std::span<const std::byte> data);

    // Interrupt routing, set up by the opener like an irqfd: MSI message data -> eventfd.
    void route_interrupt(uint32_t message_data, int eventfd);
    void clear_interrupt_routes();

    void charge(uint64_t ns);
    void check_not_gone(const char* operation) const;
    bool removed() const { return removed_.load(std::memory_order_acquire); }

    SimBus& bus;
    const PciAddress address;
    const std::string name;
    const std::unique_ptr<SimDeviceModel> model;
    const DeviceSpec spec;
    std::array<std::span<std::byte>, kBarCount> memory;  // Memory BARs: the bus's bytes or the model's
    // Memory BARs without BarSpec::storage: anonymous pages, zero until touched. A 1 GiB VRAM BAR
    // costs nothing until the driver writes it (a zeroed vector faulted in all of it at every open).
    struct ZeroPages {
        std::span<std::byte> bytes;
        ZeroPages() = default;
        ZeroPages(const ZeroPages&) = delete;
        ZeroPages& operator=(const ZeroPages&) = delete;
        ~ZeroPages();
    };
    std::array<ZeroPages, kBarCount> owned_memory;
    std::shared_ptr<IommuDomain> iommu = std::make_shared<IommuDomain>();
    std::atomic<bool> opened{false};
    std::vector<IommuFaultRecord> unread_iommu_faults;  // under bus.mutex_, for the opener (take_iommu_faults)

    struct LiveCounters {
        std::atomic<uint64_t> config_reads{0}, config_writes{0}, mmio_reads{0}, mmio_writes{0}, mmio_bytes_read{0},
            mmio_bytes_written{0}, dma_reads{0}, dma_writes{0}, dma_bytes_read{0}, dma_bytes_written{0},
            interrupts_delivered{0}, interrupts_dropped{0}, completion_timeouts{0}, iommu_faults{0}, modelled_ns{0}, peer_reads{0},
            peer_writes{0}, peer_bytes_read{0}, peer_bytes_written{0}, dma_ns{0};
    } counters;

private:
    struct MsixEntry {
        uint64_t address = 0;
        uint32_t data = 0;
        uint32_t control = cfg::kMsixEntryMasked;  // masked at reset (PCI 3.0 6.8.2.9)
    };

    bool memory_decode_enabled(const char* access, unsigned bar, uint64_t offset);
    bool completion_times_out(unsigned bar, uint64_t offset, unsigned width);
    bool in_msix_table(unsigned bar, uint64_t offset) const;
    bool in_msix_pba(unsigned bar, uint64_t offset) const;
    uint64_t msix_read(unsigned bar, uint64_t offset, unsigned width);
    void msix_write(unsigned bar, uint64_t offset, unsigned width, uint64_t value);
    void deliver_pending_locked();
    void deliver_locked(uint64_t address, uint32_t data);
    void function_level_reset();
    void record_iommu_fault(uint64_t address, uint64_t length, bool write);
    bool dma(uint64_t address, uint64_t length, bool write, const std::function<void(std::span<std::byte>, uint64_t)>& copy);

    std::mutex config_mutex_;
    SimConfigSpace config_;
    uint64_t flr_done_at_ns_ = 0;

    std::mutex irq_mutex_;  // MSI-X table, pending bits, routes
    std::vector<MsixEntry> msix_;
    std::vector<bool> msix_pending_;
    std::map<uint32_t, int> routes_;

    std::mutex fault_mutex_;
    std::vector<Fault> faults_;
    std::atomic<bool> removed_{false};
    std::atomic<bool> gone_{false};

    friend class SimBus;
};

}  // namespace baregpu::pci::sim
