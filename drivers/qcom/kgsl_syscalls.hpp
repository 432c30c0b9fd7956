// The syscall seam: everything drivers/qcom asks of the kernel goes through this interface, so
// the same driver code runs against /dev/kgsl-3d0 (LibcKgslSyscalls) and against the simulated
// KGSL device (drivers/sim/kgsl, adapted in drivers/registry_qcom.cpp). Return conventions are libc's:
// -1 (MAP_FAILED for mmap) with the error number returned through `err`, never through errno,
// so that callers on other threads cannot clobber it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace baregpu::qcom {

class KgslSyscalls {
public:
    virtual ~KgslSyscalls() = default;
    virtual int open(const char* path, int flags, int& err) = 0;
    virtual int close(int fd) = 0;
    virtual int ioctl(int fd, unsigned long request, void* arg, int& err) = 0;
    virtual void* mmap(void* addr, uint64_t length, int prot, int flags, int fd, uint64_t offset, int& err) = 0;
    virtual int munmap(void* addr, uint64_t length) = 0;
    // What the kernel logged about context `context_id` (GPU faults, protected-mode errors), for
    // error messages. The libc implementation returns nothing: dmesg needs CAP_SYSLOG.
    virtual std::string kernel_log(uint32_t context_id) { (void)context_id; return {}; }
};

// The real kernel.
std::shared_ptr<KgslSyscalls> libc_syscalls();

}  // namespace baregpu::qcom
