// The GPU behind the fake nvidia.ko (fake_nvidia.hpp): an AD102's VRAM, MMU, PBDMA, copy engine
// and compute class — the same GpuEngines the simulated AD102 on the PCI bus runs (gpu_engines.hpp)
// — with nvidia.ko's RM (an RmModel) owning them, as it does on a machine where the kernel
// driver is loaded and GSP is already up:
//   - VRAM is one memfd: the engines see its bytes and NV_ESC_RM_MAP_MEMORY's mmap() maps the same
//     pages, so CPU and GPU share memory as BAR1 and the FB do;
//   - RM places NV1_MEMORY_USER in it (first fit), writes MMU v2 tables for the VA spaces it owns
//     (rm_page_tables.hpp) on NV_ESC_RM_MAP_MEMORY_DMA, and maps OS descriptors as system memory:
//     their bus address is the host address (no IOMMU), and the engines reach exactly the
//     descriptors that are mapped (anything else is a DMA fault);
//   - the usermode object's mmap() is a 64 KiB page whose NOTIFY_CHANNEL_PENDING (0x90, clc361.h)
//     word a doorbell thread watches: a store of a work-submit token rings that channel (the store
//     is plain memory here, so the thread polls it — every 20 µs while work arrives, 200 µs when idle, 1 ms
//     after a second of quiet);
//   - a channel fault becomes what nvidia.ko does on an RC error: the channel's error notifier
//     written (RmModel::robust_channel_error) and an "NVRM: Xid" line in the kernel log
//     (/dev/kmsg through the fake), naming the faulting address.
#pragma once

#include "gpu_engines.hpp"
#include "rm_model.hpp"
#include "rm_page_tables.hpp"

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace baregpu::sim::nvgpu {

struct NvrmGpuOptions {
    std::string name = "sim-nvrm:ad102";
    uint64_t vram_bytes = uint64_t{1} << 30;  // a multiple of 2 MiB; pages appear when touched
};

class NvrmGpu {
public:
    // Wires itself into `rm` (memory and engine hooks): RM calls from then on use this GPU.
    NvrmGpu(std::shared_ptr<RmModel> rm, NvrmGpuOptions options = {});
    ~NvrmGpu();
    NvrmGpu(const NvrmGpu&) = delete;
    NvrmGpu& operator=(const NvrmGpu&) = delete;

    const std::string& name() const { return options_.name; }
    // The VRAM memfd (offset = VRAM offset) and the usermode page's memfd, for the fake's mmap().
    int vram_fd() const { return vram_fd_; }
    int usermode_fd() const { return usermode_fd_; }
    std::span<std::byte> vram() { return vram_; }
    GpuEngines& engines() { return *engines_; }
    // The kernel log nvidia.ko would print (one line per record, "NVRM: Xid (PCI:0000:01:00): 31, ...").
    std::vector<std::string> kernel_log() const;
    // System-memory accesses the engines made outside every mapped OS descriptor.
    unsigned dma_faults() const { return dma_faults_.load(); }

    class HostPort;  // the SimPort over mapped OS descriptors (nvrm_gpu.cpp)

private:
    std::optional<uint64_t> alloc_vram(uint64_t size, uint64_t alignment);  // under mutex_
    void free_vram(uint64_t offset, uint64_t size);                        // under mutex_
    void on_fault(const EngineFault& f);
    void doorbell_thread();

    NvrmGpuOptions options_;
    std::shared_ptr<RmModel> rm_;
    int vram_fd_ = -1, usermode_fd_ = -1;
    std::span<std::byte> vram_;
    std::byte* usermode_ = nullptr;
    mutable std::mutex mutex_;                // heap, tables, host ranges, log
    std::map<uint64_t, uint64_t> free_;       // VRAM heap: offset -> bytes
    std::unique_ptr<RmPageTables> tables_;
    std::map<std::pair<uint64_t, uint64_t>, std::pair<uint64_t, uint64_t>> host_maps_;  // (pdb, va) -> host range
    std::map<uint64_t, std::pair<uint64_t, unsigned>> host_ranges_;  // host address -> (bytes, mappings)
    std::vector<std::string> log_;
    std::set<uint32_t> tokens_;               // registered channels
    std::atomic<unsigned> dma_faults_{0};
    std::unique_ptr<HostPort> port_;
    std::unique_ptr<GpuEngines> engines_;
    std::mutex bell_mutex_;
    std::condition_variable bell_cv_;
    bool stop_ = false;
    std::thread bell_thread_;
};

}  // namespace baregpu::sim::nvgpu
