// nvidia.ko as the nvrm transport meets it, without the kernel: /dev/nvidiactl and /dev/nvidia0
// behind drivers/pci's DeviceFiles seam, answering the escape ioctls (NV_ESC_RM_ALLOC /
// CONTROL / FREE, NV_ESC_CARD_INFO, NV_ESC_REGISTER_FD) from an RmModel. Like the kernel it
// copies the parameter block in and out and refuses an ioctl whose encoded size is not the
// escape's (EINVAL; NV_ESC_RM_MAP_MEMORY_DMA's size follows the driver branch: 56 bytes in 570,
// 64 from 580), an unknown escape (EINVAL) and an fd it did not open (EBADF). Memory objects are
// backed by memfds: NV_ESC_RM_MAP_MEMORY arms the fd it names, whose mmap() then maps the object.
// With a GPU behind it (nvrm_gpu.hpp) VRAM objects map the GPU's VRAM (the bytes its engines see),
// the usermode object maps the doorbell page, and /dev/kmsg reads back the kernel log (Xid lines)
// as /dev/kmsg does: one record per read, "<prio>,<seq>,<usec>,-;<text>\n", EAGAIN at the end.
//
// Facts (open-gpu-kernel-modules 570.144): kernel-open/common/inc/nv-ioctl-numbers.h,
// nv-ioctl.h, src/nvidia/arch/nvalloc/unix/include/nv_escape.h, nvos.h.
#pragma once

#include "drivers/pci/device_files.hpp"
#include "nvrm_gpu.hpp"
#include "rm_model.hpp"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace baregpu::sim::nvgpu {

class FakeNvidia final : public pci::DeviceFiles {
public:
    explicit FakeNvidia(std::shared_ptr<RmModel> rm, uint16_t device_id = 0x2684, std::shared_ptr<NvrmGpu> gpu = nullptr);
    ~FakeNvidia() override;

    int open(const char* path, int flags) override;
    int close(int fd) override;
    int ioctl(int fd, unsigned long request, void* argument) override;
    void* mmap(void* address, size_t length, int prot, int flags, int fd, off_t offset, int* error) override;
    int munmap(void* address, size_t length) override;
    ssize_t read(int fd, void* buffer, size_t length) override;

    RmModel& rm() { return *rm_; }
    // Fault knob: the next ioctl fails with -error before reaching RM.
    void fail_next_ioctl(int error) { fail_next_ = error; }
    size_t open_files() const;
    // CPU mappings of RM objects unmapped only after the object was freed (a user mapping outliving its object).
    unsigned unmaps_after_free() const { return unmaps_after_free_.load(); }

private:
    struct PendingMap {  // NV_ESC_RM_MAP_MEMORY told this fd what its mmap() maps
        uint32_t client = 0, memory = 0;
        uint64_t offset = 0, length = 0;
    };
    struct File {
        std::string path;
        bool registered = false;  // /dev/nvidiaN after NV_ESC_REGISTER_FD
        std::optional<PendingMap> pending;
        size_t kmsg_next = 0;  // /dev/kmsg: the next record
    };
    int backing_fd(uint32_t client, uint32_t memory);  // under mutex_

    std::shared_ptr<RmModel> rm_;
    uint16_t device_id_;
    std::shared_ptr<NvrmGpu> gpu_;
    mutable std::mutex mutex_;
    std::map<int, File> files_;
    int next_fd_ = 1000;
    std::map<std::pair<uint32_t, uint32_t>, int> backing_;  // RM memory objects' bytes (memfds)
    std::atomic<int> fail_next_{0};
    std::map<void*, std::pair<uint32_t, uint32_t>> cpu_maps_;  // our mmap()s: address -> (client, memory)
    std::atomic<unsigned> unmaps_after_free_{0};
};

}  // namespace baregpu::sim::nvgpu
