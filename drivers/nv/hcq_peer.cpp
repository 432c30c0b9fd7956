// NvHcqDevice's bus peers (hcq::Device::map_bus_peer): the peer window after the HCQ VA window,
// mapped with SYS aperture PTEs at the IOVAs drivers/pci hands out for a peer's BAR (VRAM) or
// host memory. The PEER aperture is for NVLink / NVIDIA-to-NVIDIA BAR1 mailboxes; a BAR behind
// the IOMMU is reached like system memory (non-coherent: nothing to snoop). Our own VRAM is
// exported to peers as BAR1 offsets (BAR1 shows all of VRAM, checked at open).
#include "base/error.hpp"
#include "drivers/nv/hcq_device.hpp"
#include "drivers/nv/mmu_format.hpp"

#include <fmt/format.h>

namespace baregpu::nv {

std::unique_ptr<pci::PeerWindow> NvHcqDevice::make_peer_window() {
    if (kVaBase + options_.va_bytes + options_.peer_va_bytes > (1ull << 40)) {
        throw Error(name(), fmt::format("the peer window of {:#x} bytes after the VA window passes 2^40", options_.peer_va_bytes));
    }
    pci::PeerWindow::PageTableOps ops;
    ops.map = [this](uint64_t va, uint64_t bus, uint64_t size) {
        std::lock_guard lock(memory_mutex_);
        pt_->map(GpuVirtualAddress(va), bus, size, PteAttributes{.aperture = Aperture::sys_noncoherent, .volatile_ = true});
    };
    ops.unmap = [this](uint64_t va, uint64_t size) {
        std::lock_guard lock(memory_mutex_);
        try {
            pt_->unmap(GpuVirtualAddress(va), size);
        } catch (const std::exception&) {
        }
    };
    ops.flush = [] {};  // PageTable invalidates as it writes
    return std::make_unique<pci::PeerWindow>(*pci_, name(), kVaBase + options_.va_bytes, options_.peer_va_bytes, std::move(ops));
}

bool NvHcqDevice::check_iommu_faults() {
    // Not a GPU MMU fault (the GPU's own translation succeeded), so GSP-RM reports nothing: the
    // copy engine stops on the failed transfer, and only the platform knows why.
    std::vector<pci::IommuFaultRecord> refused = pci_->take_iommu_faults();
    if (refused.empty()) return false;
    fail(fmt::format("{}{}; queues: {}", peers_->describe_iommu_fault(refused.front()),
                     refused.size() > 1 ? fmt::format(" (and {} more IOMMU faults)", refused.size() - 1) : "", queue_state()));
    return true;
}

uint64_t NvHcqDevice::peer_memory_bytes() const { return gsp_->vram_bytes(); }

GpuVirtualAddress NvHcqDevice::map_bus_peer(hcq::Device& owner, GpuVirtualAddress address, uint64_t size) {
    if (&owner == this) return address;
    auto* exporter = dynamic_cast<pci::PeerMemoryExporter*>(&owner);
    if (exporter == nullptr) {
        throw UnsupportedError(name(), fmt::format("cannot reach memory of {}: it is not a PCI device with its memory behind a BAR",
                                                   owner.name()));
    }
    return GpuVirtualAddress(peers_->map(*exporter, owner.name(), address.value(), size));
}

std::vector<pci::PeerMemoryExporter::Segment> NvHcqDevice::peer_segments(uint64_t va, uint64_t size) {
    std::lock_guard lock(memory_mutex_);
    std::vector<Segment> out;
    for (uint64_t at = va, left = size; left > 0;) {
        auto it = mappings_.upper_bound(at);
        if (it == mappings_.begin()) throw Error(name(), fmt::format("GPU VA {:#x} is not mapped: a peer cannot reach it", at));
        --it;
        uint64_t offset = at - it->first;
        const uint64_t before = left;
        if (it->second.host) {
            const pci::DmaBuffer& host = *it->second.host;
            if (offset < host.size()) {
                const uint64_t n = std::min(left, host.size() - offset);
                out.push_back({n, 0, host.cpu().subspan(offset, n)});
                left -= n;
            }
        } else {
            for (const VramBlock& b : it->second.vram.blocks) {
                if (left == 0) break;
                if (offset >= b.size) {
                    offset -= b.size;
                    continue;
                }
                const uint64_t n = std::min(left, b.size - offset);
                out.push_back({n, b.offset + offset, {}});
                left -= n;
                offset = 0;
            }
        }
        if (left == before) throw Error(name(), fmt::format("GPU VA {:#x} is not mapped: a peer cannot reach it", at));
        at += before - left;
    }
    return out;
}

}  // namespace baregpu::nv
