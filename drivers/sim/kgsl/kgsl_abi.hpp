// The KGSL user ABI the simulated device answers: request numbers, argument structs, flags.
// The model's own copy (a model never includes a driver), from Linux/Android
// include/uapi/linux/msm_kgsl.h (KGSL 3.14, LP64); the request numbers are pinned to their LP64
// values, so a struct whose layout drifts fails the build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <sys/ioctl.h>

namespace baregpu::sim::kgsl {

inline constexpr uint32_t KGSL_PROP_DEVICE_INFO = 0x1;
// enum kgsl_timestamp_type (msm_kgsl.h): what adreno_readtimestamp (adreno.c) answers for each.
inline constexpr uint32_t KGSL_TIMESTAMP_CONSUMED = 0x1;  // start of pipe: the CP took it
inline constexpr uint32_t KGSL_TIMESTAMP_RETIRED = 0x2;   // end of pipe: done
inline constexpr uint32_t KGSL_TIMESTAMP_QUEUED = 0x3;    // handed to KGSL
inline constexpr uint32_t KGSL_CONTEXT_NO_GMEM_ALLOC = 0x2, KGSL_CONTEXT_PREAMBLE = 0x10;
inline constexpr uint64_t KGSL_MEMFLAGS_USE_CPU_MAP = 0x10000000;
inline constexpr uint32_t KGSL_USER_MEM_TYPE_ADDR = 2;
inline constexpr uint32_t KGSL_CMDLIST_IB = 0x1;
inline constexpr uint64_t kPage = 4096;

struct devinfo {
    uint32_t device_id, chip_id, mmu_enabled;
    uint64_t gmem_gpubaseaddr;
    uint32_t gpu_id;
    uint64_t gmem_sizebytes;
};
struct getproperty {
    uint32_t type;
    void* value;
    uint64_t sizebytes;
};
struct waittimestamp_ctxtid {
    uint32_t context_id, timestamp, timeout;
};
struct drawctxt_create {
    uint32_t flags, drawctxt_id;
};
struct drawctxt_destroy {
    uint32_t drawctxt_id;
};
struct map_user_mem {
    int fd;
    uint64_t gpuaddr, len, offset, hostptr;
    uint32_t memtype, flags;
};
struct readtimestamp_ctxtid {
    uint32_t context_id, type, timestamp;
};
struct sharedmem_free {
    uint64_t gpuaddr;
};
struct gpuobj_alloc {
    uint64_t size, flags, va_len, mmapsize;
    uint32_t id, metadata_len;
    uint64_t metadata;
};
struct gpuobj_free {
    uint64_t flags, priv;
    uint32_t id, type, len;
};
struct command_object {
    uint64_t offset, gpuaddr, size;
    uint32_t flags, id;
};
struct gpu_command {
    uint64_t flags, cmdlist;
    uint32_t cmdsize, numcmds;
    uint64_t objlist;
    uint32_t objsize, numobjs;
    uint64_t synclist;
    uint32_t syncsize, numsyncs, context_id, timestamp;
};
static_assert(sizeof(devinfo) == 40 && sizeof(getproperty) == 24 && sizeof(waittimestamp_ctxtid) == 12);
static_assert(sizeof(map_user_mem) == 48 && sizeof(gpuobj_alloc) == 48 && sizeof(gpuobj_free) == 32);
static_assert(sizeof(command_object) == 32 && sizeof(gpu_command) == 64 && offsetof(gpu_command, context_id) == 56);

inline constexpr unsigned long DEVICE_GETPROPERTY = _IOWR(0x09, 0x02, getproperty);
inline constexpr unsigned long DEVICE_WAITTIMESTAMP_CTXTID = _IOW(0x09, 0x07, waittimestamp_ctxtid);
inline constexpr unsigned long DRAWCTXT_CREATE = _IOWR(0x09, 0x13, drawctxt_create);
inline constexpr unsigned long DRAWCTXT_DESTROY = _IOW(0x09, 0x14, drawctxt_destroy);
inline constexpr unsigned long MAP_USER_MEM = _IOWR(0x09, 0x15, map_user_mem);
inline constexpr unsigned long CMDSTREAM_READTIMESTAMP_CTXTID = _IOWR(0x09, 0x16, readtimestamp_ctxtid);
inline constexpr unsigned long SHAREDMEM_FREE = _IOW(0x09, 0x21, sharedmem_free);
inline constexpr unsigned long GPUOBJ_ALLOC = _IOWR(0x09, 0x45, gpuobj_alloc);
inline constexpr unsigned long GPUOBJ_FREE = _IOW(0x09, 0x46, gpuobj_free);
inline constexpr unsigned long GPU_COMMAND = _IOWR(0x09, 0x4A, gpu_command);
static_assert(DEVICE_GETPROPERTY == 0xc0180902 && DEVICE_WAITTIMESTAMP_CTXTID == 0x400c0907 && DRAWCTXT_CREATE == 0xc0080913);
static_assert(DRAWCTXT_DESTROY == 0x40040914 && MAP_USER_MEM == 0xc0300915 && CMDSTREAM_READTIMESTAMP_CTXTID == 0xc00c0916);
static_assert(SHAREDMEM_FREE == 0x40080921 && GPUOBJ_ALLOC == 0xc0300945 && GPUOBJ_FREE == 0x40200946 && GPU_COMMAND == 0xc040094a);

}  // namespace baregpu::sim::kgsl
