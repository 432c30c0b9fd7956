// Virtual to physical address translation through /proc/self/pagemap
// (Documentation/admin-guide/mm/pagemap.rst): one 64-bit entry per virtual page, bit 63 "page
// present", bits 0-54 the page frame number. Since Linux 4.2 the PFN reads as 0 without
// CAP_SYS_ADMIN; that is reported, never returned as address 0.
//
// A physical address stays valid only while the page cannot move: the memory must be locked
// (mlock) and, even then, the kernel may migrate locked 4 KiB pages when it compacts memory
// (vm.compact_unevictable_allowed). Hugetlbfs pages are not compacted. This is one reason the
// backends that use it (sysfs, vfio no-IOMMU) are unsafe by nature.
#pragma once

#include "base/unique_fd.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace baregpu::pci {

namespace pagemap {
inline constexpr uint64_t kPresent = 1ull << 63;
inline constexpr uint64_t kSwapped = 1ull << 62;
inline constexpr uint64_t kPfnMask = (1ull << 55) - 1;  // bits 0-54
}  // namespace pagemap

class Pagemap {
public:
    // Opens <proc_root>/self/pagemap. `device` names errors.
    Pagemap(std::string device, const std::string& proc_root);

    // The physical address of the byte at `address`. The page must be resident (touch it first).
    // Throws UnsupportedError when the kernel hides PFNs (not CAP_SYS_ADMIN: run as root), Error
    // when the page is not present or swapped out.
    uint64_t physical_address(const void* address) const;

    // Physical address of every `page_size` page of `range` (which starts page aligned). For huge
    // pages the first 4 KiB page's frame must be aligned to page_size, else ProtocolError (it is
    // not one huge page).
    std::vector<uint64_t> physical_pages(std::span<const std::byte> range, uint64_t page_size) const;

    const std::string& path() const { return path_; }

private:
    uint64_t entry(uintptr_t virtual_page) const;

    std::string device_;
    std::string path_;
    UniqueFd fd_;
    uint64_t kernel_page_size_;
};

}  // namespace baregpu::pci
