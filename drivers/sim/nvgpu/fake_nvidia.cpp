#include "fake_nvidia.hpp"

#include "rm_layouts.hpp"

#include <cerrno>
#include <fmt/format.h>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace baregpu::sim::nvgpu {

namespace {

// nv-ioctl-numbers.h / nv_escape.h: _IOWR('F', nr, size).
constexpr uint32_t kMagic = 'F';
constexpr uint32_t kEscAllocMemory = 0x27, kEscMapMemory = 0x4E, kEscMapMemoryDma = 0x57;
constexpr uint32_t kWithFdSize = 56, kNvos46Size570 = 56, kNvos46Size580 = 64;
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

FakeNvidia::FakeNvidia(std::shared_ptr<RmModel> rm, uint16_t device_id, std::shared_ptr<NvrmGpu> gpu)
    : rm_(std::move(rm)), device_id_(device_id), gpu_(std::move(gpu)) {}

FakeNvidia::~FakeNvidia() {
    for (const auto& [key, fd] : backing_) ::close(fd);
}

int FakeNvidia::backing_fd(uint32_t client, uint32_t memory) {
    auto it = backing_.find({client, memory});
    if (it != backing_.end()) return it->second;
    int fd = ::memfd_create("sim-nvidia-memory", MFD_CLOEXEC);
    if (fd < 0) return -errno;
    if (::ftruncate(fd, static_cast<off_t>(rm_->memory_size(client, memory))) != 0) {
        int error = errno;
        ::close(fd);
        return -error;
    }
    backing_[{client, memory}] = fd;
    return fd;
}

int FakeNvidia::open(const char* path, int flags) {
    (void)flags;
    std::string p = path ? path : "";
    if (p != "/dev/nvidiactl" && p != "/dev/nvidia0" && !(p == "/dev/kmsg" && gpu_)) return -ENOENT;
    std::lock_guard lock(mutex_);
    int fd = next_fd_++;
    files_[fd] = File{p, false, std::nullopt, 0};
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
    if (path == "/dev/kmsg") return -ENOTTY;
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
        case kEscAllocMemory: {
            // nv_ioctl_nvos02_parameters_with_fd: NVOS02 {hRoot, hObjectParent, hObjectNew, hClass, flags,
            // pMemory @24, limit @32, status @40}, fd @48. nvidia.ko takes it on a GPU's fd.
            if (r.size != kWithFdSize || path == "/dev/nvidiactl") return -EINVAL;
            uint32_t status = 0x22;  // NV_ERR_INVALID_CLASS: only OS descriptors are modelled
            if (at<uint32_t>(argument, 12) == 0x71) {
                status = rm_->alloc_os_descriptor(at<uint32_t>(argument, 0), at<uint32_t>(argument, 4),
                                                  at<uint32_t>(argument, 8), at<uint64_t>(argument, 24),
                                                  at<uint64_t>(argument, 32));
            }
            put<uint32_t>(argument, 40, status);
            return 0;
        }
        case kEscMapMemory: {
            // nv_ioctl_nvos33_parameters_with_fd: NVOS33 {hClient, hDevice, hMemory, offset @16, length @24,
            // pLinearAddress @32, status @40, flags @44}, fd @48: the file whose mmap() maps it.
            if (r.size != kWithFdSize) return -EINVAL;
            const uint32_t client = at<uint32_t>(argument, 0), memory = at<uint32_t>(argument, 8);
            const uint64_t offset = at<uint64_t>(argument, 16), length = at<uint64_t>(argument, 24);
            uint32_t status = rm_->check_cpu_map(client, at<uint32_t>(argument, 4), memory, offset, length);
            if (status == 0) {
                std::lock_guard lock(mutex_);
                auto target = files_.find(at<int32_t>(argument, 48));
                if (target == files_.end() || target->second.path == "/dev/nvidiactl" || !target->second.registered) {
                    status = 0x1F;  // NV_ERR_INVALID_ARGUMENT: not a registered GPU fd
                } else {
                    target->second.pending = PendingMap{client, memory, offset, length};
                    put<uint64_t>(argument, 32, offset);  // the cookie the mmap offset would carry
                }
            }
            put<uint32_t>(argument, 40, status);
            return 0;
        }
        case kEscMapMemoryDma: {
            // NVOS46: 570 {.., flags @32, dmaOffset @40, status @48}; 580+ {.., flags @32, flags2, kindOverride,
            // dmaOffset @48, status @56}.
            const bool r580 = rm_->driver_major() >= 580;
            if (r.size != (r580 ? kNvos46Size580 : kNvos46Size570)) return -EINVAL;
            const size_t dma_at = r580 ? 48 : 40, status_at = r580 ? 56 : 48;
            uint64_t dma_offset = at<uint64_t>(argument, dma_at);
            uint32_t status = rm_->map_dma(at<uint32_t>(argument, 0), at<uint32_t>(argument, 4), at<uint32_t>(argument, 8),
                                           at<uint32_t>(argument, 12), at<uint64_t>(argument, 16), at<uint64_t>(argument, 24),
                                           at<uint32_t>(argument, 32), &dma_offset);
            put<uint64_t>(argument, dma_at, dma_offset);
            put<uint32_t>(argument, status_at, status);
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
    std::lock_guard lock(mutex_);
    auto it = files_.find(fd);
    int failure = 0;
    if (it == files_.end()) {
        failure = EBADF;
    } else if (!it->second.pending || offset != 0 || length > it->second.pending->length) {
        failure = EINVAL;  // nvidia.ko maps only what NV_ESC_RM_MAP_MEMORY armed this fd with
    }
    if (failure == 0 && gpu_) {
        // VRAM and the usermode page are the GPU's own bytes; mmap offsets are whole pages.
        const PendingMap map = *it->second.pending;
        int source = -1;
        uint64_t at = map.offset;
        if (const uint32_t cls = rm_->class_of(map.client, map.memory); cls == rm::kTuringUsermode || cls == rm::kHopperUsermode) {
            source = gpu_->usermode_fd();
        } else if (std::optional<RmBacking> b = rm_->backing_of(map.client, map.memory); b && b->vram) {
            source = gpu_->vram_fd();
            at += b->address;
        } else if (b) {
            failure = EINVAL;  // host memory: the process has it already
        }
        if (source >= 0) {
            if (at % 4096 != 0) {
                failure = EINVAL;
            } else {
                void* mapping = ::mmap(address, length, prot, flags, source, static_cast<off_t>(at));
                if (mapping != MAP_FAILED) {
                    cpu_maps_[mapping] = {map.client, map.memory};
                    return mapping;
                }
                failure = errno;
            }
        }
        if (failure != 0) {
            if (error) *error = failure;
            return nullptr;
        }
    }
    if (failure == 0) {
        const PendingMap map = *it->second.pending;
        int backing = backing_fd(map.client, map.memory);
        if (backing < 0) {
            failure = -backing;
        } else {
            void* mapping = ::mmap(address, length, prot, flags, backing, static_cast<off_t>(map.offset));
            if (mapping != MAP_FAILED) {
                cpu_maps_[mapping] = {map.client, map.memory};
                return mapping;
            }
            failure = errno;
        }
    }
    if (error) *error = failure;
    return nullptr;
}

int FakeNvidia::munmap(void* address, size_t length) {
    {
        std::lock_guard lock(mutex_);
        if (auto it = cpu_maps_.find(address); it != cpu_maps_.end()) {
            // The object is gone while the process still maps it: RM dropped the object's CPU mappings with it
            // (resserv keeps them per resource, rs_resource.c refRemoveMapping), the VMA outlived them.
            if (rm_->class_of(it->second.first, it->second.second) == 0) ++unmaps_after_free_;
            cpu_maps_.erase(it);
        }
    }
    return ::munmap(address, length) == 0 ? 0 : -errno;
}

ssize_t FakeNvidia::read(int fd, void* buffer, size_t length) {
    std::lock_guard lock(mutex_);
    auto it = files_.find(fd);
    if (it == files_.end()) return -EBADF;
    if (it->second.path != "/dev/kmsg") return -EINVAL;
    const std::vector<std::string> log = gpu_->kernel_log();
    if (it->second.kmsg_next >= log.size()) return -EAGAIN;  // O_NONBLOCK at the end of the buffer
    // printk's record format (Documentation/ABI/testing/dev-kmsg): level 3 (err), sequence, time, flags.
    const std::string record = fmt::format("3,{},0,-;{}\n", it->second.kmsg_next, log[it->second.kmsg_next]);
    if (record.size() > length) return -EINVAL;  // /dev/kmsg: the buffer must hold the whole record
    std::memcpy(buffer, record.data(), record.size());
    ++it->second.kmsg_next;
    return static_cast<ssize_t>(record.size());
}

}  // namespace baregpu::sim::nvgpu
