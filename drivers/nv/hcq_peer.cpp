// NvHcqDevice's bus peers (hcq::Device::map_bus_peer): the peer window after the HCQ VA window,
// mapped through the platform (NvPeerAccess: SYS aperture PTEs) at the IOVAs drivers/pci hands out
// for a peer's BAR (VRAM) or host memory. Our own VRAM is exported to peers as BAR1 offsets. Over
// nvrm there is no peer access: nvidia.ko owns the page tables.
#include "base/error.hpp"
#include "drivers/nv/hcq_device.hpp"

#include <fmt/format.h>

namespace baregpu::nv {

NvPeerAccess& NvHcqDevice::peer_access() {
    if (NvPeerAccess* access = platform_->peer_access()) return *access;
    throw UnsupportedError(name(), fmt::format("bus peers need a platform that owns the GPU's page tables (nvpci); over {} they "
                                               "cannot be mapped",
                                               platform_->reporter()));
}

std::unique_ptr<pci::PeerWindow> NvHcqDevice::make_peer_window() {
    NvPeerAccess* access = platform_->peer_access();
    if (access == nullptr) return nullptr;
    if (kVaBase + options_.va_bytes + options_.peer_va_bytes > (1ull << 40)) {
        throw Error(name(), fmt::format("the peer window of {:#x} bytes after the VA window passes 2^40", options_.peer_va_bytes));
    }
    pci::PeerWindow::PageTableOps ops;
    ops.map = [this, access](uint64_t va, uint64_t bus, uint64_t size) {
        std::lock_guard lock(memory_mutex_);
        access->map_bus(GpuVirtualAddress(va), bus, size);
    };
    ops.unmap = [this, access](uint64_t va, uint64_t size) {
        std::lock_guard lock(memory_mutex_);
        access->unmap_bus(GpuVirtualAddress(va), size);
    };
    ops.flush = [] {};  // PageTable invalidates as it writes
    return std::make_unique<pci::PeerWindow>(access->pci(), name(), kVaBase + options_.va_bytes, options_.peer_va_bytes, std::move(ops));
}

bool NvHcqDevice::check_iommu_faults() {
    // Not a GPU MMU fault (the GPU's own translation succeeded), so GSP-RM reports nothing: the
    // copy engine stops on the failed transfer, and only the platform knows why.
    if (!peers_) return false;
    std::vector<pci::IommuFaultRecord> refused = peer_access().pci().take_iommu_faults();
    if (refused.empty()) return false;
    fail(fmt::format("{}{}; queues: {}", peers_->describe_iommu_fault(refused.front()),
                     refused.size() > 1 ? fmt::format(" (and {} more IOMMU faults)", refused.size() - 1) : "", queue_state()));
    return true;
}

pci::PciDevice& NvHcqDevice::peer_pci() { return peer_access().pci(); }

uint64_t NvHcqDevice::peer_memory_bytes() const {
    NvPeerAccess* access = platform_->peer_access();
    return access != nullptr ? access->vram_bytes() : 0;
}

GpuVirtualAddress NvHcqDevice::map_bus_peer(hcq::Device& owner, GpuVirtualAddress address, uint64_t size) {
    if (&owner == this) return address;
    peer_access();  // refuses over nvrm, naming why
    auto* exporter = dynamic_cast<pci::PeerMemoryExporter*>(&owner);
    if (exporter == nullptr) {
        throw UnsupportedError(name(), fmt::format("cannot reach memory of {}: it is not a PCI device with its memory behind a BAR",
                                                   owner.name()));
    }
    return GpuVirtualAddress(peers_->map(*exporter, owner.name(), address.value(), size));
}

std::vector<pci::PeerMemoryExporter::Segment> NvHcqDevice::peer_segments(uint64_t va, uint64_t size) {
    NvPeerAccess& access = peer_access();
    std::lock_guard lock(memory_mutex_);
    return access.segments(va, size);
}

}  // namespace baregpu::nv
