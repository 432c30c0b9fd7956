// Hands out I/O virtual address ranges: the addresses we choose for host buffers when we map
// them into a device's IOMMU domain (vfio type1, the simulated bus). First fit over a sorted
// free list with neighbour coalescing, so freeing everything restores one range.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace baregpu::pci {

class IovaAllocator {
public:
    struct Range {
        uint64_t start;
        uint64_t end;  // exclusive
    };

    // `usable`: the ranges the IOMMU accepts (vfio reports them; holes such as the x86 MSI
    // window 0xfee00000 are left out by the caller). Overlapping ranges are merged.
    explicit IovaAllocator(std::vector<Range> usable);

    // A range of `size` bytes aligned to `alignment` (a power of two) that ends at or below
    // `limit` (exclusive: 1 << dma_address_bits). nullopt when none fits.
    std::optional<uint64_t> allocate(uint64_t size, uint64_t alignment, uint64_t limit);
    // Returns a range from allocate(); freeing what was not allocated is a logic error and throws.
    void free(uint64_t start, uint64_t size);

    uint64_t bytes_free() const;
    size_t fragments() const { return free_.size(); }

private:
    std::map<uint64_t, uint64_t> free_;  // start -> end (exclusive)
};

}  // namespace baregpu::pci
