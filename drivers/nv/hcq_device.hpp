// An NVIDIA GPU as an HCQ device: RM objects (rm_device.hpp) over one of two platforms
// (hcq_platform.hpp) — NVPCI, a GSP-RM we booted, with driver-owned page tables (nvpci_platform.hpp),
// or nvidia.ko with RM-owned page tables (nvrm_platform.hpp) — and, the same on both, one compute and
// one copy GPFIFO channel (channel_queue.hpp).
//
// Faults: every wait asks the platform for channel errors (GSP's OS_ERROR_LOG events; nvidia.ko's
// error notifier and Xid line); the first one puts the device in its error state naming the queue, the
// channel and the platform's text (kind, VA).
//
// Kernel ISA: host code only (x86-64 objects the simulated compute class runs); cubins (sm_89) for
// silicon are parsed by cubin.hpp but not loaded here yet.
#pragma once

#include "drivers/nv/gsp_boot.hpp"
#include "drivers/nv/hcq_platform.hpp"
#include "drivers/nv/rm_device.hpp"
#include "drivers/pci/peer_window.hpp"
#include "hcq/device.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace baregpu::nv {

class ChannelQueue;

struct NvHcqOptions {
    std::string name;                          // the HCQ name ("sim-nv:ad102"); empty: the platform's
    uint32_t gpfifo_entries = 1024;            // per channel, power of two
    uint64_t compute_ring_bytes = 1ull << 20;  // command rings, power of two (a launch takes >= 560 bytes)
    uint64_t copy_ring_bytes = 1ull << 20;
    uint64_t va_bytes = 64ull << 30;           // the HCQ VA window at kVaBase (below 2^40: GP entries, QMDs)
    uint64_t peer_va_bytes = 64ull << 30;      // after it: where bus peers' memory is mapped (hcq_peer.cpp)
    uint64_t memory_bytes = 0;                 // what buffers may map at once; 0: the VRAM heap
    uint64_t staging_bytes = 2ull << 20;
    uint32_t staging_slots = 4;
    std::shared_ptr<void> keepalive;           // the simulated bus a sim-nv device sits on
};

class NvHcqDevice final : public hcq::Device, public pci::PeerMemoryExporter, private hcq::MemoryBackend {
    struct Token {};

public:
    static constexpr uint64_t kVaBase = 0x1000000000;  // 64 GiB
    // Over a platform (nvpci or nvrm).
    static std::shared_ptr<NvHcqDevice> create(std::unique_ptr<NvPlatform> platform, NvHcqOptions options);
    // NVPCI: takes over a booted GSP and the PciDevice under it (NvpciPlatform).
    static std::shared_ptr<NvHcqDevice> create(std::unique_ptr<pci::PciDevice> pci, std::unique_ptr<GspDevice> gsp,
                                               NvHcqOptions options);
    NvHcqDevice(Token, std::unique_ptr<NvPlatform> platform, NvHcqOptions options);
    ~NvHcqDevice() override;

    void sleep_for_signal(const hcq::SignalSlot& slot, uint64_t target, uint64_t deadline_ns) override;
    void host_signal_written() noexcept override {}
    // After a channel error: both channels re-created by RM on the same memory, GSP's errors so far taken.
    void recover() override;

    // Asks the platform for channel errors: one fails the device. Returns true when it did.
    bool check_faults() noexcept;

    // For the queues.
    RmDevice& rm() { return *rm_; }
    std::mutex& rm_mutex() { return rm_mutex_; }
    NvPlatform& platform() { return *platform_; }
    hcq::Buffer allocate_owned(uint64_t size, const hcq::BufferOptions& options) { return memory().allocate(size, options, nullptr); }
    void channel_opened(uint32_t token, std::string queue);
    void channel_closed(uint32_t token) noexcept;

    // A program's code range that is going away (NvProgram's destructor).
    void program_unloaded(GpuVirtualAddress code, uint64_t size, const std::string& kernel) noexcept;

    // Bus peers (hcq_peer.cpp): a peer's VRAM through its BAR and its host memory as SYS aperture
    // pages in the peer window after the HCQ window; our VRAM exported to peers as BAR1. Only where
    // the platform maps bus addresses (NvPlatform::peer_access: nvpci); elsewhere UnsupportedError.
    GpuVirtualAddress map_bus_peer(hcq::Device& owner, GpuVirtualAddress address, uint64_t size) override;
    void retire_bus_peer_mappings(uint64_t value) noexcept override {
        if (peers_) peers_->retire(value);
    }
    pci::PciDevice& peer_pci() override;
    unsigned peer_bar() const override { return 1; }
    uint64_t peer_memory_bytes() const override;
    std::vector<Segment> peer_segments(uint64_t va, uint64_t size) override;

private:
    void collect_retired(uint64_t completed) noexcept override {
        if (peers_) peers_->collect(completed);
    }
    // nullptr where the platform has no peer access (nvrm).
    std::unique_ptr<pci::PeerWindow> make_peer_window();
    NvPeerAccess& peer_access();
    // A DMA the IOMMU refused fails the device naming the mapping (check_faults calls it).
    bool check_iommu_faults();
    std::shared_ptr<hcq::Program> load_program_impl(std::span<const std::byte> code_object, std::string_view kernel) override;
    // A cubin (EM_CUDA ELF) for the GPU's SM: its linked image in VRAM, the launch needs from its .nv.info.
    std::shared_ptr<hcq::Program> load_cubin(std::span<const std::byte> code_object, std::string_view kernel);
    std::byte* map_memory(GpuVirtualAddress va, uint64_t size, uint64_t page_size, const hcq::BufferOptions& options) override;
    void unmap_memory(GpuVirtualAddress va, uint64_t size, std::byte* cpu) noexcept override;

    NvHcqOptions options_;
    std::unique_ptr<NvPlatform> platform_;
    std::mutex rm_mutex_;  // GspRpc is single-threaded: RM calls and error polls
    std::unique_ptr<RmDevice> rm_;

    std::mutex memory_mutex_;  // platform_->map / unmap

    std::mutex fault_mutex_;
    std::map<uint32_t, std::string> channels_;  // token -> queue name, under fault_mutex_
    struct Unloaded {
        uint64_t begin = 0, end = 0;
        std::string kernel;
    };
    std::vector<Unloaded> unloaded_;  // the most recent ones, under fault_mutex_

    std::unique_ptr<ChannelQueue> compute_, copy_;
    std::unique_ptr<pci::PeerWindow> peers_;  // after the channels: they may still reach peers while stopping
};

}  // namespace baregpu::nv
