// Which I/O virtual addresses we hand out behind an IOMMU. The kernel reports the windows a
// DMA mapping may use (type1: VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE; iommufd:
// IOMMU_IOAS_IOVA_RANGES), with reserved regions such as the x86 MSI window already cut out.
#pragma once

#include "drivers/pci/iova_allocator.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace baregpu::pci {

// An IOVA window as the kernel reports it: [start, last], both inclusive.
struct IovaWindow {
    uint64_t start;
    uint64_t last;
};

// Interrupt messages on x86 (Intel SDM vol. 3, 11.11.1): DMA writes there are MSIs, never memory.
inline constexpr IovaWindow kX86MsiWindow{0xfee00000, 0xfeefffff};

// The ranges the IovaAllocator gets: each valid window shrunk to whole `page_size` pages, with
// IOVA page 0 left out (a device that DMAs to bus address 0 has nearly always been handed an
// uninitialized address; a fault there is better than silent success). With no windows reported
// (type1 before Linux 5.4) the whole 64-bit space minus kX86MsiWindow. The device's own limit
// (dma_address_limit()) is applied per allocation.
std::vector<IovaAllocator::Range> usable_iova_ranges(std::span<const IovaWindow> valid, uint64_t page_size);

// "0x1000-0xfedfffff, 0xfef00000-0xffffffffffff" for error messages.
std::string describe_iova_windows(std::span<const IovaWindow> windows);

}  // namespace baregpu::pci
