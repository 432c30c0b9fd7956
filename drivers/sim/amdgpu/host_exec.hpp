// How the simulated MEC runs a compute dispatch: as host code (ARCHITECTURE.md, "Code objects
// and ISAs"). COMPUTE_PGM_LO/HI point at a struct baregpu_host_program (drivers/hostcode/
// host_program.h) naming a host ELF code object in GPU memory; the executor reads both through
// the VMID 0 walker, loads the image with drivers/hostcode's ELF loader (a small cache keyed by
// (image_va, image_hash)), and runs every workgroup on drivers/hostcode's thread pool
// (hardware_concurrency threads, kept for the model's life).
//
// Host kernels dereference the buffer addresses in their kernargs directly, so the executor
// keeps a HOST MIRROR of the GPU address space: for each run of consecutive valid VMID 0 leaves
// that point at VRAM, a PROT_NONE host reservation into which the leaves are mapped again
// (MAP_SHARED | MAP_FIXED) from the file that backs VRAM, at the leaf's VRAM offset; the system
// aperture [fb_base, fb_top] is mirrored too. Writes through the mirror are writes to VRAM.
// Leaves that point at system memory are mirrored too, by aliasing the host pages the bus maps at
// that bus address (SimPort::dma_host_memory, mremap of the shared mapping); system memory the bus
// cannot alias (not one IOMMU mapping, not a shared mapping) is a page fault for a buffer there. Read-only leaves are mirrored
// read-only. The mirror is rebuilt lazily: on the next dispatch after the GC hub's page-table
// registers or TLB invalidation count change, or when a buffer's translation disagrees with it.
#pragma once

#include "drivers/hostcode/grid_launcher.hpp"
#include "drivers/sim/amdgpu/chip.hpp"
#include "drivers/sim/amdgpu/gmc.hpp"
#include "drivers/sim/amdgpu/pm4_engine.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>


namespace baregpu::sim::amdgpu {

class HostExecutor {
public:
    // `vram_fd` backs VRAM from byte `vram_file_offset` on (StateFile::fd()).
    HostExecutor(Chip& chip, Gmc& gmc, int vram_fd, uint64_t vram_file_offset);
    ~HostExecutor();
    HostExecutor(const HostExecutor&) = delete;
    HostExecutor& operator=(const HostExecutor&) = delete;

    enum class Outcome {
        done,     // every workgroup ran
        fault,    // a GPU page fault was latched and posted to the IH ring; nothing ran
        refused,  // the dispatch is malformed (`what` says why); nothing ran
    };
    // Runs dispatch `d` to completion. Adds the host time it took to the modelled clock.
    Outcome run(const Dispatch& d, std::string& what);

    // Forget the mirror and the loaded images (power cycle, mode1 reset); while a kernel runs,
    // when it ends.
    void reset();
    // Runs `work` (the workgroups) with the model's lock released, so that register accesses do
    // not wait for a kernel; the model sets it. Unset: the lock stays held.
    std::function<void(const std::function<void()>& work)> unlocked;
    // VMID 0's SH_MEM_CONFIG (GcRegs): its ALIGNMENT_MODE decides whether a misaligned buffer is a
    // memory violation. Unset: unaligned mode.
    std::function<uint32_t()> sh_mem_config;
    // Why the last refused dispatch was refused, when a rule other than the host-program contract
    // refused it (the Linux source the rule mirrors).
    std::string refused_source;
    size_t cached_images() const { return images_.size(); }

private:
    struct Extent {
        uint64_t va, bytes;
        uint64_t target;  // VRAM offset, or the bus address of system memory
        bool writeable;
        std::byte* system = nullptr;  // system memory: the host bytes the bus maps there
    };
    struct Window {  // one host reservation: consecutive mirrored VA
        uint64_t va = 0, bytes = 0;
        std::byte* host = nullptr;
        std::vector<Extent> extents;
    };
    struct Image;
    struct MirrorKey {
        std::array<uint32_t, 8> regs{};
        uint32_t invalidations = 0;
        bool operator==(const MirrorKey&) const = default;
    };

    MirrorKey mirror_key();
    void rebuild_mirror();
    void drop_mirror();
    // The host address of GPU VA `va` and what the mirror maps there (a VRAM offset, or a bus
    // address for system memory); nullptr when the mirror does not cover it.
    std::byte* mirrored(uint64_t va, uint64_t& target) const;
    // The linked image, from the cache or read through the walker (an unmapped image posts a page
    // fault); nullptr with `what` set when the driver's image is refused.
    std::shared_ptr<Image> load(uint64_t image_va, uint64_t image_size, uint64_t image_hash, std::string& what);

    Chip& chip_;
    Gmc& gmc_;
    int vram_fd_;
    uint64_t vram_file_offset_;
    std::vector<Window> windows_;  // sorted by va, disjoint
    bool mirror_valid_ = false;
    bool busy_ = false, reset_pending_ = false;  // a kernel runs; reset() came meanwhile
    MirrorKey key_;
    std::map<std::pair<uint64_t, uint64_t>, std::shared_ptr<Image>> images_;
    uint64_t use_counter_ = 0;
    hostcode::GridLauncher launcher_;
};

}  // namespace baregpu::sim::amdgpu
