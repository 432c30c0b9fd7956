// The kernel's VFIO and iommufd user interface. Everything Debian 12's headers (linux-libc-dev
// 6.1) define comes from <linux/vfio.h>; what they lack is defined here under our own names, so
// that a newer installed header cannot clash with it. Each definition cites the kernel header
// and the release that introduced it; the static_asserts pin the layouts the kernel expects.
#pragma once

#include <cstdint>
#include <linux/ioctl.h>
#include <linux/vfio.h>

namespace baregpu::pci::uapi {

// ---- include/uapi/linux/vfio.h, Linux 6.6: the VFIO device cdev (/dev/vfio/devices/vfioN) ----

// struct vfio_device_bind_iommufd; VFIO_DEVICE_BIND_IOMMUFD = _IO(VFIO_TYPE, VFIO_BASE + 18)
struct VfioDeviceBindIommufd {
    uint32_t argsz;
    uint32_t flags;
    int32_t iommufd;
    uint32_t out_devid;
};
inline constexpr unsigned long kVfioDeviceBindIommufd = _IO(VFIO_TYPE, VFIO_BASE + 18);

// struct vfio_device_attach_iommufd_pt as of 6.6 (6.13 appended `pasid`; the kernel accepts the
// shorter argsz). VFIO_DEVICE_ATTACH_IOMMUFD_PT = _IO(VFIO_TYPE, VFIO_BASE + 19)
struct VfioDeviceAttachIommufdPt {
    uint32_t argsz;
    uint32_t flags;
    uint32_t pt_id;
};
inline constexpr unsigned long kVfioDeviceAttachIommufdPt = _IO(VFIO_TYPE, VFIO_BASE + 19);

static_assert(sizeof(VfioDeviceBindIommufd) == 16);
static_assert(sizeof(VfioDeviceAttachIommufdPt) == 12);

// ---- include/uapi/linux/iommufd.h, Linux 6.2 (/dev/iommu) ----

inline constexpr unsigned kIommufdType = ';';
inline constexpr unsigned kIommufdCmdDestroy = 0x80;
inline constexpr unsigned kIommufdCmdIoasAlloc = 0x81;
inline constexpr unsigned kIommufdCmdIoasIovaRanges = 0x84;
inline constexpr unsigned kIommufdCmdIoasMap = 0x85;
inline constexpr unsigned kIommufdCmdIoasUnmap = 0x86;

// struct iommu_destroy; IOMMU_DESTROY
struct IommuDestroy {
    uint32_t size;
    uint32_t id;
};
inline constexpr unsigned long kIommuDestroy = _IO(kIommufdType, kIommufdCmdDestroy);

// struct iommu_ioas_alloc; IOMMU_IOAS_ALLOC
struct IommuIoasAlloc {
    uint32_t size;
    uint32_t flags;
    uint32_t out_ioas_id;
};
inline constexpr unsigned long kIommuIoasAlloc = _IO(kIommufdType, kIommufdCmdIoasAlloc);

// struct iommu_iova_range: an inclusive range [start, last].
struct IommuIovaRange {
    alignas(8) uint64_t start;
    alignas(8) uint64_t last;
};

// struct iommu_ioas_iova_ranges; IOMMU_IOAS_IOVA_RANGES. With too small an array the kernel
// fails with EMSGSIZE and reports the count it needs in num_iovas.
struct IommuIoasIovaRanges {
    uint32_t size;
    uint32_t ioas_id;
    uint32_t num_iovas;
    uint32_t reserved;
    alignas(8) uint64_t allowed_iovas;  // user pointer to IommuIovaRange[num_iovas]
    alignas(8) uint64_t out_iova_alignment;
};
inline constexpr unsigned long kIommuIoasIovaRanges = _IO(kIommufdType, kIommufdCmdIoasIovaRanges);

// enum iommufd_ioas_map_flags
inline constexpr uint32_t kIommuIoasMapFixedIova = 1u << 0;
inline constexpr uint32_t kIommuIoasMapWriteable = 1u << 1;
inline constexpr uint32_t kIommuIoasMapReadable = 1u << 2;

// struct iommu_ioas_map; IOMMU_IOAS_MAP
struct IommuIoasMap {
    uint32_t size;
    uint32_t flags;
    uint32_t ioas_id;
    uint32_t reserved;
    alignas(8) uint64_t user_va;
    alignas(8) uint64_t length;
    alignas(8) uint64_t iova;
};
inline constexpr unsigned long kIommuIoasMap = _IO(kIommufdType, kIommufdCmdIoasMap);

// struct iommu_ioas_unmap; IOMMU_IOAS_UNMAP
struct IommuIoasUnmap {
    uint32_t size;
    uint32_t ioas_id;
    alignas(8) uint64_t iova;
    alignas(8) uint64_t length;
};
inline constexpr unsigned long kIommuIoasUnmap = _IO(kIommufdType, kIommufdCmdIoasUnmap);

static_assert(sizeof(IommuDestroy) == 8);
static_assert(sizeof(IommuIoasAlloc) == 12);
static_assert(sizeof(IommuIovaRange) == 16);
static_assert(sizeof(IommuIoasIovaRanges) == 32);
static_assert(sizeof(IommuIoasMap) == 40);
static_assert(sizeof(IommuIoasUnmap) == 24);

}  // namespace baregpu::pci::uapi
