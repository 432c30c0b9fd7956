#include "drivers/pci/peer_window.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"
#include "drivers/pci/pci_device.hpp"

#include <fmt/format.h>

namespace baregpu::pci {

namespace {
constexpr uint64_t kPage = 4096, k2M = 2ull << 20;
}

PeerWindow::PeerWindow(PciDevice& self, std::string device_name, uint64_t va_base, uint64_t va_size, PageTableOps ops)
    : self_(self), name_(std::move(device_name)), ops_(std::move(ops)), va_({{va_base, va_base + va_size}}) {}

PeerWindow::~PeerWindow() {
    std::lock_guard lock(mutex_);
    for (Alias& a : aliases_) ops_.unmap(a.va, a.size);
    if (!aliases_.empty()) ops_.flush();
    aliases_.clear();
}

uint64_t PeerWindow::map(PeerMemoryExporter& owner, const std::string& owner_name, uint64_t va, uint64_t size) {
    if (size == 0) throw Error(name_, fmt::format("a peer mapping of 0 bytes at {:#x} of {}", va, owner_name));
    const uint64_t begin = va & ~(kPage - 1);
    const std::optional<uint64_t> last = checked_add<uint64_t>(va, size);
    const std::optional<uint64_t> end = last ? align_up(*last, kPage) : std::nullopt;
    if (!end) throw Error(name_, fmt::format("a peer mapping of {:#x} bytes at {:#x} of {} wraps", size, va, owner_name));
    PciDevice& peer = owner.peer_pci();
    // Peers reach device memory only through the BAR: all of it must show (no small BAR).
    require_large_bar(peer, owner.peer_bar(), owner.peer_memory_bytes());
    std::vector<PeerMemoryExporter::Segment> segments = owner.peer_segments(begin, *end - begin);

    Alias alias;
    alias.size = *end - begin;
    alias.owner = owner_name;
    alias.owner_va = begin;
    for (const PeerMemoryExporter::Segment& s : segments) {
        alias.bus.push_back(s.host.empty() ? self_.map_peer_bar(peer, owner.peer_bar(), s.bar_offset, s.size)
                                           : self_.map_foreign_host(s.host));
    }
    std::lock_guard lock(mutex_);
    std::optional<uint64_t> at = va_.allocate(alias.size, alias.size >= k2M ? k2M : kPage, ~uint64_t{0});
    if (!at) {
        throw Error(name_, fmt::format("the peer window is full: no room for {} of {} ({} free)", format_size(alias.size), owner_name,
                                       format_size(va_.bytes_free())));
    }
    alias.va = *at;
    uint64_t offset = 0;
    try {
        for (const auto& m : alias.bus) {
            ops_.map(alias.va + offset, m->address().value(), m->size());
            offset += m->size();
        }
        ops_.flush();
    } catch (...) {
        if (offset != 0) ops_.unmap(alias.va, offset);
        va_.free(alias.va, alias.size);
        throw;
    }
    const uint64_t result = alias.va + (va - begin);
    aliases_.push_back(std::move(alias));
    return result;
}

void PeerWindow::retire(uint64_t value) noexcept {
    std::lock_guard lock(mutex_);
    for (Alias& a : aliases_) {
        if (a.retire_at == 0) a.retire_at = value;
    }
}

void PeerWindow::collect(uint64_t completed) noexcept {
    std::lock_guard lock(mutex_);
    bool any = false;
    for (auto it = aliases_.begin(); it != aliases_.end();) {
        if (it->retire_at == 0 || it->retire_at > completed) {
            ++it;
            continue;
        }
        ops_.unmap(it->va, it->size);
        try {
            va_.free(it->va, it->size);
        } catch (...) {
        }
        it = aliases_.erase(it);
        any = true;
    }
    if (any) ops_.flush();
}

std::optional<std::string> PeerWindow::describe(uint64_t va) const {
    std::lock_guard lock(mutex_);
    for (const Alias& a : aliases_) {
        if (va < a.va || va - a.va >= a.size) continue;
        uint64_t offset = va - a.va;
        for (const auto& m : a.bus) {
            if (offset < m->size()) {
                return fmt::format("VA {:#x} is {}'s peer mapping of {} VA {:#x}: {} at IOVA {:#x}", va, name_, a.owner,
                                   a.owner_va + (va - a.va), m->what(), m->address().value() + offset);
            }
            offset -= m->size();
        }
    }
    return std::nullopt;
}

std::optional<std::string> PeerWindow::describe_bus(uint64_t address) const {
    std::lock_guard lock(mutex_);
    for (const Alias& a : aliases_) {
        uint64_t offset = 0;
        for (const auto& m : a.bus) {
            const uint64_t bus = m->address().value();
            if (address >= bus && address - bus < m->size()) {
                return fmt::format("{}'s peer mapping of {} VA {:#x} (alias VA {:#x}): {} at IOVA {:#x}", name_, a.owner,
                                   a.owner_va + offset + (address - bus), a.va + offset + (address - bus), m->what(), address);
            }
            offset += m->size();
        }
    }
    return std::nullopt;
}

std::string PeerWindow::describe_iommu_fault(const IommuFaultRecord& fault) const {
    const char* access = fault.write ? "write" : "read";
    if (std::optional<std::string> peer = describe_bus(fault.address.value())) {
        return fmt::format("missing peer mapping: the IOMMU of {} refused a DMA {} of {} bytes into {}; the mapping is gone from "
                           "its IOMMU domain",
                           self_.name(), access, fault.length, *peer);
    }
    return fmt::format("IOMMU fault: the IOMMU of {} refused a DMA {} of {} bytes at IOVA {}, which nothing maps", self_.name(), access,
                       fault.length, fault.address.hex());
}

size_t PeerWindow::live() const {
    std::lock_guard lock(mutex_);
    return aliases_.size();
}

}  // namespace baregpu::pci
