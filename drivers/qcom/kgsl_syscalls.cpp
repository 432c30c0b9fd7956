#include "drivers/qcom/kgsl_syscalls.hpp"

#include <cerrno>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace baregpu::qcom {

namespace {

class LibcKgslSyscalls final : public KgslSyscalls {
public:
    int open(const char* path, int flags, int& err) override {
        int fd = ::open(path, flags | O_CLOEXEC);
        err = fd < 0 ? errno : 0;
        return fd;
    }
    int close(int fd) override { return ::close(fd); }
    int ioctl(int fd, unsigned long request, void* arg, int& err) override {
        // No retry on EINTR here: a wait ioctl's caller owns the deadline and loops itself.
        int r = ::ioctl(fd, request, arg);
        err = r < 0 ? errno : 0;
        return r;
    }
    void* mmap(void* addr, uint64_t length, int prot, int flags, int fd, uint64_t offset, int& err) override {
        void* p = ::mmap(addr, length, prot, flags, fd, off_t(offset));
        err = p == MAP_FAILED ? errno : 0;
        return p;
    }
    int munmap(void* addr, uint64_t length) override { return ::munmap(addr, length); }
};

}  // namespace

std::shared_ptr<KgslSyscalls> libc_syscalls() { return std::make_shared<LibcKgslSyscalls>(); }

}  // namespace baregpu::qcom
