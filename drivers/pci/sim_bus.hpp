// An in-process PCI bus for simulated devices. Models (drivers/sim) attach at addresses; a
// driver opens a function and gets a PciDevice that behaves like one opened through VFIO:
// config space with register semantics, BARs (register callbacks or memory), DMA through an
// IOMMU (an unmapped IOVA faults), MSI/MSI-X to eventfds, function-level reset. The bus
// counts transactions, models each transport's latency, injects faults and records the
// protocol violations its models report.
#pragma once

#include "base/address.hpp"
#include "drivers/pci/pci_device.hpp"
#include "drivers/pci/sim_device_model.hpp"
#include "drivers/pci/sim_transport.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace baregpu::pci::sim {

// Per-function transaction counters. A snapshot; the bus keeps the live ones.
struct Counters {
    uint64_t config_reads = 0;
    uint64_t config_writes = 0;
    uint64_t mmio_reads = 0;
    uint64_t mmio_writes = 0;
    uint64_t mmio_bytes_read = 0;
    uint64_t mmio_bytes_written = 0;
    uint64_t dma_reads = 0;  // device-initiated transfers from host memory (peer BARs not included)
    uint64_t dma_writes = 0;
    uint64_t dma_bytes_read = 0;
    uint64_t dma_bytes_written = 0;
    uint64_t interrupts_delivered = 0;
    uint64_t interrupts_dropped = 0;  // raised while not configured (MSI off, no route)
    uint64_t completion_timeouts = 0;
    uint64_t iommu_faults = 0;
    uint64_t modelled_ns = 0;  // link time spent by this function's transactions
    // Device-initiated transfers that landed in another function's BAR through a peer mapping
    // (PciDevice::map_peer_bar): reads from / writes into the peer's memory, not host memory.
    uint64_t peer_reads = 0;
    uint64_t peer_writes = 0;
    uint64_t peer_bytes_read = 0;
    uint64_t peer_bytes_written = 0;
    uint64_t dma_ns = 0;  // the part of modelled_ns spent on device-initiated transfers (host and peer)
};

struct IommuFault {
    std::string device;
    BusAddress address;
    uint64_t length = 0;
    bool write = false;  // device write to host memory
    // What the IOVA was, when it was a peer mapping that is gone (SimBus::drop_peer_mappings).
    std::string missing_peer_mapping;
    std::string describe() const;
};

struct ProtocolViolation {
    std::string device;
    std::string what;
    std::string where;
    std::string source;  // the public document that says the hardware refuses it
    std::string describe() const;
};

enum class FaultKind {
    // Surprise removal: every config and MMIO read returns all-ones, writes are dropped, the
    // device can no longer DMA or interrupt. What a driver sees when a card is yanked.
    SurpriseRemoval,
    // The next `count` MMIO reads inside [offset, offset + length) of `bar` never complete:
    // each returns all-ones after the transport's completion timeout.
    CompletionTimeout,
    // The device is gone and the backend knows it (VFIO answers ENODEV, the USB bridge
    // disconnected): every PciDevice operation throws DeviceLostError.
    DeviceGone,
};

struct Fault {
    FaultKind kind = FaultKind::SurpriseRemoval;
    unsigned bar = 0;  // CompletionTimeout only
    uint64_t offset = 0;
    uint64_t length = ~uint64_t{0};
    uint64_t count = ~uint64_t{0};
};

class SimBus {
public:
    explicit SimBus(Transport transport = Transport::pcie_gen4_x16());
    ~SimBus();
    SimBus(const SimBus&) = delete;
    SimBus& operator=(const SimBus&) = delete;

    const Transport& transport() const { return transport_; }

    // Attaches a model at the next free device number on bus 0 (or at `address`) and assigns
    // its BARs bus addresses as firmware would. Returns where it sits.
    PciAddress attach(std::unique_ptr<SimDeviceModel> model);
    PciAddress attach(std::unique_ptr<SimDeviceModel> model, PciAddress address);

    // Opens a function like VFIO does: memory decode on, bus mastering off, BARs sized
    // through config space. One opener at a time (BusyError otherwise, naming this process).
    std::unique_ptr<PciDevice> open(PciAddress address);

    std::vector<PciAddress> functions() const;
    SimDeviceModel& model(PciAddress address);

    Counters counters(PciAddress address) const;
    void reset_counters(PciAddress address);
    uint64_t now_ns() const { return clock_ns_.load(std::memory_order_relaxed); }

    void inject(PciAddress address, Fault fault);
    // Removes every peer mapping (PciDevice::map_peer_bar) from the function's IOMMU domain behind
    // its driver's back, as a platform that tears down a peer's mapping would: the next DMA through
    // one faults, and the fault names the mapping that was there. Returns how many went.
    size_t drop_peer_mappings(PciAddress address);
    void clear_faults(PciAddress address);

    // Everything models reported, oldest first; and the IOMMU faults.
    std::vector<ProtocolViolation> violations() const;
    std::vector<IommuFault> iommu_faults() const;
    void clear_violations();

    struct Function;  // per-attached-function state (sim_bus.cpp)

private:
    friend class SimPciDevice;
    Function& function(PciAddress address) const;

    Transport transport_;
    std::atomic<uint64_t> clock_ns_{0};
    mutable std::mutex mutex_;  // functions_, violations_, iommu_faults_
    std::vector<std::unique_ptr<Function>> functions_;
    std::vector<ProtocolViolation> violations_;
    std::vector<IommuFault> iommu_faults_;
    uint64_t next_bar32_ = 0xe0000000;  // where "firmware" places 32-bit BARs
    uint64_t next_bar64_ = 0x4000000000;  // and 64-bit ones
};

}  // namespace baregpu::pci::sim
