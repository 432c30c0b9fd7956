#include "drivers/pci/physical_dma.hpp"

#include "base/error.hpp"
#include "drivers/pci/bar.hpp"
#include "drivers/pci/host_memory.hpp"
#include "drivers/pci/pagemap.hpp"

#include <fmt/format.h>

namespace baregpu::pci {

std::unique_ptr<DmaBuffer> alloc_physical_dma(const std::string& device, const std::string& proc_root, uint64_t size,
                                              PageSize page_size, uint64_t limit) {
    Pagemap pagemap(device, proc_root);
    HostMemory memory = HostMemory::allocate(device, size, page_size, /*lock=*/true);
    uint64_t page = static_cast<uint64_t>(page_size);
    std::vector<uint64_t> physical = pagemap.physical_pages(memory.bytes(), page);

    bool consecutive = true;
    for (size_t i = 0; i < physical.size(); ++i) {
        uint64_t p = physical[i];
        if (p > limit || limit - p < page) {
            throw UnsupportedError(device, fmt::format("DMA page {} of {} is at physical 0x{:x}, at or above the "
                                                       "device's DMA limit 0x{:x}: the device cannot reach it (without "
                                                       "an IOMMU, memory is where the kernel put it; use the vfio "
                                                       "backend)",
                                                       i, format_size(memory.bytes().size()), p, limit));
        }
        if (i > 0 && physical[i] != physical[i - 1] + page) consecutive = false;
    }
    std::vector<BusAddress> pages;
    if (consecutive) {
        pages.emplace_back(physical.front());
    } else {
        pages.reserve(physical.size());
        for (uint64_t p : physical) pages.emplace_back(p);
    }
    std::span<std::byte> cpu = memory.release();
    return std::make_unique<DmaBuffer>(device, cpu, page_size, std::move(pages),
                                       [cpu] { HostMemory::release_mapping(cpu); });
}

}  // namespace baregpu::pci
