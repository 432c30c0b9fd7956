// The syscall seam for drivers that talk to a kernel driver through character devices
// (nvidia.ko's /dev/nvidiactl and /dev/nvidiaN, KGSL's /dev/kgsl-3d0): open, ioctl, mmap. The
// real implementation calls libc; a simulator implements the same interface (drivers/sim), and
// the registry (drivers/registry_nv.cpp) hands one or the other to the driver.
//
// Errors are returned, not thrown, with errno values as the kernel reports them: the driver
// decides what a failure means (an EINVAL from an ioctl is a layout mismatch, ENOENT a missing
// module) and words the error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <sys/types.h>

namespace baregpu::pci {

class DeviceFiles {
public:
    virtual ~DeviceFiles() = default;
    // A file descriptor, or -errno.
    virtual int open(const char* path, int flags) = 0;
    // 0 or -errno.
    virtual int close(int fd) = 0;
    // The ioctl's non-negative result, or -errno.
    virtual int ioctl(int fd, unsigned long request, void* argument) = 0;
    // The mapping, or nullptr with *error = errno.
    virtual void* mmap(void* address, size_t length, int prot, int flags, int fd, off_t offset, int* error) = 0;
    // 0 or -errno.
    virtual int munmap(void* address, size_t length) = 0;
    // Bytes read, or -errno (a kernel log record from /dev/kmsg, say). Files that are never read
    // need not implement it.
    virtual ssize_t read(int fd, void* buffer, size_t length) {
        (void)fd, (void)buffer, (void)length;
        return -38;  // ENOSYS
    }
};

// The host's own files (libc).
DeviceFiles& host_device_files();

}  // namespace baregpu::pci
