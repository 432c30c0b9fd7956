// An AMD GPU brought up by drivers/am (AmDevice) as an HCQ device: a PM4 compute queue on a
// directly programmed MEC HQD (compute_queue.hpp), SDMA0 queue 0 as the copy queue
// (copy_queue.hpp), VRAM handed out by VramAllocator and mapped into VMID 0 with the largest
// leaves the alignment allows, host memory mapped as snooped system pages, CPU access to VRAM
// through the BAR0 mapping (tinygrad runtime/support/am/ip.py AM_GFX, AM_SDMA; ops_amd.py queues).
//
// Kernel ISA: `gfx1100` / `gfx1201` on silicon (AMDGPU HSA code objects, code_object.hpp; a
// simulated chip takes them too with `isa=native` and runs them in its interpreter); on a simulated chip the
// registry asks for host code (KernelIsa::host) by default: code objects are x86-64 ELF objects from the same compiler, uploaded
// behind a baregpu_host_program descriptor (drivers/hostcode/host_program.h) that the
// simulated MEC runs per workgroup (ARCHITECTURE.md, "Code objects and ISAs").
//
// Faults: every wait polls the IH ring (a memory read); a page fault puts the device in its error
// state with the queue, the address, the hub and the client. recover() dequeues and re-creates
// the queues on the same memory (tinygrad test/external/external_test_am_fault_recovery.py).
#pragma once

#include <atomic>

#include "drivers/am/am_device.hpp"
#include "drivers/am/shadow_memory.hpp"
#include "drivers/am/sram_staging.hpp"
#include "drivers/am/vram_allocator.hpp"
#include "drivers/pci/dma_buffer.hpp"
#include "drivers/pci/peer_window.hpp"
#include "hcq/device.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace baregpu::am {

class ComputeQueueEngine;
class CopyQueueEngine;

enum class KernelIsa {
    native,  // the chip's own: AMDGPU HSA code objects for asic().gfx_arch
    host,    // x86-64 code objects a simulated chip runs as host code
};

struct AmHcqOptions {
    std::string name;  // the device's HCQ name ("sim-am:navi31"); empty: the PCI function's
    KernelIsa isa = KernelIsa::native;
    uint32_t compute_queues = 1;               // separate HQDs on MEC1 pipe 0 (1-8)
    uint64_t compute_ring_bytes = 1ull << 20;  // power of two
    uint64_t copy_ring_bytes = 1ull << 20;     // power of two
    uint64_t va_bytes = 64ull << 30;           // the VMID 0 window HCQ buffers live in
    uint64_t peer_va_bytes = 64ull << 30;      // after it: where bus peers' memory is mapped (map_bus_peer)
    uint64_t memory_bytes = 0;                 // what buffers may map at once; 0: the VRAM heap
    uint64_t staging_bytes = 2ull << 20;       // copy_in / copy_out slots: size and count
    uint32_t staging_slots = 4;
    // Keep this alive as long as the device (the simulated bus a sim-am device sits on).
    std::shared_ptr<void> keepalive;
};

// Bus peers (map_bus_peer): a peer's VRAM through its BAR and its host memory, mapped into this
// device's IOMMU and into VMID 0 as system pages in the peer window after the HCQ window; this
// device's own memory is exported to peers as BAR0 (PeerMemoryExporter).
class AmHcqDevice final : public hcq::Device, public pci::PeerMemoryExporter, private hcq::MemoryBackend {
    struct Token {};

public:
    // Takes over a brought-up chip. Throws UnsupportedError when the chip's queue registers are not
    // known yet (GC 12) and baregpu::Error when a queue does not start.
    static std::shared_ptr<AmHcqDevice> create(std::unique_ptr<AmDevice> chip, AmHcqOptions options);
    AmHcqDevice(Token, std::unique_ptr<AmDevice> chip, AmHcqOptions options);
    ~AmHcqDevice() override;

    AmDevice& chip() { return *chip_; }
    // The HQD behind one of this device's compute engines: its queue on MEC1 pipe 0; nullopt for
    // any other engine.
    std::optional<uint32_t> compute_hqd_of(const hcq::Engine& engine) const;

    void sleep_for_signal(const hcq::SignalSlot& slot, uint64_t target, uint64_t deadline_ns) override;
    // The engines poll memory themselves; over a link without CPU-mapped device memory the
    // write is published to VRAM here (shadow_memory.hpp).
    void host_signal_written() noexcept override;
    // Over a shadowed link: the slot's host copy from VRAM, every host copy when it moved.
    void refresh_signal(const hcq::SignalSlot& slot) noexcept override;
    void recover() override;

    GpuVirtualAddress map_bus_peer(hcq::Device& owner, GpuVirtualAddress address, uint64_t size) override;
    void retire_bus_peer_mappings(uint64_t value) noexcept override { peers_->retire(value); }
    size_t live_peer_mappings() const { return peers_->live(); }

    // PeerMemoryExporter: VRAM through BAR0, host memory as its bytes.
    pci::PciDevice& peer_pci() override { return chip_->pci(); }
    unsigned peer_bar() const override { return 0; }
    uint64_t peer_memory_bytes() const override { return chip_->vram_size(); }
    std::vector<Segment> peer_segments(uint64_t va, uint64_t size) override;

    // Consumes the IH ring: a page fault fails the device (message: queue, address, hub, client,
    // read/write). Returns true when it did. Called by waits; cheap when nothing is pending.
    bool check_faults() noexcept;
    // What a CPU write to VRAM through BAR0 needs before the GPU reads it (HDP flush).
    void flush_hdp();
    // Bumped whenever kernel code is written to GPU memory (a program load): a compute queue that has
    // not submitted since invalidates the instruction cache and GL2 first (compute_queue.cpp).
    uint64_t code_generation() const { return code_generation_.load(std::memory_order_acquire); }
    // The BAR2 doorbell for 64-bit slot `slot`.
    void ring_doorbell(uint32_t slot, uint64_t value);
    // The FB-relative physical address behind a GPU VA this device mapped (MQDs need MC addresses).
    uint64_t physical(GpuVirtualAddress va);
    bool bar_mapped() const { return bar0_ != nullptr; }
    // Allocation for the engines' own memory (rings, control words, EOP, MQD).
    hcq::Buffer allocate_owned(uint64_t size, const hcq::BufferOptions& options) { return memory().allocate(size, options, nullptr); }
    // A queue's ring: host memory the engine only reads, and only where a submission wrote it. Over a
    // shadowed link it is not zero-filled in VRAM; the queue says what it wrote (ring_written).
    hcq::Buffer allocate_ring(uint64_t size);
    void ring_written(const hcq::Buffer& ring, uint64_t offset, uint64_t bytes);

    // The memory-strategy seam. On a link that maps device memory (BAR0) or lets the GPU DMA into
    // host memory, CPU pointers are the memory itself and these do nothing. On one that does not
    // (USB: LinkCapabilities without bar_mmap and host_dma), CPU-mapped allocations are VRAM plus a
    // host copy (shadow_memory.hpp) and these are its synchronization points.
    bool shadowed() const { return shadow_ != nullptr; }
    // `buffer` (CPU-mapped) is only ever written by the host: never read back from VRAM.
    void host_writes_only(const hcq::Buffer& buffer);
    // `buffer` holds what tells an engine to look (its write pointer): published after the rest.
    void publish_last(const hcq::Buffer& buffer);
    // Refresh the host copy of [host, host + bytes) (words the host polls); true when it changed.
    bool refresh_host(const void* host, uint64_t bytes);
    // Wait for `signal` to reach `value` reading back only signals, not the host copies of data the
    // GPU may have written (the driver's own waits, e.g. for the copy queue to drain the bridge
    // SRAM): the data is brought up to date at the next wait that needs it.
    void wait_signal_only(const hcq::Signal& signal, uint64_t value);
    // Refresh every host copy the GPU may write (after the host saw the device progress).
    void refresh_all_host() {
        if (shadow_) shadow_->refresh_all();
    }

    struct MemoryStats {
        uint64_t vram_free = 0, vram_largest_free = 0;
        size_t vram_fragments = 0;
        uint64_t leaves_1g = 0, leaves_2m = 0, leaves_4k = 0;  // mappings made so far, by leaf size
    };
    MemoryStats memory_stats();
    // A program's code range that is going away (AmProgram's destructor).
    void program_unloaded(GpuVirtualAddress code, uint64_t size, const std::string& kernel) noexcept;

private:
    std::atomic<uint64_t> code_generation_{0};
    std::shared_ptr<hcq::Program> load_program_impl(std::span<const std::byte> code_object, std::string_view kernel) override;
    std::byte* map_memory(GpuVirtualAddress va, uint64_t size, uint64_t page_size, const hcq::BufferOptions& options) override;
    void unmap_memory(GpuVirtualAddress va, uint64_t size, std::byte* cpu) noexcept override;
    void collect_retired(uint64_t completed) noexcept override { peers_->collect(completed); }
    bool copy_in_through_link(const hcq::Buffer& dst, std::span<const std::byte> src) override;
    bool copy_out_through_link(std::span<std::byte> dst, const hcq::Buffer& src) override;
    // Over a link that maps nothing (USB), its clock: the modelled one in simulation, which the
    // host does not sleep to follow (the waits poll the device, whose progress needs no time).
    std::optional<uint64_t> link_clock_ns() override;

    // An AMDGPU HSA code object (code_object.hpp) for the chip's own ISA: the image in VRAM, the
    // launch state from its kernel descriptor, the HCQ argument layout checked against its metadata.
    std::shared_ptr<hcq::Program> load_native(std::span<const std::byte> code_object, std::string_view kernel);
    std::byte* map_host(GpuVirtualAddress va, uint64_t size);
    std::byte* map_shadowed(GpuVirtualAddress va, uint64_t size, uint64_t page_size, const hcq::BufferOptions& options);
    // Publish host writes to VRAM (shadowed links); fails the device when the link is gone.
    void publish_host_writes();
    void count_leaves(uint64_t va, uint64_t paddr, uint64_t size);
    std::string queue_of_fault(const PageFault& fault) const;

    AmHcqOptions options_;
    std::unique_ptr<AmDevice> chip_;
    volatile std::byte* bar0_ = nullptr;  // CPU mapping of VRAM (nullptr: no BAR mapping)
    uint64_t bar0_size_ = 0;

    std::mutex memory_mutex_;
    VramAllocator vram_;
    struct Mapping {
        std::vector<VramExtent> extents;
        std::unique_ptr<pci::DmaBuffer> host;
    };
    std::map<uint64_t, Mapping> mappings_;  // by VA
    uint64_t leaves_[3] = {0, 0, 0};

    std::mutex fault_mutex_;
    uint32_t ih_seen_ = 0;
    struct Unloaded {
        uint64_t begin = 0, end = 0;
        std::string kernel;
    };
    std::vector<Unloaded> unloaded_;  // the most recent ones, under fault_mutex_

    // Set when the link cannot map device memory for the CPU (see shadowed()).
    std::unique_ptr<ShadowMemory> shadow_;
    // Set when the link's device-visible memory is a bridge SRAM: copy_in / copy_out go through it.
    std::unique_ptr<SramStaging> sram_staging_;
    // A signal moved during a wait_signal_only: the next refresh_signal reads the data copies back.
    std::atomic<bool> data_stale_{false};

    std::vector<std::unique_ptr<ComputeQueueEngine>> compute_;
    std::unique_ptr<CopyQueueEngine> copy_;
    std::unique_ptr<pci::PeerWindow> peers_;  // after the engines: they may still reach peers while stopping
};

}  // namespace baregpu::am
