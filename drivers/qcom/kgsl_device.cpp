#include "drivers/qcom/kgsl_device.hpp"

#include "base/error.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>

namespace baregpu::qcom {

using namespace kgsl;

std::string errno_name(int err) {
    const char* name = strerrorname_np(err);
    return fmt::format("{} ({})", name ? name : fmt::format("errno {}", err), std::strerror(err));
}

KgslDevice::KgslDevice(std::shared_ptr<KgslSyscalls> sys, std::string path, std::string name)
    : sys_(std::move(sys)), path_(std::move(path)), name_(std::move(name)) {
    int err = 0;
    fd_ = sys_->open(path_.c_str(), O_RDWR, err);
    if (fd_ < 0) {
        throw Error(name_, fmt::format("cannot open {}: {}{}", path_, errno_name(err),
                                       err == EACCES ? "; the device file belongs to the graphics group on Android, run as a member" : ""));
    }
}

KgslDevice::~KgslDevice() {
    if (fd_ >= 0) sys_->close(fd_);
}

kgsl_devinfo KgslDevice::device_info() {
    kgsl_devinfo info{};
    kgsl_device_getproperty p{KGSL_PROP_DEVICE_INFO, &info, sizeof info};
    int err = 0;
    if (sys_->ioctl(fd_, IOCTL_KGSL_DEVICE_GETPROPERTY, &p, err) < 0) {
        throw Error(name_, fmt::format("IOCTL_KGSL_DEVICE_GETPROPERTY(KGSL_PROP_DEVICE_INFO) failed: {}", errno_name(err)));
    }
    return info;
}

uint32_t KgslDevice::drawctxt_create(uint32_t flags) {
    kgsl_drawctxt_create c{flags, 0};
    int err = 0;
    if (sys_->ioctl(fd_, IOCTL_KGSL_DRAWCTXT_CREATE, &c, err) < 0) {
        throw Error(name_, fmt::format("IOCTL_KGSL_DRAWCTXT_CREATE(flags 0x{:x}) failed: {}", flags, errno_name(err)));
    }
    return c.drawctxt_id;
}

void KgslDevice::drawctxt_destroy(uint32_t context_id) noexcept {
    kgsl_drawctxt_destroy d{context_id};
    int err = 0;
    sys_->ioctl(fd_, IOCTL_KGSL_DRAWCTXT_DESTROY, &d, err);
}

uint32_t KgslDevice::gpuobj_alloc_at(void* fixed, uint64_t size, bool uncached) {
    kgsl_gpuobj_alloc a{};
    a.size = size;
    // 4 KiB alignment; CPU-mapped so that the GPU address is the CPU address.
    a.flags = (uint64_t{12} << KGSL_MEMALIGN_SHIFT) | KGSL_MEMFLAGS_USE_CPU_MAP |
              (uncached ? KGSL_CACHEMODE_UNCACHED << KGSL_CACHEMODE_SHIFT : 0);
    a.mmapsize = size;
    int err = 0;
    if (sys_->ioctl(fd_, IOCTL_KGSL_GPUOBJ_ALLOC, &a, err) < 0) {
        throw Error(name_, fmt::format("IOCTL_KGSL_GPUOBJ_ALLOC of 0x{:x} bytes failed: {}", size, errno_name(err)));
    }
    void* p = sys_->mmap(fixed, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_, uint64_t(a.id) * kMmapPage, err);
    if (p != fixed) {
        kgsl_gpuobj_free f{};
        f.id = a.id;
        int ignored = 0;
        sys_->ioctl(fd_, IOCTL_KGSL_GPUOBJ_FREE, &f, ignored);
        throw Error(name_, fmt::format("mmap of GPU object {} (0x{:x} bytes) at {} failed: {}", a.id, size, fixed,
                                       p == MAP_FAILED ? errno_name(err) : fmt::format("placed at {} instead", p)));
    }
    return a.id;
}

void KgslDevice::gpuobj_free(uint32_t id, void* cpu, uint64_t size) noexcept {
    sys_->munmap(cpu, size);
    kgsl_gpuobj_free f{};
    f.id = id;
    int err = 0;
    sys_->ioctl(fd_, IOCTL_KGSL_GPUOBJ_FREE, &f, err);
}

uint64_t KgslDevice::map_user_mem(uint64_t hostptr, uint64_t len) {
    kgsl_map_user_mem m{};
    m.fd = -1;
    m.len = len;
    m.hostptr = hostptr;
    m.memtype = KGSL_USER_MEM_TYPE_ADDR;
    int err = 0;
    if (sys_->ioctl(fd_, IOCTL_KGSL_MAP_USER_MEM, &m, err) < 0) {
        throw Error(name_, fmt::format("IOCTL_KGSL_MAP_USER_MEM of 0x{:x}+0x{:x} failed: {}", hostptr, len, errno_name(err)));
    }
    return m.gpuaddr;
}

void KgslDevice::sharedmem_free(uint64_t gpuaddr) noexcept {
    kgsl_sharedmem_free f{gpuaddr};
    int err = 0;
    sys_->ioctl(fd_, IOCTL_KGSL_SHAREDMEM_FREE, &f, err);
}

uint32_t KgslDevice::gpu_command(uint32_t context_id, uint64_t ib_gpuaddr, uint64_t ib_bytes) {
    uint32_t timestamp = 0;
    if (int err = try_gpu_command(context_id, ib_gpuaddr, ib_bytes, timestamp)) {
        throw Error(name_, gpu_command_failure(context_id, ib_gpuaddr, ib_bytes, err));
    }
    return timestamp;
}

std::string KgslDevice::gpu_command_failure(uint32_t context_id, uint64_t ib_gpuaddr, uint64_t ib_bytes, int err) {
    std::string log = sys_->kernel_log(context_id);
    return fmt::format("IOCTL_KGSL_GPU_COMMAND on KGSL context {} (IB 0x{:x}, {} bytes) failed: {}{}{}", context_id, ib_gpuaddr, ib_bytes,
                       errno_name(err), err == EDEADLK ? "; the context was invalidated by a GPU fault" : "",
                       log.empty() ? "" : "; kernel log: " + log);
}

int KgslDevice::try_gpu_command(uint32_t context_id, uint64_t ib_gpuaddr, uint64_t ib_bytes, uint32_t& timestamp) noexcept {
    kgsl_command_object ib{};
    ib.gpuaddr = ib_gpuaddr;
    ib.size = ib_bytes;
    ib.flags = KGSL_CMDLIST_IB;
    kgsl_gpu_command c{};
    c.cmdlist = reinterpret_cast<uint64_t>(&ib);
    c.cmdsize = sizeof ib;
    c.numcmds = 1;
    c.context_id = context_id;
    int err = 0;
    if (sys_->ioctl(fd_, IOCTL_KGSL_GPU_COMMAND, &c, err) < 0) return err == 0 ? EIO : err;
    timestamp = c.timestamp;
    return 0;
}

int KgslDevice::read_retired(uint32_t context_id, uint32_t& timestamp) noexcept {
    return read_timestamp(context_id, KGSL_TIMESTAMP_RETIRED, timestamp);
}

int KgslDevice::read_timestamp(uint32_t context_id, uint32_t type, uint32_t& timestamp) noexcept {
    kgsl_cmdstream_readtimestamp_ctxtid r{context_id, type, 0};
    int err = 0;
    if (sys_->ioctl(fd_, IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID, &r, err) < 0) return err;
    timestamp = r.timestamp;
    return 0;
}

int KgslDevice::wait_timestamp(uint32_t context_id, uint32_t timestamp, uint32_t timeout_ms) noexcept {
    kgsl_device_waittimestamp_ctxtid w{context_id, timestamp, timeout_ms};
    int err = 0;
    return sys_->ioctl(fd_, IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID, &w, err) < 0 ? err : 0;
}

}  // namespace baregpu::qcom
