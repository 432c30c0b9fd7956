#include "drivers/pci/device_files.hpp"

#include <cerrno>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace baregpu::pci {

namespace {

class HostDeviceFiles final : public DeviceFiles {
public:
    int open(const char* path, int flags) override {
        int fd = ::open(path, flags | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
    }
    int close(int fd) override { return ::close(fd) < 0 ? -errno : 0; }
    int ioctl(int fd, unsigned long request, void* argument) override {
        int result;
        do {
            result = ::ioctl(fd, request, argument);
        } while (result < 0 && (errno == EINTR || errno == EAGAIN));
        return result < 0 ? -errno : result;
    }
    void* mmap(void* address, size_t length, int prot, int flags, int fd, off_t offset, int* error) override {
        void* mapping = ::mmap(address, length, prot, flags, fd, offset);
        if (mapping == MAP_FAILED) {
            if (error) *error = errno;
            return nullptr;
        }
        return mapping;
    }
    int munmap(void* address, size_t length) override { return ::munmap(address, length) < 0 ? -errno : 0; }
    ssize_t read(int fd, void* buffer, size_t length) override {
        ssize_t n;
        do {
            n = ::read(fd, buffer, length);
        } while (n < 0 && errno == EINTR);
        return n < 0 ? -errno : n;
    }
};

}  // namespace

DeviceFiles& host_device_files() {
    static HostDeviceFiles files;
    return files;
}

}  // namespace baregpu::pci
