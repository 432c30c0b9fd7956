// nvidia.ko's escape ioctls on /dev/nvidiactl and /dev/nvidiaN: numbers and argument layouts.
// Sources (open-gpu-kernel-modules 570.144): kernel-open/common/inc/nv-ioctl-numbers.h
// (NV_IOCTL_MAGIC 'F', NV_IOCTL_BASE 200), src/nvidia/arch/nvalloc/unix/include/nv_escape.h
// (NV_ESC_RM_*), src/common/sdk/nvidia/inc/nvos.h (NVOS00/21/54_PARAMETERS),
// kernel-open/common/inc/nv-ioctl.h (nv_ioctl_card_info_t, nv_pci_info_t).
#pragma once

#include "drivers/nv/rm_abi.hpp"

#include <cstddef>
#include <cstdint>

namespace baregpu::nv::nvrm {

inline constexpr uint32_t NV_IOCTL_MAGIC = 'F';
inline constexpr uint32_t NV_ESC_RM_ALLOC_MEMORY = 0x27;
inline constexpr uint32_t NV_ESC_RM_FREE = 0x29;
inline constexpr uint32_t NV_ESC_RM_CONTROL = 0x2A;
inline constexpr uint32_t NV_ESC_RM_ALLOC = 0x2B;
inline constexpr uint32_t NV_ESC_RM_MAP_MEMORY = 0x4E;
inline constexpr uint32_t NV_ESC_RM_MAP_MEMORY_DMA = 0x57;
inline constexpr uint32_t NV_ESC_CARD_INFO = 200;
inline constexpr uint32_t NV_ESC_REGISTER_FD = 201;

// The request number of an escape: _IOWR('F', nr, size) (nv-ioctl-numbers.h builds them so).
constexpr unsigned long escape_request(uint32_t nr, uint32_t size) {
    return (3ul << 30) | (static_cast<unsigned long>(size & 0x3fff) << 16) | (NV_IOCTL_MAGIC << 8) | nr;
}

struct Nvos00Parameters {  // NV01_FREE
    NvHandle hRoot;
    NvHandle hObjectParent;
    NvHandle hObjectOld;
    uint32_t status;
};
static_assert(sizeof(Nvos00Parameters) == 16);

struct Nvos21Parameters {  // NV04_ALLOC
    NvHandle hRoot;
    NvHandle hObjectParent;
    NvHandle hObjectNew;
    uint32_t hClass;
    uint64_t pAllocParms;  // NvP64
    uint32_t paramsSize;
    uint32_t status;
};
static_assert(sizeof(Nvos21Parameters) == 32);

struct Nvos54Parameters {  // NV04_CONTROL
    NvHandle hClient;
    NvHandle hObject;
    uint32_t cmd;
    uint32_t flags;
    uint64_t params;  // NvP64
    uint32_t paramsSize;
    uint32_t status;
};
static_assert(sizeof(Nvos54Parameters) == 32);

struct Nvos02Parameters {  // NV01_ALLOC_MEMORY
    NvHandle hRoot;
    NvHandle hObjectParent;
    NvHandle hObjectNew;
    uint32_t hClass;
    uint32_t flags;
    uint32_t pad;
    uint64_t pMemory;  // NvP64
    uint64_t limit;
    uint32_t status;
    uint32_t pad1;
};
static_assert(sizeof(Nvos02Parameters) == 48);
// NVOS02_FLAGS_* (nvos.h): PHYSICALITY 7:4, LOCATION 11:8, COHERENCY 15:12, MAPPING 31:30.
inline constexpr uint32_t kNvos02PhysicalityNoncontiguous = 1u << 4;
inline constexpr uint32_t kNvos02LocationPci = 0u << 8;
inline constexpr uint32_t kNvos02CoherencyCached = 1u << 12;
inline constexpr uint32_t kNvos02MappingNoMap = 1u << 30;

struct Nvos33Parameters {  // NV04_MAP_MEMORY
    NvHandle hClient;
    NvHandle hDevice;
    NvHandle hMemory;
    uint32_t pad;
    uint64_t offset;
    uint64_t length;
    uint64_t pLinearAddress;  // NvP64, out: what to mmap
    uint32_t status;
    uint32_t flags;  // NVOS33_FLAGS_CACHING_TYPE 25:23 (CACHED 0, UNCACHED 1, WRITECOMBINED 2)
};
static_assert(sizeof(Nvos33Parameters) == 48);
inline constexpr uint32_t kNvos33CachingShift = 23;

// nv-unix-nvos-params-wrappers.h: the escape carries the fd the mapping will be mmap()ed from.
struct Nvos02WithFd {
    Nvos02Parameters params;
    int32_t fd;
    uint32_t pad;
};
struct Nvos33WithFd {
    Nvos33Parameters params;
    int32_t fd;
    uint32_t pad;
};
static_assert(sizeof(Nvos02WithFd) == 56 && sizeof(Nvos33WithFd) == 56);

// NVOS46_PARAMETERS (NV04_MAP_MEMORY_DMA) differs per branch: 570 ends {flags, dmaOffset, status}
// (56 bytes); 580 and later have {flags, flags2, kindOverride, dmaOffset, status} (64 bytes).
struct Nvos46Parameters570 {
    NvHandle hClient, hDevice, hDma, hMemory;
    uint64_t offset;
    uint64_t length;
    uint32_t flags;
    uint32_t pad;
    uint64_t dmaOffset;
    uint32_t status;
    uint32_t pad1;
};
struct Nvos46Parameters580 {
    NvHandle hClient, hDevice, hDma, hMemory;
    uint64_t offset;
    uint64_t length;
    uint32_t flags;
    uint32_t flags2;
    uint32_t kindOverride;
    uint32_t pad;
    uint64_t dmaOffset;
    uint32_t status;
    uint32_t pad1;
};
static_assert(sizeof(Nvos46Parameters570) == 56 && offsetof(Nvos46Parameters570, dmaOffset) == 40);
static_assert(sizeof(Nvos46Parameters580) == 64 && offsetof(Nvos46Parameters580, dmaOffset) == 48);
// NVOS46_FLAGS_* (nvos.h): ACCESS 1:0, CACHE_SNOOP 4:4, PAGE_SIZE 11:8 (4KB 1, BIG 2, HUGE 4),
// DMA_OFFSET_FIXED 15:15.
inline constexpr uint32_t kNvos46CacheSnoop = 1u << 4;
inline constexpr uint32_t kNvos46PageSize4k = 1u << 8;
inline constexpr uint32_t kNvos46PageSizeHuge = 4u << 8;
inline constexpr uint32_t kNvos46DmaOffsetFixed = 1u << 15;

struct NvPciInfo {
    uint32_t domain;
    uint8_t bus, slot, function, pad;
    uint16_t vendor_id, device_id;
};
struct NvIoctlCardInfo {
    uint8_t valid;  // NvBool
    uint8_t pad0[3];
    NvPciInfo pci_info;
    uint32_t gpu_id;
    uint16_t interrupt_line;
    uint16_t pad1;
    uint64_t reg_address, reg_size, fb_address, fb_size;
    uint32_t minor_number;
    uint8_t dev_name[10];
    uint8_t pad2[2];
};
static_assert(sizeof(NvIoctlCardInfo) == 72 && offsetof(NvIoctlCardInfo, minor_number) == 56);
inline constexpr uint32_t kCardInfoEntries = 64;  // the array NV_ESC_CARD_INFO fills (nv-ioctl-numbers.h usage)

struct NvIoctlRegisterFd {
    int32_t ctl_fd;
};

inline constexpr unsigned long kIoctlAlloc = escape_request(NV_ESC_RM_ALLOC, sizeof(Nvos21Parameters));
inline constexpr unsigned long kIoctlControl = escape_request(NV_ESC_RM_CONTROL, sizeof(Nvos54Parameters));
inline constexpr unsigned long kIoctlFree = escape_request(NV_ESC_RM_FREE, sizeof(Nvos00Parameters));
inline constexpr unsigned long kIoctlCardInfo = escape_request(NV_ESC_CARD_INFO, sizeof(NvIoctlCardInfo) * kCardInfoEntries);
inline constexpr unsigned long kIoctlRegisterFd = escape_request(NV_ESC_REGISTER_FD, sizeof(NvIoctlRegisterFd));
inline constexpr unsigned long kIoctlAllocMemory = escape_request(NV_ESC_RM_ALLOC_MEMORY, sizeof(Nvos02WithFd));
inline constexpr unsigned long kIoctlMapMemory = escape_request(NV_ESC_RM_MAP_MEMORY, sizeof(Nvos33WithFd));
inline constexpr unsigned long kIoctlMapMemoryDma570 = escape_request(NV_ESC_RM_MAP_MEMORY_DMA, sizeof(Nvos46Parameters570));
inline constexpr unsigned long kIoctlMapMemoryDma580 = escape_request(NV_ESC_RM_MAP_MEMORY_DMA, sizeof(Nvos46Parameters580));
// Pinned request numbers: a struct whose size drifts from nvos.h / nv-ioctl.h changes them and fails here.
static_assert(kIoctlAlloc == 0xc020462b && kIoctlControl == 0xc020462a && kIoctlFree == 0xc0104629);
static_assert(kIoctlCardInfo == 0xd20046c8 && kIoctlRegisterFd == 0xc00446c9);
static_assert(kIoctlAllocMemory == 0xc0384627 && kIoctlMapMemory == 0xc038464e && kIoctlMapMemoryDma570 == 0xc0384657);

}  // namespace baregpu::nv::nvrm
