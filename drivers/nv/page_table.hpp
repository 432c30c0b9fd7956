// A GPU virtual address space: the page directory tree in VRAM, mapped with the largest leaves
// the alignment of VA, physical address and length allows (512 MiB at PDE1, 2 MiB at PDE0,
// otherwise 4 KiB PTEs), formats in mmu_format.hpp. Tables live in VRAM and are written through
// a caller's "write 8 bytes at VRAM offset" seam (BAR1 in the real driver, the model's VRAM in
// tests); the driver keeps a shadow so that it never reads VRAM back. After each map / unmap the
// TLBs are invalidated through a BAR0 register-write seam (NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB
// then _INVALIDATE with ALL_VA and TRIGGER, dev_vm.h).
#pragma once

#include "base/address.hpp"
#include "mmu_format.hpp"
#include "vram_allocator.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::nv {

class PageTable {
public:
    using WriteVram64 = std::function<void(uint64_t vram_offset, uint64_t value)>;
    using WriteRegister = std::function<void(uint32_t bar0_offset, uint32_t value)>;

    // Allocates the root directory from `vram` (which must outlive this). Throws baregpu::Error
    // when VRAM runs out.
    PageTable(std::string device, MmuVersion version, VramAllocator& vram, WriteVram64 write64,
              WriteRegister write_register);
    ~PageTable();
    PageTable(const PageTable&) = delete;
    PageTable& operator=(const PageTable&) = delete;

    MmuVersion version() const { return version_; }
    // The page directory base: VRAM offset of the root table (4 KiB aligned), for the channel's
    // instance block / the model's ChannelState.
    uint64_t root() const;

    // Maps [va, va + size) to [address, address + size) in attributes.aperture. va, address and size
    // are 4 KiB aligned; va + size within the VA space. Throws baregpu::Error naming the VA when
    // part of the range is already mapped (nothing is changed then: the range is checked first).
    void map(GpuVirtualAddress va, uint64_t address, uint64_t size, const PteAttributes& attributes);
    // Clears the leaves of [va, va + size). Every leaf in the range must be mapped and lie wholly
    // inside it (a 2 MiB leaf is not split). Tables are kept for reuse.
    void unmap(GpuVirtualAddress va, uint64_t size);

    // What the shadow says va maps to, for tests and debugging.
    struct Leaf {
        uint64_t address;   // physical address of va (leaf base + offset)
        uint64_t page_size; // 4 KiB, 2 MiB or 512 MiB
        Aperture aperture;
    };
    std::optional<Leaf> lookup(GpuVirtualAddress va) const;

    struct Stats {
        uint64_t tables = 0, leaves_4k = 0, leaves_2m = 0, leaves_512m = 0, invalidates = 0;
    };
    const Stats& stats() const { return stats_; }

    struct Table;  // the shadow of one directory / table (internal)

private:
    std::string device_;
    MmuVersion version_;
    const MmuGeometry& geometry_;
    VramAllocator& vram_;
    WriteVram64 write64_;
    WriteRegister write_register_;
    std::unique_ptr<Table> root_;
    Stats stats_;

    std::unique_ptr<Table> new_table(unsigned level);
    void write_entry(const Table& t, uint64_t index, uint64_t lo, uint64_t hi);
    uint64_t leaf_size_for(uint64_t va, uint64_t address, uint64_t remaining) const;
    unsigned level_of_size(uint64_t page_size) const;
    void check_range(GpuVirtualAddress va, uint64_t size, const char* what) const;
    void invalidate_tlb();
};

}  // namespace baregpu::nv
