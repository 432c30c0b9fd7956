#include "drivers/nv/nvrm_transport.hpp"

#include "drivers/nv/nvrm_escape.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <fmt/format.h>

namespace baregpu::nv {

using namespace nvrm;

namespace {
uint64_t user_pointer(std::span<std::byte> params) {
    return params.empty() ? 0 : static_cast<uint64_t>(reinterpret_cast<uintptr_t>(params.data()));
}
}  // namespace

NvrmTransport::NvrmTransport(pci::DeviceFiles& files, int ctl_fd) : files_(files), ctl_fd_(ctl_fd) {}

NvrmTransport::~NvrmTransport() {
    if (client_ != 0) {
        Nvos00Parameters p{client_, 0, client_, 0};
        files_.ioctl(ctl_fd_, kIoctlFree, &p);  // frees every object of the client
    }
    if (gpu_fd_ >= 0) files_.close(gpu_fd_);
    if (ctl_fd_ >= 0) files_.close(ctl_fd_);
}

int NvrmTransport::escape(int fd, unsigned long request, void* argument, const char* what) {
    int result = files_.ioctl(fd, request, argument);
    if (result < 0) {
        // nvidia.ko refuses an escape whose size it does not expect with EINVAL: a layout mismatch.
        throw Error(name_, fmt::format("{} ioctl 0x{:x} failed: {}{}", what, request, std::strerror(-result),
                                       result == -EINVAL ? " (nvidia.ko did not accept the argument's size or layout)" : ""));
    }
    return result;
}

RmBranch NvrmTransport::branch_of(const std::string& version) {
    unsigned major = 0;
    size_t i = 0;
    while (i < version.size() && version[i] >= '0' && version[i] <= '9') major = major * 10 + (version[i++] - '0');
    if (i == 0) throw ProtocolError("nvrm:/dev/nvidiactl", fmt::format("driver version '{}' does not start with a number", version));
    if (major >= 570 && major < 575) return RmBranch::r570;
    if (major >= 575 && major < 580) return RmBranch::r575;
    if (major >= 580 && major < 600) return RmBranch::r580;
    throw UnsupportedError("nvrm:/dev/nvidiactl",
                           fmt::format("NVIDIA driver {} (branch {}): baregpu knows the RM struct layouts of branches "
                                       "570-599 only (they change between branches, e.g. NV_VASPACE_ALLOCATION_PARAMETERS "
                                       "gained pasid in 580)",
                                       version, major));
}

std::unique_ptr<NvrmTransport> NvrmTransport::open(pci::DeviceFiles& files) {
    int fd = files.open("/dev/nvidiactl", O_RDWR);
    if (fd < 0) {
        throw Error("nvrm:/dev/nvidiactl",
                    fmt::format("cannot open /dev/nvidiactl: {} (is nvidia.ko loaded? nvpci drives the GPU without it)",
                                std::strerror(-fd)));
    }
    std::unique_ptr<NvrmTransport> t(new NvrmTransport(files, fd));
    Rm rm(*t);
    t->client_ = rm.alloc_client();

    auto version = std::make_unique<Nv0000CtrlSystemGetBuildVersionV2Params>();
    std::memset(version.get(), 0, sizeof(*version));
    rm.control(t->client_, t->client_, NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2, *version);
    version->driverVersionBuffer[sizeof(version->driverVersionBuffer) - 1] = 0;
    t->version_ = version->driverVersionBuffer;
    t->branch_ = branch_of(t->version_);

    std::vector<NvIoctlCardInfo> cards(kCardInfoEntries);
    t->escape(fd, kIoctlCardInfo, cards.data(), "NV_ESC_CARD_INFO");
    for (const NvIoctlCardInfo& card : cards) {
        if (!card.valid) continue;
        t->gpus_.push_back({card.gpu_id, card.minor_number, card.pci_info.vendor_id, card.pci_info.device_id,
                            fmt::format("{:04x}:{:02x}:{:02x}.{:x}", card.pci_info.domain, card.pci_info.bus,
                                        card.pci_info.slot, card.pci_info.function)});
    }
    return t;
}

int NvrmTransport::open_gpu_fd() {
    std::string path = fmt::format("/dev/nvidia{}", gpu_minor_);
    int fd = files_.open(path.c_str(), O_RDWR);
    if (fd < 0) throw Error(name_, fmt::format("cannot open {}: {}", path, std::strerror(-fd)));
    NvIoctlRegisterFd reg{ctl_fd_};
    try {
        escape(fd, kIoctlRegisterFd, &reg, "NV_ESC_REGISTER_FD");
    } catch (...) {
        files_.close(fd);
        throw;
    }
    return fd;
}

void NvrmTransport::attach_gpu(size_t index) {
    if (index >= gpus_.size()) {
        throw Error(name_, fmt::format("GPU {} requested but nvidia.ko lists {}", index, gpus_.size()));
    }
    Nv0000CtrlGpuGetIdInfoV2Params id{};
    id.gpuId = gpus_[index].gpu_id;
    Rm(*this).control(client_, client_, NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, id);
    device_instance_ = id.deviceInstance;
    gpu_minor_ = gpus_[index].minor;
    int fd = open_gpu_fd();
    if (gpu_fd_ >= 0) files_.close(gpu_fd_);
    gpu_fd_ = fd;
    name_ = fmt::format("nvrm:/dev/nvidia{}", gpu_minor_);
}

void* NvrmTransport::map_memory(NvHandle device, NvHandle memory, uint64_t offset, uint64_t length, void* address,
                               uint32_t caching) {
    if (gpu_fd_ < 0) throw Error(name_, "map_memory before attach_gpu");
    // Each mapping gets its own /dev/nvidiaN file: nvidia.ko ties the mapping to the fd it is told.
    int fd = open_gpu_fd();
    Nvos33WithFd p{};
    p.params.hClient = client_;
    p.params.hDevice = device;
    p.params.hMemory = memory;
    p.params.offset = offset;
    p.params.length = length;
    p.params.flags = caching << kNvos33CachingShift;
    p.fd = fd;
    try {
        escape(ctl_fd_, kIoctlMapMemory, &p, "NV_ESC_RM_MAP_MEMORY");
        if (p.params.status != NV_OK) {
            throw RmError(name_, fmt::format("NV_ESC_RM_MAP_MEMORY of memory 0x{:x} (+0x{:x}, 0x{:x} bytes) failed: {}",
                                             memory, offset, length, describe_status(p.params.status)),
                          p.params.status);
        }
        int error = 0;
        void* cpu = files_.mmap(address, length, PROT_READ | PROT_WRITE, MAP_SHARED | (address ? MAP_FIXED : 0), fd, 0, &error);
        if (cpu == nullptr) {
            throw Error(name_, fmt::format("mmap of memory 0x{:x} ({} bytes) through /dev/nvidia{} failed: {}", memory, length,
                                           gpu_minor_, std::strerror(error)));
        }
        files_.close(fd);
        return cpu;
    } catch (...) {
        files_.close(fd);
        throw;
    }
}

void NvrmTransport::unmap_memory(void* address, uint64_t length) { files_.munmap(address, length); }

void NvrmTransport::map_memory_dma(NvHandle device, NvHandle dma, NvHandle memory, uint64_t offset, uint64_t length,
                                  uint64_t va, bool huge_pages) {
    const uint32_t flags = kNvos46CacheSnoop | (huge_pages ? kNvos46PageSizeHuge : kNvos46PageSize4k) | kNvos46DmaOffsetFixed;
    uint32_t status;
    uint64_t mapped;
    if (branch_ != RmBranch::r580) {
        Nvos46Parameters570 p{client_, device, dma, memory, offset, length, flags, 0, va, 0, 0};
        escape(ctl_fd_, kIoctlMapMemoryDma570, &p, "NV_ESC_RM_MAP_MEMORY_DMA");
        status = p.status;
        mapped = p.dmaOffset;
    } else {
        Nvos46Parameters580 p{client_, device, dma, memory, offset, length, flags, 0, 0, 0, va, 0, 0};
        escape(ctl_fd_, kIoctlMapMemoryDma580, &p, "NV_ESC_RM_MAP_MEMORY_DMA");
        status = p.status;
        mapped = p.dmaOffset;
    }
    if (status != NV_OK) {
        throw RmError(name_, fmt::format("NV_ESC_RM_MAP_MEMORY_DMA of memory 0x{:x} (0x{:x} bytes) at GPU VA 0x{:x} failed: {}",
                                         memory, length, va, describe_status(status)),
                      status);
    }
    if (mapped != va) {
        throw ProtocolError(name_, fmt::format("NV_ESC_RM_MAP_MEMORY_DMA of memory 0x{:x} asked for GPU VA 0x{:x} "
                                               "(DMA_OFFSET_FIXED) and got 0x{:x}",
                                               memory, va, mapped));
    }
}

NvHandle NvrmTransport::alloc_os_descriptor(NvHandle device, void* address, uint64_t size) {
    if (gpu_fd_ < 0) throw Error(name_, "alloc_os_descriptor before attach_gpu");
    Nvos02WithFd p{};
    p.params.hRoot = client_;
    p.params.hObjectParent = device;
    p.params.hObjectNew = next_os_descriptor_++;
    p.params.hClass = NV01_MEMORY_SYSTEM_OS_DESCRIPTOR;
    p.params.flags = kNvos02PhysicalityNoncontiguous | kNvos02LocationPci | kNvos02CoherencyCached | kNvos02MappingNoMap;
    p.params.pMemory = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(address));
    p.params.limit = size - 1;
    p.fd = -1;
    // On the GPU's fd, not the control fd: the kernel pins the pages for that GPU.
    escape(gpu_fd_, kIoctlAllocMemory, &p, "NV_ESC_RM_ALLOC_MEMORY");
    if (p.params.status != NV_OK) {
        throw RmError(name_, fmt::format("NV_ESC_RM_ALLOC_MEMORY of {} at {} ({} bytes) failed: {}",
                                         class_name(NV01_MEMORY_SYSTEM_OS_DESCRIPTOR), address, size,
                                         describe_status(p.params.status)),
                      p.params.status);
    }
    return p.params.hObjectNew;
}

uint32_t NvrmTransport::alloc(NvHandle client, NvHandle parent, NvHandle* object, uint32_t cls, std::span<std::byte> params) {
    Nvos21Parameters p{};
    p.hRoot = client;
    p.hObjectParent = parent;
    p.hObjectNew = *object;
    p.hClass = cls;
    p.pAllocParms = user_pointer(params);
    p.paramsSize = static_cast<uint32_t>(params.size());
    escape(ctl_fd_, kIoctlAlloc, &p, "NV_ESC_RM_ALLOC");
    if (p.status == NV_OK) *object = p.hObjectNew;
    return p.status;
}

uint32_t NvrmTransport::control(NvHandle client, NvHandle object, uint32_t cmd, std::span<std::byte> params) {
    Nvos54Parameters p{};
    p.hClient = client;
    p.hObject = object;
    p.cmd = cmd;
    p.params = user_pointer(params);
    p.paramsSize = static_cast<uint32_t>(params.size());
    escape(ctl_fd_, kIoctlControl, &p, "NV_ESC_RM_CONTROL");
    return p.status;
}

uint32_t NvrmTransport::free(NvHandle client, NvHandle parent, NvHandle object) {
    Nvos00Parameters p{client, parent, object, 0};
    escape(ctl_fd_, kIoctlFree, &p, "NV_ESC_RM_FREE");
    if (p.status == NV_OK && object == client_) client_ = 0;
    return p.status;
}

}  // namespace baregpu::nv
