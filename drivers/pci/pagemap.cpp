#include "drivers/pci/pagemap.hpp"

#include "base/error.hpp"

#include <cerrno>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

namespace baregpu::pci {

Pagemap::Pagemap(std::string device, const std::string& proc_root)
    : device_(std::move(device)), path_(proc_root + "/self/pagemap"),
      kernel_page_size_(static_cast<uint64_t>(::sysconf(_SC_PAGESIZE))) {
    fd_ = UniqueFd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd_) throw SystemError(device_, fmt::format("cannot open {} to find physical addresses", path_), errno);
}

uint64_t Pagemap::entry(uintptr_t virtual_page) const {
    uint64_t value = 0;
    off_t at = static_cast<off_t>(virtual_page * sizeof value);
    ssize_t n;
    do {
        n = ::pread(fd_.get(), &value, sizeof value, at);
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(sizeof value)) {
        throw SystemError(device_, fmt::format("read of the entry of virtual page 0x{:x} from {}",
                                               virtual_page * kernel_page_size_, path_),
                          n < 0 ? errno : EIO);
    }
    return value;
}

uint64_t Pagemap::physical_address(const void* address) const {
    uintptr_t va = reinterpret_cast<uintptr_t>(address);
    uint64_t e = entry(va / kernel_page_size_);
    if ((e & pagemap::kPresent) == 0) {
        throw Error(device_, fmt::format("virtual address 0x{:x} is not resident ({} entry 0x{:016x}{}): DMA memory "
                                         "must be populated and locked",
                                         va, path_, e, (e & pagemap::kSwapped) ? ", swapped out" : ""));
    }
    uint64_t pfn = e & pagemap::kPfnMask;
    if (pfn == 0) {
        throw UnsupportedError(device_, fmt::format("{} hides physical frame numbers (entry 0x{:016x}): reading them "
                                                    "needs CAP_SYS_ADMIN; run as root",
                                                    path_, e));
    }
    return pfn * kernel_page_size_ + va % kernel_page_size_;
}

std::vector<uint64_t> Pagemap::physical_pages(std::span<const std::byte> range, uint64_t page_size) const {
    std::vector<uint64_t> pages;
    if (page_size < kernel_page_size_ || page_size % kernel_page_size_ != 0) {
        throw Error(device_, fmt::format("page size {} is not a multiple of the kernel's {}", page_size,
                                         kernel_page_size_));
    }
    pages.reserve(range.size() / page_size);
    for (uint64_t off = 0; off < range.size(); off += page_size) {
        uint64_t phys = physical_address(range.data() + off);
        if (phys % page_size != 0) {
            throw ProtocolError(device_, fmt::format("the page at virtual 0x{:x} sits at physical 0x{:x}, which is not "
                                                     "{}-byte aligned: it is not one {}-byte page",
                                                     reinterpret_cast<uintptr_t>(range.data() + off), phys, page_size,
                                                     page_size));
        }
        pages.push_back(phys);
    }
    return pages;
}

}  // namespace baregpu::pci
