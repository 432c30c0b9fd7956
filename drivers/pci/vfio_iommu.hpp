// The IOMMU side of a VFIO device: what the device's DMA goes through, and how we get the device
// file descriptor. Two kernel interfaces provide it:
//   - the type1 container + group (/dev/vfio/vfio, /dev/vfio/<group>; every kernel with VFIO),
//     which also carries no-IOMMU mode (/dev/vfio/noiommu-<group>, VFIO_NOIOMMU_IOMMU);
//   - iommufd + the device cdev (/dev/iommu, /dev/vfio/devices/vfioN; Linux 6.6+).
// Both are built here and used the same way by the device (vfio_device.cpp).
#pragma once

#include "base/unique_fd.hpp"
#include "drivers/pci/iommu_group.hpp"
#include "drivers/pci/iova_ranges.hpp"
#include "drivers/pci/open.hpp"

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace baregpu::pci {

class VfioIommu {
public:
    virtual ~VfioIommu() = default;

    // "type1v2 container with group 14 (/dev/vfio/14)", for messages.
    virtual std::string describe() const = 0;
    // No-IOMMU mode: nothing translates; DMA uses physical addresses (physical_dma.hpp).
    virtual bool noiommu() const { return false; }

    // The windows DMA mappings may use, as the kernel reported them (empty: it did not say).
    const std::vector<IovaWindow>& valid_iova() const { return valid_; }
    // The smallest IOMMU page size; IOVAs and lengths are multiples of it.
    uint64_t iova_page_size() const { return page_size_; }

    // Maps `memory` (page aligned, host virtual) at `iova` for device reads and writes; the kernel
    // pins the pages. Throws SystemError saying what limit was hit (RLIMIT_MEMLOCK, mapping count).
    virtual void map_dma(std::span<std::byte> memory, uint64_t iova) = 0;
    // Removes a mapping made by map_dma. Never throws (it runs from DmaBuffer's destructor); a
    // failure is reported on stderr and returns false, and the caller must then not reuse the IOVA.
    virtual bool unmap_dma(uint64_t iova, uint64_t size) noexcept = 0;

protected:
    explicit VfioIommu(std::string device) : device_(std::move(device)) {}
    std::string device_;
    std::vector<IovaWindow> valid_;
    uint64_t page_size_ = 4096;
};

// An opened VFIO device: its IOMMU context (shared with the DMA buffers, which may outlive the
// device) and the device file descriptor.
struct VfioHandle {
    std::shared_ptr<VfioIommu> iommu;
    UniqueFd device;
};

// Type1 container + group: API version check, extension check (VFIO_TYPE1v2_IOMMU, or
// VFIO_NOIOMMU_IOMMU for a no-IOMMU group), group viability (VFIO_GROUP_GET_STATUS; a group that
// is not viable is reported with the functions holding it up), VFIO_GROUP_SET_CONTAINER,
// VFIO_SET_IOMMU, VFIO_IOMMU_GET_INFO (page sizes, valid IOVA ranges), VFIO_GROUP_GET_DEVICE_FD.
VfioHandle open_vfio_group(PciAddress address, const IommuGroup& group, const OpenOptions& options);

// iommufd + device cdev: VFIO_DEVICE_BIND_IOMMUFD, IOMMU_IOAS_ALLOC, VFIO_DEVICE_ATTACH_IOMMUFD_PT,
// IOMMU_IOAS_IOVA_RANGES. `cdev` is the name under <device>/vfio-dev ("vfio0").
VfioHandle open_vfio_cdev(PciAddress address, const std::string& cdev, const IommuGroup& group,
                          const OpenOptions& options);

// The device cdev's name ("vfio0") from <sysfs_root>/bus/pci/devices/<address>/vfio-dev/vfioN/dev;
// nullopt when the kernel made none (before 6.6, CONFIG_VFIO_DEVICE_CDEV off, or not on vfio-pci).
std::optional<std::string> vfio_cdev_name(const std::string& sysfs_root, PciAddress address);

// Opens a VFIO or iommufd node, turning the usual failures into messages that say what to do.
// `missing_hint` is appended when the node does not exist.
UniqueFd open_vfio_node(const std::string& device, const std::string& path, const std::string& missing_hint);

// ioctl() retried on EINTR.
int vfio_ioctl(int fd, unsigned long request, void* arg);
int vfio_ioctl(int fd, unsigned long request, unsigned long arg);

}  // namespace baregpu::pci
