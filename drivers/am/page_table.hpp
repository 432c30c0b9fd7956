// VMID0's GPU page tables: 4 levels of 512 8-byte entries (PDB2 -> PDB1 -> PDB0 -> PTB), leaves
// of 1 GiB (at PDB1), 2 MiB (at PDB0) or 4 KiB (PTB), indexed by VA - PAGE_TABLE_START
// (tinygrad amdev.py AMPageTableEntry). Entry bits from Linux amdgpu_vm.h, which differ per GC generation.
// The tables live wherever PtMemory says (VRAM on a device, a vector in unit tests).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace baregpu::am {

namespace pte {
// amdgpu_vm.h
inline constexpr uint64_t kValid = 1ull << 0;       // AMDGPU_PTE_VALID
inline constexpr uint64_t kSystem = 1ull << 1;      // AMDGPU_PTE_SYSTEM
inline constexpr uint64_t kSnooped = 1ull << 2;     // AMDGPU_PTE_SNOOPED
inline constexpr uint64_t kExecutable = 1ull << 4;  // AMDGPU_PTE_EXECUTABLE
inline constexpr uint64_t kReadable = 1ull << 5;    // AMDGPU_PTE_READABLE
inline constexpr uint64_t kWriteable = 1ull << 6;   // AMDGPU_PTE_WRITEABLE
inline constexpr uint64_t frag(uint64_t x) { return (x & 0x1f) << 7; }  // AMDGPU_PTE_FRAG
inline constexpr uint64_t kPdePteGfx11 = 1ull << 54;  // AMDGPU_PDE_PTE: leaf above the PTB (GFX10/11)
inline constexpr uint64_t kPdePteGfx12 = 1ull << 63;  // AMDGPU_PDE_PTE_GFX12
inline constexpr uint64_t kIsPteGfx12 = 1ull << 63;   // AMDGPU_PTE_IS_PTE (GFX12 PTB leaves)
inline constexpr uint64_t mtype_nv10(uint64_t m) { return m << 48; }   // AMDGPU_PTE_MTYPE_NV10
inline constexpr uint64_t mtype_gfx12(uint64_t m) { return m << 54; }  // AMDGPU_PTE_MTYPE_GFX12
inline constexpr uint64_t kMtypeUc = 3;                                 // MTYPE_UC
inline constexpr uint64_t kAddressMask = 0x0000FFFFFFFFF000ull;
}  // namespace pte

inline constexpr uint64_t kVmStart = 0x2000'0000'0000ull;  // PAGE_TABLE_START_ADDR << 12
inline constexpr uint64_t kVmEnd = 0x7fff'ffff'ffffull;    // PAGE_TABLE_END_ADDR << 12 | 0xfff

struct MapFlags {
    bool system = false;  // host memory: SYSTEM | SNOOPED, MTYPE_UC
    bool uncached = false;
    bool executable = true;
    bool writeable = true;
};

// Encodes one entry. level: 0 PDB2 .. 3 PTB. leaf: a page (vs a pointer to the next table).
uint64_t encode_entry(unsigned gc_generation, unsigned level, bool leaf, uint64_t paddr, const MapFlags& flags,
                      unsigned fragment = 0);

// The AMDGPU_PTE_FRAG value of the 4 KiB page at `va` (relative to the table's VA start) mapping
// `paddr`, in a mapping of [range_va, range_va + range_size) that is contiguous in both spaces.
unsigned fragment_of(uint64_t va, uint64_t paddr, uint64_t range_va, uint64_t range_size);

class PtMemory {
public:
    virtual ~PtMemory() = default;
    virtual uint64_t read64(uint64_t paddr) = 0;
    virtual void write64(uint64_t paddr, uint64_t value) = 0;
    virtual uint64_t alloc_table() = 0;  // a zeroed, 4 KiB-aligned 4 KiB table
    virtual void free_table(uint64_t paddr) = 0;
};

struct Translation {
    uint64_t paddr = 0;
    uint64_t page_size = 0;
    uint64_t entry = 0;
    unsigned level = 0;
};

class PageTable {
public:
    PageTable(PtMemory& memory, uint64_t root_paddr, unsigned gc_generation, uint64_t va_start = kVmStart);

    // Maps [va, va+size) to [paddr, paddr+size) with the largest leaves alignment allows.
    // Throws when any page is already mapped. va, paddr, size: 4 KiB multiples.
    void map(uint64_t va, uint64_t paddr, uint64_t size, const MapFlags& flags = {});
    // Invalidates the entries and frees tables left with no valid entry. Throws on unmapped pages.
    void unmap(uint64_t va, uint64_t size);
    std::optional<Translation> translate(uint64_t va);
    uint64_t root() const { return root_; }
    unsigned tables_in_use() const { return tables_; }

private:
    static constexpr unsigned kShift[4] = {39, 30, 21, 12};
    uint64_t index(uint64_t va, unsigned level) const { return ((va - va_start_) >> kShift[level]) & 511; }
    bool is_leaf(uint64_t entry, unsigned level) const;
    bool unmap_in(uint64_t table, unsigned level, uint64_t va, uint64_t size);

    PtMemory& mem_;
    uint64_t root_;
    unsigned gen_;
    uint64_t va_start_;
    unsigned tables_ = 1;
};

}  // namespace baregpu::am
