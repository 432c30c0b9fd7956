// A VFIO device region (include/uapi/linux/vfio.h, VFIO_DEVICE_GET_REGION_INFO): a window of
// the device fd that carries one BAR, the ROM or config space — its size, where it sits in the
// fd, whether it may be mmapped, and (sparse mmap capability) which parts of it may.
#pragma once

#include "drivers/pci/mmio_region.hpp"
#include "drivers/pci/vfio_caps.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::pci {

struct VfioRegion {
    unsigned index = 0;
    uint32_t flags = 0;  // VFIO_REGION_INFO_FLAG_*
    uint64_t size = 0;
    uint64_t offset = 0;  // in the device fd
    // Present when the kernel restricts mmap to these areas (the MSI-X table of a BAR on kernels
    // that do not let it be mapped).
    std::optional<std::vector<SparseArea>> sparse;

    bool readable() const;
    bool writable() const;
    bool mappable() const;
};

// VFIO_DEVICE_GET_REGION_INFO for `index`, capabilities included (a second call with the size
// the first one asked for).
VfioRegion query_vfio_region(const std::string& device, int device_fd, unsigned index);

// Carries MMIO accesses to a region that cannot be mmapped with pread/pwrite on the device fd.
class VfioRegionAccess final : public MmioHandler {
public:
    VfioRegionAccess(std::string name, int device_fd, uint64_t region_offset)
        : name_(std::move(name)), fd_(device_fd), offset_(region_offset) {}
    uint64_t mmio_read(uint64_t offset, unsigned width) override;
    void mmio_write(uint64_t offset, unsigned width, uint64_t value) override;

private:
    std::string name_;
    int fd_;  // not owned: the device's fd outlives its regions
    uint64_t offset_;
};

}  // namespace baregpu::pci
