// Anonymous host memory for DMA: 4 KiB pages or 2 MiB hugetlbfs pages, excluded from fork()
// (a child's copy-on-write must never move a page the device is writing), optionally locked.
#pragma once

#include "drivers/pci/dma_buffer.hpp"

#include <cstddef>
#include <span>
#include <string>

namespace baregpu::pci {

class HostMemory {
public:
    // size is rounded up to whole pages. `lock`: mlock() the pages (sysfs, where nothing else
    // pins them). Throws UnsupportedError when 2 MiB pages are asked for and none are free
    // (the message says how to reserve them), SystemError otherwise.
    static HostMemory allocate(const std::string& device, uint64_t size, PageSize page_size, bool lock);

    HostMemory(HostMemory&& other) noexcept;
    HostMemory& operator=(HostMemory&&) = delete;
    HostMemory(const HostMemory&) = delete;
    ~HostMemory();

    std::span<std::byte> bytes() const { return bytes_; }
    PageSize page_size() const { return page_size_; }

    // Give up ownership (the caller munmaps later with release_mapping()).
    std::span<std::byte> release();
    static void release_mapping(std::span<std::byte> bytes);

    // HugePages_Free of /proc/meminfo (2 MiB pages free now); 0 when unreadable.
    static uint64_t free_huge_pages();

private:
    HostMemory(std::span<std::byte> bytes, PageSize page_size) : bytes_(bytes), page_size_(page_size) {}
    std::span<std::byte> bytes_;
    PageSize page_size_;
};

}  // namespace baregpu::pci
