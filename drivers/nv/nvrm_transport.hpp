// The `nvrm` RM transport: RM calls as escape ioctls to nvidia.ko (NV_ESC_RM_ALLOC / CONTROL /
// FREE on /dev/nvidiactl), through the DeviceFiles seam so the same code runs against the
// kernel and against the simulated driver (drivers/sim/nvgpu/fake_nvidia.hpp). Named after the
// Resource Manager inside nvidia.ko ("NVRM:" prefixes its kernel log lines), not "nvk", which
// is Mesa's Vulkan driver for nouveau.
//
// open(): opens /dev/nvidiactl, allocates a client, reads the driver version first
// (NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2) and picks the struct layouts of its branch
// (rm_abi.hpp RmBranch), lists the GPUs (NV_ESC_CARD_INFO), and opens /dev/nvidia<minor> with
// NV_ESC_REGISTER_FD for the chosen one.
#pragma once

#include "drivers/nv/rm_api.hpp"
#include "drivers/pci/device_files.hpp"

#include <memory>
#include <string>
#include <vector>

namespace baregpu::nv {

struct NvrmGpu {
    uint32_t gpu_id = 0;
    uint32_t minor = 0;
    uint16_t vendor_id = 0, device_id = 0;
    std::string pci_address;  // "0000:01:00.0"
};

class NvrmTransport final : public RmTransport {
public:
    // Opens /dev/nvidiactl. Throws UnsupportedError when the driver's branch is not one whose
    // layouts we know (the message names the version), baregpu::Error when no NVIDIA driver
    // node is there.
    static std::unique_ptr<NvrmTransport> open(pci::DeviceFiles& files);
    ~NvrmTransport() override;

    std::string_view kind() const override { return "nvrm"; }
    const std::string& device() const override { return name_; }
    uint32_t alloc(NvHandle client, NvHandle parent, NvHandle* object, uint32_t cls, std::span<std::byte> params) override;
    uint32_t control(NvHandle client, NvHandle object, uint32_t cmd, std::span<std::byte> params) override;
    uint32_t free(NvHandle client, NvHandle parent, NvHandle object) override;

    const std::string& driver_version() const { return version_; }
    RmBranch branch() const { return branch_; }
    NvHandle client() const { return client_; }
    const std::vector<NvrmGpu>& gpus() const { return gpus_; }
    // Opens /dev/nvidia<minor> of gpus()[index] and registers it with the control fd; later
    // device-scoped calls name it. Asks RM the GPU's device instance (NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2
    // with its gpu_id), what NV01_DEVICE_0's deviceId must be: not the index, not 0 (tinygrad ops_nv.py does the same).
    void attach_gpu(size_t index);
    uint32_t device_instance() const { return device_instance_; }

    // CPU mapping of an RM memory object, nvidia.ko's way: NV_ESC_RM_MAP_MEMORY on /dev/nvidiactl
    // naming a fresh /dev/nvidia<minor> fd, then mmap() of that fd (at `address` with MAP_FIXED when
    // non-null). caching: NVOS33_FLAGS_CACHING_TYPE (0 cached, 1 uncached, 2 write-combined).
    // Returns the CPU address; unmap with unmap_memory.
    void* map_memory(NvHandle device, NvHandle memory, uint64_t offset, uint64_t length, void* address, uint32_t caching);
    void unmap_memory(void* address, uint64_t length);
    // GPU mapping of `memory` at the fixed GPU VA `va` in the VA space behind `dma`
    // (NV01_MEMORY_VIRTUAL): NV_ESC_RM_MAP_MEMORY_DMA, whose layout depends on the branch. Throws
    // RmError on an RM status, ProtocolError when RM maps anywhere but `va`.
    void map_memory_dma(NvHandle device, NvHandle dma, NvHandle memory, uint64_t offset, uint64_t length, uint64_t va,
                        bool huge_pages);
    // Page-aligned host memory as NV01_MEMORY_SYSTEM_OS_DESCRIPTOR under `device` (NV_ESC_RM_ALLOC_MEMORY
    // on the GPU's fd, cached, non-contiguous, not mapped by RM).
    NvHandle alloc_os_descriptor(NvHandle device, void* address, uint64_t size);

    // The branch a version string ("570.144", "580.65.06") selects; throws UnsupportedError for
    // branches whose layouts we do not know.
    static RmBranch branch_of(const std::string& version);

private:
    explicit NvrmTransport(pci::DeviceFiles& files, int ctl_fd);
    int escape(int fd, unsigned long request, void* argument, const char* what);
    int open_gpu_fd();  // a fresh /dev/nvidia<minor>, registered with the control fd

    pci::DeviceFiles& files_;
    int ctl_fd_ = -1;
    int gpu_fd_ = -1;
    uint32_t gpu_minor_ = 0;
    NvHandle next_os_descriptor_ = 0xcf800000;  // client-chosen handles for OS descriptors
    std::string name_ = "nvrm:/dev/nvidiactl";
    std::string version_;
    RmBranch branch_ = RmBranch::r570;
    uint32_t device_instance_ = 0;
    NvHandle client_ = 0;
    std::vector<NvrmGpu> gpus_;
};

}  // namespace baregpu::nv
