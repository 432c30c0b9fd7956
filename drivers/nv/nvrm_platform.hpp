// NvHcqDevice over nvidia.ko (hcq_platform.hpp), with the kernel driver owning the GPU's memory:
//   - RM transport: NvrmTransport (nvrm_transport.hpp) on /dev/nvidiactl + /dev/nvidia<minor>;
//   - GPU mappings: NV_ESC_RM_MAP_MEMORY_DMA at the HCQ's fixed VAs in a VA space RM owns (FERMI_VASPACE_A
//     without IS_EXTERNALLY_OWNED; the NV01_MEMORY_VIRTUAL hDma bound to it). Not UVM: UVM_REGISTER_GPU /
//     _VASPACE / CREATE_EXTERNAL_RANGE / MAP_EXTERNAL_ALLOCATION would hand the tables to nvidia-uvm.ko,
//     which the simulated nvidia.ko does not model (drivers/nv/README.md);
//   - VRAM: NV1_MEMORY_USER, CPU access by NV_ESC_RM_MAP_MEMORY + mmap of a /dev/nvidia<minor> fd;
//     host memory: page-aligned anonymous pages as NV01_MEMORY_SYSTEM_OS_DESCRIPTOR;
//   - doorbell: the usermode object (TURING_USERMODE_A) mapped the same way, NOTIFY_CHANNEL_PENDING at +0x90;
//   - channel errors: each channel gets an error notifier (hObjectError, one host page as an OS descriptor)
//     that RM fills on a robust-channel error (kernel_rc_notification.c: info32 = Xid, info16 = engine,
//     status = 0xffff); the text is completed from the kernel log's "NVRM: Xid" lines (/dev/kmsg, read
//     non-blocking; when it cannot be read the error says so and carries the Xid only).
//
// Ownership: owns the transport (its client and fds) and every mapping it made; `files` outlives it.
#pragma once

#include "drivers/nv/hcq_platform.hpp"
#include "drivers/nv/nvrm_transport.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace baregpu::nv {

class NvrmPlatform final : public NvPlatform {
public:
    // Opens nvidia.ko through `files` (the host's, or the simulated driver's) and GPU `gpu_index` of its
    // NV_ESC_CARD_INFO list; `memory_bytes`: the VRAM buffers may take.
    static std::unique_ptr<NvrmPlatform> open(pci::DeviceFiles& files, size_t gpu_index, uint64_t memory_bytes);
    // The same for the GPU nvidia.ko lists at PCI address `pci_address` ("0000:01:00.0"; its
    // NV_ESC_CARD_INFO entry, kernel-open/common/inc/nv-ioctl.h nv_ioctl_card_info_t, carries the
    // address and the /dev/nvidia<minor> it is). Throws baregpu::Error listing the addresses
    // nvidia.ko drives when it is not one of them.
    static std::unique_ptr<NvrmPlatform> open(pci::DeviceFiles& files, std::string_view pci_address, uint64_t memory_bytes);
    ~NvrmPlatform() override;

    const char* reporter() const override { return "nvidia.ko"; }
    const std::string& name() const override { return nvrm_->device(); }
    // nvidia.ko's entry for the GPU this platform drives.
    const NvrmGpu& gpu() const { return nvrm_->gpus()[gpu_index_]; }
    RmTransport& transport() override { return *nvrm_; }
    NvHandle client() const override { return nvrm_->client(); }
    RmBranch branch() const override { return nvrm_->branch(); }
    uint32_t device_instance() const override { return nvrm_->device_instance(); }
    NvHandle memory_object(GpuVirtualAddress va) const override;
    RmVaspaceOwner vaspace_owner() const override { return RmVaspaceOwner::rm; }
    uint64_t memory_bytes() const override { return memory_bytes_; }
    void attach(RmDevice& rm) override;
    void detach() noexcept override;
    std::byte* map(GpuVirtualAddress va, uint64_t size, const hcq::BufferOptions& options) override;
    void unmap(GpuVirtualAddress va, uint64_t size) noexcept override;
    void ring_doorbell(uint32_t token) override;
    NvHandle new_error_notifier() override;
    void channel_opened(uint32_t token, NvHandle error_notifier) override;
    void channel_closed(uint32_t token) noexcept override;
    std::optional<NvChannelError> poll_errors() override;
    void forget_errors() override;

private:
    NvrmPlatform(pci::DeviceFiles& files, std::unique_ptr<NvrmTransport> nvrm, size_t gpu_index, uint64_t memory_bytes);
    // New "NVRM: Xid" lines of the kernel log (all lines read are consumed).
    void read_kernel_log();

    pci::DeviceFiles& files_;
    std::unique_ptr<NvrmTransport> nvrm_;
    size_t gpu_index_ = 0;
    uint64_t memory_bytes_;
    RmDevice* rm_ = nullptr;
    void* usermode_ = nullptr;
    volatile uint32_t* doorbell_ = nullptr;

    mutable std::mutex mutex_;  // mappings_
    struct Mapping {
        NvHandle memory = 0;
        std::byte* cpu = nullptr;
        uint64_t bytes = 0;
        bool host = false;
    };
    std::map<uint64_t, Mapping> mappings_;

    struct Notifier {
        NvHandle memory = 0;
        std::byte* page = nullptr;
        uint32_t token = 0;
        bool open = false, reported = false;
    };
    std::vector<Notifier> notifiers_;  // under the device's RM mutex
    int kmsg_fd_ = -1;
    std::string kmsg_error_;
    std::vector<std::string> xid_lines_;
};

}  // namespace baregpu::nv
