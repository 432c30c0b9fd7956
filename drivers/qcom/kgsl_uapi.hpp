// The KGSL ioctl interface this driver uses: request numbers, argument structs and flag values.
// Source: Linux/Android include/uapi/linux/msm_kgsl.h ("KGSL version frozen as of 3.14", the copy
// tinygrad keeps in extra/qcom_gpu_driver/msm_kgsl.h), LP64 layouts. The encoded request numbers
// are pinned below to their LP64 values, so a struct whose layout drifts fails the build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <sys/ioctl.h>

namespace baregpu::qcom::kgsl {

inline constexpr unsigned kIocType = 0x09;  // KGSL_IOC_TYPE

// KGSL_PROP_*
inline constexpr uint32_t KGSL_PROP_DEVICE_INFO = 0x1;
// enum kgsl_timestamp_type (msm_kgsl.h: CONSUMED = 1, RETIRED = 2, QUEUED = 3). RETIRED is the
// end-of-pipe timestamp; QUEUED only says what was handed to KGSL.
inline constexpr uint32_t KGSL_TIMESTAMP_RETIRED = 0x2;
inline constexpr uint32_t KGSL_TIMESTAMP_QUEUED = 0x3;
// Context flags (KGSL_CONTEXT_*).
inline constexpr uint32_t KGSL_CONTEXT_NO_GMEM_ALLOC = 0x2;
inline constexpr uint32_t KGSL_CONTEXT_PREAMBLE = 0x10;
inline constexpr uint32_t KGSL_CONTEXT_NO_FAULT_TOLERANCE = 0x200;
inline constexpr uint32_t KGSL_CONTEXT_PWR_CONSTRAINT = 0x800;
inline constexpr uint32_t KGSL_CONTEXT_PRIORITY_SHIFT = 12;  // mask 0xF000
inline constexpr uint32_t KGSL_CONTEXT_PREEMPT_STYLE_SHIFT = 25;  // mask 0x0E000000
inline constexpr uint32_t KGSL_CONTEXT_PREEMPT_STYLE_FINEGRAIN = 0x2;
// Memory flags (KGSL_MEMFLAGS_*, KGSL_MEMALIGN_*, KGSL_CACHEMODE_*).
inline constexpr uint64_t KGSL_MEMFLAGS_USE_CPU_MAP = 0x10000000;
inline constexpr uint64_t KGSL_MEMALIGN_SHIFT = 16;  // log2 of the alignment, mask 0x00FF0000
inline constexpr uint64_t KGSL_CACHEMODE_SHIFT = 26;  // mask 0x0C000000
inline constexpr uint64_t KGSL_CACHEMODE_UNCACHED = 1;
// enum kgsl_user_mem_type
inline constexpr uint32_t KGSL_USER_MEM_TYPE_ADDR = 2;
// kgsl_command_object.flags
inline constexpr uint32_t KGSL_CMDLIST_IB = 0x1;
// The mmap offset of a GPU object: its id times the page size (kgsl_mmap's "id << PAGE_SHIFT").
inline constexpr uint64_t kMmapPage = 4096;

struct kgsl_devinfo {
    uint32_t device_id;
    uint32_t chip_id;  // e.g. 0x06030000 for A630: core, major, minor, patch bytes
    uint32_t mmu_enabled;
    uint64_t gmem_gpubaseaddr;
    uint32_t gpu_id;
    uint64_t gmem_sizebytes;
};
struct kgsl_device_getproperty {
    uint32_t type;
    void* value;
    uint64_t sizebytes;
};
struct kgsl_device_waittimestamp_ctxtid {
    uint32_t context_id;
    uint32_t timestamp;
    uint32_t timeout;  // milliseconds
};
struct kgsl_drawctxt_create {
    uint32_t flags;
    uint32_t drawctxt_id;  // out
};
struct kgsl_drawctxt_destroy {
    uint32_t drawctxt_id;
};
struct kgsl_map_user_mem {
    int fd;
    uint64_t gpuaddr;  // out
    uint64_t len;
    uint64_t offset;
    uint64_t hostptr;
    uint32_t memtype;
    uint32_t flags;
};
struct kgsl_cmdstream_readtimestamp_ctxtid {
    uint32_t context_id;
    uint32_t type;
    uint32_t timestamp;  // out
};
struct kgsl_sharedmem_free {
    uint64_t gpuaddr;
};
struct kgsl_gpuobj_alloc {
    uint64_t size;
    uint64_t flags;
    uint64_t va_len;
    uint64_t mmapsize;
    uint32_t id;  // out
    uint32_t metadata_len;
    uint64_t metadata;
};
struct kgsl_gpuobj_free {
    uint64_t flags;
    uint64_t priv;
    uint32_t id;
    uint32_t type;
    uint32_t len;
};
struct kgsl_command_object {
    uint64_t offset;
    uint64_t gpuaddr;
    uint64_t size;  // bytes
    uint32_t flags;
    uint32_t id;
};
struct kgsl_gpu_command {
    uint64_t flags;
    uint64_t cmdlist;  // user pointer to kgsl_command_object[numcmds]
    uint32_t cmdsize;  // sizeof(kgsl_command_object)
    uint32_t numcmds;
    uint64_t objlist;
    uint32_t objsize;
    uint32_t numobjs;
    uint64_t synclist;
    uint32_t syncsize;
    uint32_t numsyncs;
    uint32_t context_id;
    uint32_t timestamp;  // out: the context's timestamp of this submission
};

static_assert(sizeof(kgsl_devinfo) == 40 && offsetof(kgsl_devinfo, gpu_id) == 24 && offsetof(kgsl_devinfo, gmem_sizebytes) == 32);
static_assert(sizeof(kgsl_device_getproperty) == 24 && sizeof(kgsl_device_waittimestamp_ctxtid) == 12);
static_assert(sizeof(kgsl_map_user_mem) == 48 && sizeof(kgsl_gpuobj_alloc) == 48 && sizeof(kgsl_gpuobj_free) == 32);
static_assert(sizeof(kgsl_command_object) == 32 && sizeof(kgsl_gpu_command) == 64 && offsetof(kgsl_gpu_command, context_id) == 56);

inline constexpr unsigned long IOCTL_KGSL_DEVICE_GETPROPERTY = _IOWR(kIocType, 0x02, kgsl_device_getproperty);
inline constexpr unsigned long IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID = _IOW(kIocType, 0x07, kgsl_device_waittimestamp_ctxtid);
inline constexpr unsigned long IOCTL_KGSL_DRAWCTXT_CREATE = _IOWR(kIocType, 0x13, kgsl_drawctxt_create);
inline constexpr unsigned long IOCTL_KGSL_DRAWCTXT_DESTROY = _IOW(kIocType, 0x14, kgsl_drawctxt_destroy);
inline constexpr unsigned long IOCTL_KGSL_MAP_USER_MEM = _IOWR(kIocType, 0x15, kgsl_map_user_mem);
inline constexpr unsigned long IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID = _IOWR(kIocType, 0x16, kgsl_cmdstream_readtimestamp_ctxtid);
inline constexpr unsigned long IOCTL_KGSL_SHAREDMEM_FREE = _IOW(kIocType, 0x21, kgsl_sharedmem_free);
inline constexpr unsigned long IOCTL_KGSL_GPUOBJ_ALLOC = _IOWR(kIocType, 0x45, kgsl_gpuobj_alloc);
inline constexpr unsigned long IOCTL_KGSL_GPUOBJ_FREE = _IOW(kIocType, 0x46, kgsl_gpuobj_free);
inline constexpr unsigned long IOCTL_KGSL_GPU_COMMAND = _IOWR(kIocType, 0x4A, kgsl_gpu_command);

static_assert(IOCTL_KGSL_DEVICE_GETPROPERTY == 0xc0180902 && IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID == 0x400c0907);
static_assert(IOCTL_KGSL_DRAWCTXT_CREATE == 0xc0080913 && IOCTL_KGSL_DRAWCTXT_DESTROY == 0x40040914);
static_assert(IOCTL_KGSL_MAP_USER_MEM == 0xc0300915 && IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID == 0xc00c0916);
static_assert(IOCTL_KGSL_SHAREDMEM_FREE == 0x40080921 && IOCTL_KGSL_GPUOBJ_ALLOC == 0xc0300945 && IOCTL_KGSL_GPUOBJ_FREE == 0x40200946);
static_assert(IOCTL_KGSL_GPU_COMMAND == 0xc040094a);

}  // namespace baregpu::qcom::kgsl
