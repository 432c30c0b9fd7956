// The window of a GPU's VA space where it maps its bus peers' memory (hcq::Device::map_bus_peer).
// Devices of different vendors have separate GPU VA spaces, so a peer's buffer cannot be reached
// at its own address: it gets an alias here, backed by this device's IOMMU mappings of the
// peer's BAR (PciDevice::map_peer_bar) or of the peer's host memory (map_foreign_host). The
// driver supplies the page-table steps; this class does the bookkeeping both drivers share:
// alias VAs, the large-BAR check, retiring by timeline value, and naming a faulting alias.
// Thread-safe.
#pragma once

#include "drivers/pci/iova_allocator.hpp"
#include "drivers/pci/pci_device.hpp"
#include "drivers/pci/peer_mapping.hpp"

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::pci {

class PeerWindow {
public:
    struct PageTableOps {
        // Map [va, va + size) to bus address `bus` as system (non-local) pages; no TLB flush yet.
        std::function<void(uint64_t va, uint64_t bus, uint64_t size)> map;
        std::function<void(uint64_t va, uint64_t size)> unmap;  // must not throw
        std::function<void()> flush;  // TLB flush after a batch of map / unmap
    };
    // [va_base, va_base + va_size): a part of the device's VA space its own allocations never use.
    PeerWindow(PciDevice& self, std::string device_name, uint64_t va_base, uint64_t va_size, PageTableOps ops);
    ~PeerWindow();

    // Maps [va, va + size) of `owner` (named `owner_name`) and returns the alias of `va`.
    // Throws UnsupportedError naming why the platform refuses (PciDevice::map_peer_bar,
    // require_large_bar) and Error when the window is full.
    uint64_t map(PeerMemoryExporter& owner, const std::string& owner_name, uint64_t va, uint64_t size);
    // Everything mapped since the last retire() may go once the timeline reaches `value`.
    void retire(uint64_t value) noexcept;
    // Unmaps what retired at or below `completed`.
    void collect(uint64_t completed) noexcept;
    // When `va` lies in a live alias: "VA 0x.. is the peer mapping of <what> (IOVA 0x..) for
    // <owner> VA 0x..". For fault messages.
    std::optional<std::string> describe(uint64_t va) const;
    // The same for a bus address (an IOVA the IOMMU refused): which alias it backs.
    std::optional<std::string> describe_bus(uint64_t address) const;
    // An IOMMU fault of this device's DMA, for its error state: "missing peer mapping: ..." when
    // the address backs a peer alias, else what the IOMMU refused.
    std::string describe_iommu_fault(const IommuFaultRecord& fault) const;
    size_t live() const;

private:
    struct Alias {
        uint64_t va = 0, size = 0;  // the alias range (page aligned)
        std::string owner;
        uint64_t owner_va = 0;
        std::vector<std::unique_ptr<BusMapping>> bus;  // one per segment, in order
        uint64_t retire_at = 0;  // 0: not retired yet
    };

    PciDevice& self_;
    std::string name_;
    PageTableOps ops_;
    mutable std::mutex mutex_;
    IovaAllocator va_;
    std::vector<Alias> aliases_;
};

}  // namespace baregpu::pci
