#include "drivers/pci/vfio_region.hpp"

#include "base/error.hpp"
#include "drivers/pci/vfio_iommu.hpp"
#include "drivers/pci/vfio_uapi.hpp"

#include <cerrno>
#include <fmt/format.h>
#include <unistd.h>

namespace baregpu::pci {

bool VfioRegion::readable() const { return (flags & VFIO_REGION_INFO_FLAG_READ) != 0; }
bool VfioRegion::writable() const { return (flags & VFIO_REGION_INFO_FLAG_WRITE) != 0; }
bool VfioRegion::mappable() const { return (flags & VFIO_REGION_INFO_FLAG_MMAP) != 0; }

VfioRegion query_vfio_region(const std::string& device, int device_fd, unsigned index) {
    std::vector<uint64_t> storage(sizeof(vfio_region_info) / 8 + 1, 0);
    auto* info = reinterpret_cast<vfio_region_info*>(storage.data());
    info->argsz = sizeof(vfio_region_info);
    info->index = index;
    if (vfio_ioctl(device_fd, VFIO_DEVICE_GET_REGION_INFO, info) != 0) {
        throw SystemError(device, fmt::format("VFIO_DEVICE_GET_REGION_INFO of region {}", index), errno);
    }
    if (info->argsz > sizeof(vfio_region_info)) {
        uint32_t needed = info->argsz;
        if (needed > (1u << 20)) {
            throw ProtocolError(device, fmt::format("VFIO_DEVICE_GET_REGION_INFO of region {} asks for a {}-byte buffer",
                                                    index, needed));
        }
        storage.assign(needed / 8 + 1, 0);
        info = reinterpret_cast<vfio_region_info*>(storage.data());
        info->argsz = needed;
        info->index = index;
        if (vfio_ioctl(device_fd, VFIO_DEVICE_GET_REGION_INFO, info) != 0) {
            throw SystemError(device, fmt::format("VFIO_DEVICE_GET_REGION_INFO of region {} with room for capabilities",
                                                  index),
                              errno);
        }
    }
    VfioRegion region;
    region.index = index;
    region.flags = info->flags;
    region.size = info->size;
    region.offset = info->offset;
    if ((info->flags & VFIO_REGION_INFO_FLAG_CAPS) && info->cap_offset != 0) {
        std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(storage.data()),
                                         std::min<size_t>(info->argsz, storage.size() * 8));
        std::string what = fmt::format("VFIO_DEVICE_GET_REGION_INFO of region {}", index);
        if (auto cap = find_vfio_capability(device, bytes, info->cap_offset, VFIO_REGION_INFO_CAP_SPARSE_MMAP, what)) {
            region.sparse = parse_sparse_mmap_capability(device, *cap, region.size);
        }
        // VFIO_REGION_INFO_CAP_MSIX_MAPPABLE (Linux 4.16+) only confirms the whole BAR may be
        // mapped, which the absence of a sparse capability already says.
    }
    return region;
}

uint64_t VfioRegionAccess::mmio_read(uint64_t offset, unsigned width) {
    uint64_t value = 0;
    ssize_t n;
    do {
        n = ::pread(fd_, &value, width, static_cast<off_t>(offset_ + offset));
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(width)) {
        throw SystemError(name_, fmt::format("{}-byte read at 0x{:x} through the VFIO device fd", width, offset),
                          n < 0 ? errno : EIO);
    }
    return value;
}

void VfioRegionAccess::mmio_write(uint64_t offset, unsigned width, uint64_t value) {
    ssize_t n;
    do {
        n = ::pwrite(fd_, &value, width, static_cast<off_t>(offset_ + offset));
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(width)) {
        throw SystemError(name_, fmt::format("{}-byte write of 0x{:x} at 0x{:x} through the VFIO device fd", width,
                                             value, offset),
                          n < 0 ? errno : EIO);
    }
}

}  // namespace baregpu::pci
