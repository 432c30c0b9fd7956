// DMA memory addressed by physical address: for the backends without an IOMMU in the path
// (sysfs, vfio no-IOMMU mode), where the bus address of a page is its physical address.
#pragma once

#include "drivers/pci/dma_buffer.hpp"

#include <memory>
#include <string>

namespace baregpu::pci {

// Allocates locked host memory (HostMemory with mlock) and finds its physical pages through
// <proc_root>/self/pagemap. Pages at or above `limit` (the device's dma_address_limit()) are
// refused: the device could not reach them. A buffer whose pages are physically consecutive
// (always so for one huge page) is contiguous() on the bus. See pagemap.hpp for why these
// addresses are only as stable as the kernel lets them be.
std::unique_ptr<DmaBuffer> alloc_physical_dma(const std::string& device, const std::string& proc_root, uint64_t size,
                                              PageSize page_size, uint64_t limit);

}  // namespace baregpu::pci
