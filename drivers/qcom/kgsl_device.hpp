// One open KGSL device file (/dev/kgsl-3d0) and the ioctls drivers/qcom uses, each a small
// function named after it. Errors throw baregpu::Error naming the device, the ioctl and the errno;
// the timestamp calls return the errno instead (their callers decide what a failure means).
#pragma once

#include "drivers/qcom/kgsl_syscalls.hpp"
#include "drivers/qcom/kgsl_uapi.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace baregpu::qcom {

class KgslDevice {
public:
    // Opens `path` through `sys`. Throws baregpu::Error (with `name`) when it cannot.
    KgslDevice(std::shared_ptr<KgslSyscalls> sys, std::string path, std::string name);
    ~KgslDevice();
    KgslDevice(const KgslDevice&) = delete;
    KgslDevice& operator=(const KgslDevice&) = delete;

    const std::string& name() const { return name_; }
    KgslSyscalls& syscalls() { return *sys_; }

    // IOCTL_KGSL_DEVICE_GETPROPERTY(KGSL_PROP_DEVICE_INFO).
    kgsl::kgsl_devinfo device_info();
    // IOCTL_KGSL_DRAWCTXT_CREATE / _DESTROY.
    uint32_t drawctxt_create(uint32_t flags);
    void drawctxt_destroy(uint32_t context_id) noexcept;

    // IOCTL_KGSL_GPUOBJ_ALLOC with KGSL_MEMFLAGS_USE_CPU_MAP, then mmap of the object at `fixed`
    // (MAP_FIXED): with USE_CPU_MAP the GPU address is the CPU address (SVM). Returns the id.
    uint32_t gpuobj_alloc_at(void* fixed, uint64_t size, bool uncached);
    // munmap + IOCTL_KGSL_GPUOBJ_FREE.
    void gpuobj_free(uint32_t id, void* cpu, uint64_t size) noexcept;
    // IOCTL_KGSL_MAP_USER_MEM of host pages [hostptr, hostptr + len) (page aligned): the GPU address.
    uint64_t map_user_mem(uint64_t hostptr, uint64_t len);
    // IOCTL_KGSL_SHAREDMEM_FREE.
    void sharedmem_free(uint64_t gpuaddr) noexcept;

    // IOCTL_KGSL_GPU_COMMAND with one IB: the context's timestamp of the submission. Throws
    // baregpu::Error with the errno (EDEADLK: the context was invalidated by a fault).
    uint32_t gpu_command(uint32_t context_id, uint64_t ib_gpuaddr, uint64_t ib_bytes);
    // The same, returning 0 or the errno: ETIMEDOUT is KGSL's back-pressure (the context's
    // drawqueue stayed full for context_queue_wait ms, adreno_dispatch.c
    // _wait_for_room_in_context_queue), not a failure of the device.
    int try_gpu_command(uint32_t context_id, uint64_t ib_gpuaddr, uint64_t ib_bytes, uint32_t& timestamp) noexcept;
    // What a failed GPU_COMMAND means, for an error message (the errno, the kernel log).
    std::string gpu_command_failure(uint32_t context_id, uint64_t ib_gpuaddr, uint64_t ib_bytes, int err);
    // IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID(RETIRED). Returns 0 or the errno.
    int read_retired(uint32_t context_id, uint32_t& timestamp) noexcept;
    // The same for any enum kgsl_timestamp_type (CONSUMED 1, RETIRED 2, QUEUED 3).
    int read_timestamp(uint32_t context_id, uint32_t type, uint32_t& timestamp) noexcept;
    // IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID with a finite timeout in ms. Returns 0 or the errno
    // (ETIMEDOUT when the timestamp did not retire in time).
    int wait_timestamp(uint32_t context_id, uint32_t timestamp, uint32_t timeout_ms) noexcept;

private:
    std::shared_ptr<KgslSyscalls> sys_;
    std::string path_;
    std::string name_;
    int fd_ = -1;
};

// "EDEADLK (Resource deadlock avoided)".
std::string errno_name(int err);

}  // namespace baregpu::qcom
