// Host memory a device can DMA to: pinned pages with their bus addresses.
#pragma once

#include "base/address.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace baregpu::pci {

enum class PageSize : uint64_t {
    k4K = 4096,
    k2M = 2u << 20,  // hugetlbfs pages; allocation fails with UnsupportedError when none are reserved
};

// Owns its memory and its IOMMU mapping; both go away with it. The CPU view and the bus
// addresses stay valid (pinned) for the buffer's whole life.
class DmaBuffer {
public:
    // `pages` holds the bus address of every page in order; a single entry means the buffer is
    // contiguous on the bus from that address. `release` unmaps and frees; it must not throw.
    DmaBuffer(std::string owner, std::span<std::byte> cpu, PageSize page_size, std::vector<BusAddress> pages,
              std::function<void()> release);
    ~DmaBuffer();
    DmaBuffer(const DmaBuffer&) = delete;
    DmaBuffer& operator=(const DmaBuffer&) = delete;

    std::span<std::byte> cpu() const { return cpu_; }
    uint64_t size() const { return cpu_.size(); }
    PageSize page_size() const { return page_size_; }
    uint64_t page_bytes() const { return static_cast<uint64_t>(page_size_); }

    // One bus range covers the whole buffer (vfio and sim always; sysfs with one huge page).
    bool contiguous() const { return pages_.size() == 1; }
    // The bus address of byte `offset`. Throws when offset is outside the buffer.
    BusAddress bus_address(uint64_t offset = 0) const;
    // Bus address of each page (page_bytes() each); one entry when contiguous.
    std::span<const BusAddress> pages() const { return pages_; }

private:
    std::string owner_;
    std::span<std::byte> cpu_;
    PageSize page_size_;
    std::vector<BusAddress> pages_;
    std::function<void()> release_;
};

}  // namespace baregpu::pci
