#include "fake_nvidia.hpp"

#include <cerrno>
#include <cstring>
#include <vector>

namespace baregpu::sim::nvgpu {

namespace {

// nv-ioctl-numbers.h / nv_escape.h: _IOWR('F', nr, size).
constexpr uint32_t kMagic = 'F';
constexpr uint32_t kEscFree = 0x29, kEscControl = 0x2A, kEscAlloc = 0x2B, kEscCardInfo = 200, kEscRegisterFd = 201;
constexpr uint32_t kNvos00Size = 16, kNvos21Size = 32, kNvos54Size = 32;
constexpr uint32_t kCardInfoSize = 72, kCardInfoEntries = 64, kRegisterFdSize = 4;

struct Request {
    uint32_t dir, size, type, nr;
};
Request decode(unsigned long request) {
    return {static_cast<uint32_t>((request >> 30) & 3), static_cast<uint32_t>((request >> 16) & 0x3fff),
            static_cast<uint32_t>((request >> 8) & 0xff), static_cast<uint32_t>(request & 0xff)};
}

template <class T>
T at(const void* base, size_t offset) {
    T v;
    std::memcpy(&v, static_cast<const char*>(base) + offset, sizeof(T));
    return v;
}
template <class T>
void put(void* base, size_t offset, T v) {
    std::memcpy(static_cast<char*>(base) + offset, &v, sizeof(T));
}

// The kernel copies a parameter block in from user memory and back out (os_memcpy_from_user).
struct UserParams {
    void* user;
    std::vector<std::byte> copy;
    UserParams(uint64_t pointer, uint32_t size) : user(reinterpret_cast<void*>(static_cast<uintptr_t>(pointer))), copy(size) {
        if (user && size) std::memcpy(copy.data(), user, size);
    }
    bool valid() const { return (user == nullptr) == copy.empty(); }
    void copy_out() {
        if (user && !copy.empty()) std::memcpy(user, copy.data(), copy.size());
    }
};

}  // namespace

FakeNvidia::FakeNvidia(std::shared_ptr<RmModel> rm, uint16_t device_id) : rm_(std::move(rm)), device_id_(device_id) {}

int FakeNvidia::open(const char* path, int flags) {
    (void)flags;
    std::string p = path ? path : "";
    if (p != "/dev/nvidiactl" && p != "/dev/nvidia0") return -ENOENT;
    std::lock_guard lock(mutex_);
    int fd = next_fd_++;
    files_[fd] = File{p};
    return fd;
}

int FakeNvidia::close(int fd) {
    std::lock_guard lock(mutex_);
    return files_.erase(fd) ? 0 : -EBADF;
}

size_t FakeNvidia::open_files() const {
    std::lock_guard lock(mutex_);
    return files_.size();
}

int FakeNvidia::ioctl(int fd, unsigned long request, void* argument) {
    std::string path;
    {
        std::lock_guard lock(mutex_);
        auto it = files_.find(fd);
        if (it == files_.end()) return -EBADF;
        path = it->second.path;
    }
    if (int error = fail_next_.exchange(0); error != 0) return -error;
    Request r = decode(request);
    if (r.type != kMagic || r.dir != 3 || argument == nullptr) return -EINVAL;

    switch (r.nr) {
        case kEscAlloc: {
            if (r.size != kNvos21Size) return -EINVAL;
            // NVOS21: hRoot, hObjectParent, hObjectNew, hClass, pAllocParms, paramsSize, status.
            UserParams params(at<uint64_t>(argument, 16), at<uint32_t>(argument, 24));
            uint32_t status = 0x1F;  // NV_ERR_INVALID_ARGUMENT: pointer and size disagree (param_copy.c)
            uint32_t object = at<uint32_t>(argument, 8);
            if (params.valid()) {
                status = rm_->alloc(at<uint32_t>(argument, 0), at<uint32_t>(argument, 4), &object,
                                    at<uint32_t>(argument, 12), params.copy);
            }
            if (status == 0) {
                params.copy_out();
                put<uint32_t>(argument, 8, object);
            }
            put<uint32_t>(argument, 28, status);
            return 0;
        }
        case kEscControl: {
            if (r.size != kNvos54Size) return -EINVAL;
            // NVOS54: hClient, hObject, cmd, flags, params, paramsSize, status.
            UserParams params(at<uint64_t>(argument, 16), at<uint32_t>(argument, 24));
            uint32_t status = 0x1F;
            if (params.valid()) {
                status = rm_->control(at<uint32_t>(argument, 0), at<uint32_t>(argument, 4), at<uint32_t>(argument, 8),
                                      params.copy);
            }
            if (status == 0) params.copy_out();
            put<uint32_t>(argument, 28, status);
            return 0;
        }
        case kEscFree: {
            if (r.size != kNvos00Size) return -EINVAL;
            uint32_t status = rm_->free(at<uint32_t>(argument, 0), at<uint32_t>(argument, 4), at<uint32_t>(argument, 8));
            put<uint32_t>(argument, 12, status);
            return 0;
        }
        case kEscCardInfo: {
            if (r.size != kCardInfoSize * kCardInfoEntries || path != "/dev/nvidiactl") return -EINVAL;
            std::memset(argument, 0, r.size);
            // nv_ioctl_card_info_t[0]: valid, pci_info {domain, bus, slot, function, vendor, device}, gpu_id, ..., minor.
            put<uint8_t>(argument, 0, 1);
            put<uint32_t>(argument, 4, 0);
            put<uint8_t>(argument, 8, 1);
            put<uint16_t>(argument, 12, 0x10de);
            put<uint16_t>(argument, 14, device_id_);
            put<uint32_t>(argument, 16, rm_->options().gpu_id);
            put<uint32_t>(argument, 56, 0);
            return 0;
        }
        case kEscRegisterFd: {
            if (r.size != kRegisterFdSize || path == "/dev/nvidiactl") return -EINVAL;
            int ctl = at<int32_t>(argument, 0);
            std::lock_guard lock(mutex_);
            auto ctl_file = files_.find(ctl);
            if (ctl_file == files_.end() || ctl_file->second.path != "/dev/nvidiactl") return -EINVAL;
            files_[fd].registered = true;
            return 0;
        }
        default: return -EINVAL;
    }
}

void* FakeNvidia::mmap(void* address, size_t length, int prot, int flags, int fd, off_t offset, int* error) {
    (void)address, (void)length, (void)prot, (void)flags, (void)fd, (void)offset;
    // CPU mappings of RM memory (NV_ESC_RM_MAP_MEMORY + mmap) are not modelled yet.
    if (error) *error = ENODEV;
    return nullptr;
}

int FakeNvidia::munmap(void* address, size_t length) {
    (void)address, (void)length;
    return -EINVAL;
}

}  // namespace baregpu::sim::nvgpu
