#include "drivers/pci/host_memory.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"
#include "drivers/pci/bar.hpp"

#include <cerrno>
#include <fmt/format.h>
#include <fstream>
#include <linux/mman.h>
#include <sys/mman.h>

namespace baregpu::pci {

uint64_t HostMemory::free_huge_pages() {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    uint64_t value = 0;
    while (meminfo >> key) {
        if (key == "HugePages_Free:") {
            meminfo >> value;
            return value;
        }
        meminfo.ignore(1 << 10, '\n');
    }
    return 0;
}

HostMemory HostMemory::allocate(const std::string& device, uint64_t size, PageSize page_size, bool lock) {
    uint64_t page = static_cast<uint64_t>(page_size);
    auto rounded = align_up(size == 0 ? 1 : size, page);
    if (!rounded) throw Error(device, fmt::format("DMA buffer size 0x{:x} overflows when rounded to pages", size));
    // Shared, not private: the memory is the device's as much as ours, and a simulated device may
    // alias it (mremap of a shared mapping) where its shaders run as host code.
    int flags = MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE;
    if (page_size == PageSize::k2M) flags |= MAP_HUGETLB | MAP_HUGE_2MB;
    void* p = ::mmap(nullptr, *rounded, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) {
        int err = errno;
        if (page_size == PageSize::k2M) {
            throw UnsupportedError(device, fmt::format("cannot allocate {} of 2 MiB huge pages ({} free): reserve "
                                                       "them with `echo N | sudo tee "
                                                       "/proc/sys/vm/nr_hugepages` ({})",
                                                       format_size(*rounded), free_huge_pages(),
                                                       SystemError::errno_text(err)));
        }
        throw SystemError(device, fmt::format("mmap of {} for DMA", format_size(*rounded)), err);
    }
    std::span<std::byte> bytes(static_cast<std::byte*>(p), *rounded);
    if (::madvise(p, *rounded, MADV_DONTFORK) != 0) {
        int err = errno;
        ::munmap(p, *rounded);
        throw SystemError(device, "madvise(MADV_DONTFORK) on a DMA buffer", err);
    }
    if (lock && ::mlock(p, *rounded) != 0) {
        int err = errno;
        ::munmap(p, *rounded);
        throw SystemError(device, fmt::format("mlock of {} for DMA (raise RLIMIT_MEMLOCK: `ulimit -l`, or "
                                              "/etc/security/limits.conf for the baregpu group)",
                                              format_size(*rounded)),
                          err);
    }
    return HostMemory(bytes, page_size);
}

HostMemory::HostMemory(HostMemory&& other) noexcept : bytes_(other.release()), page_size_(other.page_size_) {}

HostMemory::~HostMemory() { release_mapping(bytes_); }

std::span<std::byte> HostMemory::release() { return std::exchange(bytes_, {}); }

void HostMemory::release_mapping(std::span<std::byte> bytes) {
    if (!bytes.empty()) ::munmap(bytes.data(), bytes.size());
}

}  // namespace baregpu::pci
