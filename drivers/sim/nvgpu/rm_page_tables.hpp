// The page tables nvidia.ko's RM writes for the VA spaces it owns (nvrm): MMU v2 (Ampere / Ada),
// 4 KiB PTEs, every table one 4 KiB VRAM page taken from RM's heap. What RM does in
// mmu_walk / gmmu_fmt for NV_ESC_RM_MAP_MEMORY_DMA; the entry layouts are typed here once more,
// from open-gpu-kernel-modules kernel-open/nvidia-uvm/hwref/turing/tu102/dev_mmu.h (NV_MMU_VER2_PDE_*,
// NV_MMU_VER2_DUAL_PDE_*, NV_MMU_VER2_PTE_*), and walked by the same Mmu the engines use.
//
// Not thread-safe: the owner serialises calls. Tables are never freed (an unmapped range keeps
// its directories, as RM keeps them until the VA space goes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>

namespace baregpu::sim::nvgpu {

class RmPageTables {
public:
    // `alloc_table`: a zeroed, 4 KiB-aligned 4 KiB page of `vram`, or none when VRAM is full.
    RmPageTables(std::span<std::byte> vram, std::function<std::optional<uint64_t>()> alloc_table)
        : vram_(vram), alloc_table_(std::move(alloc_table)) {}

    // A new, empty root directory (VRAM offset), or none.
    std::optional<uint64_t> new_root();
    // [va, va + length) (4 KiB aligned) to `address` onwards: VRAM offsets (`vram`) or system
    // memory bus addresses (SYS_COH, volatile). false when a table did not fit; the PTEs written
    // so far stay (RM's caller frees the memory, which unmaps them).
    bool map(uint64_t pdb, uint64_t va, uint64_t length, bool vram, uint64_t address);
    // The PTEs of [va, va + length) invalid again.
    void unmap(uint64_t pdb, uint64_t va, uint64_t length);

private:
    // The PTE slot of `va` (VRAM offset), creating directories when `create`; none when missing.
    std::optional<uint64_t> pte_slot(uint64_t pdb, uint64_t va, bool create);
    uint64_t read64(uint64_t at) const;
    void write64(uint64_t at, uint64_t value);

    std::span<std::byte> vram_;
    std::function<std::optional<uint64_t>()> alloc_table_;
};

}  // namespace baregpu::sim::nvgpu
