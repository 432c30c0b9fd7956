// The interface between the simulated bus and a device model (drivers/sim). A model is the
// device's side of the link: it answers register accesses and, through its SimPort, DMAs into
// host memory and raises interrupts. Config space semantics, BAR decoding, the IOMMU, MSI and
// MSI-X delivery, counters, latency and fault injection belong to the bus, not the model.
#pragma once

#include "base/address.hpp"
#include "drivers/pci/pci_device.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace baregpu::pci::sim {

struct BarSpec {
    enum class Kind {
        Registers,  // every access goes to SimDeviceModel::mmio_read/mmio_write
        Memory,  // plain memory (VRAM): the bus holds the bytes, the model reads them via its port
    };
    unsigned index = 0;
    uint64_t size = 0;  // power of two, >= 16 (PCI Local Bus Spec 6.2.5.1)
    bool is_64bit = false;
    bool prefetchable = false;
    Kind kind = Kind::Registers;
    // Memory BARs only: the bytes, when the model owns them (a file mapping that outlives the
    // process, so a "crash" leaves VRAM as the hardware would). Exactly `size` bytes; the model
    // keeps them alive while it is attached. Empty: the bus allocates zeroed bytes.
    std::span<std::byte> storage = {};
    // Memory BARs only: map_bar hands the driver the bytes themselves, as mmap of a real BAR
    // does, so it may keep pointers into device memory (rings, signals, buffers). Accesses through
    // that mapping bypass the bus's counters, latency model and removal checks; the block and
    // register paths (read_block, read32, ...) through the same region are direct too.
    bool cpu_mappable = false;
};

struct MsixSpec {
    unsigned vectors = 0;  // 0: no MSI-X capability
    unsigned table_bar = 0;
    uint32_t table_offset = 0;  // 8-byte aligned; the bus serves the table there
    unsigned pba_bar = 0;
    uint32_t pba_offset = 0;
};

// An extended capability the model wants in config space (Resizable BAR, vendor-specific...).
// The bus links them into the list from 0x100 in the order given.
struct ExtendedCapabilitySpec {
    uint16_t id = 0;
    uint8_t version = 1;
    std::vector<uint8_t> body;  // the bytes after the 4-byte header
    std::vector<uint8_t> writable;  // per-byte writable bit mask for body; empty = read-only
};

struct DeviceSpec {
    PciIdentity identity;
    std::vector<BarSpec> bars;
    unsigned msi_vectors = 0;  // 0: no MSI capability; else 1, 2, 4, ... 32
    MsixSpec msix;
    bool pci_express = false;  // a PCI Express capability (and 4 KiB config space)
    bool function_level_reset = false;  // DevCap FLR (needs pci_express)
    std::vector<ExtendedCapabilitySpec> extended_capabilities;  // needs pci_express
};

// What the bus offers a model. All calls are thread-safe: a model may DMA and raise
// interrupts from its own threads.
class SimPort {
public:
    virtual ~SimPort() = default;

    // Device-initiated reads/writes of host memory at a bus address (an IOVA). false when
    // the transfer failed as it would on hardware: bus mastering is off (the model also gets
    // a violation recorded), an IOVA is not mapped (an IOMMU fault, recorded), or the device
    // has been removed. No partial success: on false nothing was written.
    virtual bool dma_read(BusAddress address, std::span<std::byte> out) = 0;
    virtual bool dma_write(BusAddress address, std::span<const std::byte> data) = 0;

    // The host bytes behind [address, address + bytes) when one IOMMU mapping covers them all
    // and bus mastering is on, else nullptr (nothing recorded). For models that must alias host
    // memory rather than copy it (a shader mirror running kernels as host code); every other
    // access goes through dma_read / dma_write. The bytes stay valid while the driver keeps the
    // mapping, which the model cannot know: use them only while the driver's work runs.
    virtual std::byte* dma_host_memory(BusAddress address, uint64_t bytes) = 0;
    // For a model that keeps such an alias between accesses (GSP-RM's message queues): runs `use`
    // on the host bytes behind [address, address + bytes) while the driver cannot unmap them, and
    // returns false without calling it once any byte is unmapped (the driver freed the memory, as a
    // torn-down device does; a real device's DMA would fault in the IOMMU). `use` must not DMA.
    // The default holds nothing: ports whose memory cannot go away while the model runs.
    virtual bool with_host_memory(BusAddress address, uint64_t bytes, const std::function<void(std::span<std::byte>)>& use) {
        std::byte* host = dma_host_memory(address, bytes);
        if (host == nullptr) return false;
        use({host, bytes});
        return true;
    }
    // Signals interrupt vector `vector` through MSI or MSI-X as the driver configured them.
    // Masked vectors stay pending (MSI-X PBA); unconfigured ones are dropped and counted.
    virtual void raise_interrupt(unsigned vector) = 0;

    // Whether the driver has bus mastering on (PCI_COMMAND bit 2): models whose protocol wants it
    // off (an AMD mode1 reset) check it.
    virtual bool bus_master_enabled() = 0;

    // The bytes of a Memory BAR (VRAM) for the model's own engines.
    virtual std::span<std::byte> bar_memory(unsigned bar) = 0;

    // The driver did something the hardware or its firmware would refuse. `where` locates it
    // (register, offset), `source` names the public document that says so.
    virtual void violation(const std::string& what, const std::string& where, const std::string& source) = 0;

    // Modelled time since the bus was created, in ns.
    virtual uint64_t now_ns() const = 0;
    // Adds device-side time (a DMA engine's work) to the modelled clock.
    virtual void spend_ns(uint64_t ns) = 0;
    // The device's timestamp counter, in ns (what a GPU writes for a timestamp packet; the host
    // compares it with its own clock). The modelled clock, where emulation runs slower than the
    // modelled device; a port whose modelled clock runs ahead of the host (a slow link) reads wall
    // time instead.
    virtual uint64_t timestamp_ns() { return now_ns(); }

    // The name of the function this model sits at, for its own messages.
    virtual const std::string& device_name() const = 0;
};

class SimDeviceModel {
public:
    virtual ~SimDeviceModel() = default;

    // The device's shape. Read once when the model is attached.
    virtual DeviceSpec spec() const = 0;

    // Called once when attached; the port lives as long as the model stays on the bus.
    virtual void connect(SimPort& port) { port_ = &port; }
    // Called once when the function leaves the bus, while the port still works and before any
    // of it is torn down: a model that runs its own threads (engines) stops them here.
    virtual void disconnect() {}

    // Register BAR accesses. width is 1, 2, 4 or 8 and offset is aligned to it and inside the
    // BAR. Accesses to the MSI-X table and PBA never arrive here.
    virtual uint64_t mmio_read(unsigned bar, uint64_t offset, unsigned width) = 0;
    virtual void mmio_write(unsigned bar, uint64_t offset, unsigned width, uint64_t value) = 0;

    // Function-level reset: back to the power-on state (config space is the bus's business).
    virtual void function_reset() = 0;

    // Lets the model's own engines (threads) run until they are idle or waiting on memory, for at
    // most `bound` of wall time (an engine may be running a kernel that waits for the host). A
    // link that is slow next to the device (a USB bridge: 100 µs per round trip) calls it before
    // the host observes memory the device writes, so the device's progress per modelled round trip
    // does not depend on how the host's threads happen to be scheduled. Default: nothing to run.
    virtual void settle(std::chrono::milliseconds bound) { (void)bound; }

protected:
    SimPort& port() const { return *port_; }

private:
    SimPort* port_ = nullptr;
};

}  // namespace baregpu::pci::sim
