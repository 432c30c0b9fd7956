#include "drivers/am/page_table.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

namespace baregpu::am {

uint64_t encode_entry(unsigned gen, unsigned level, bool leaf, uint64_t paddr, const MapFlags& f, unsigned fragment) {
    uint64_t e = (paddr & pte::kAddressMask) | pte::kValid;
    if (!leaf) return e;  // page directories carry only VALID (amdgpu_vm_pde_update)
    e |= pte::kReadable | pte::frag(fragment);
    if (f.writeable) e |= pte::kWriteable;
    if (f.executable) e |= pte::kExecutable;
    if (f.system) e |= pte::kSystem | pte::kSnooped;
    bool uc = f.uncached || f.system;
    if (gen >= 12) {
        if (uc) e |= pte::mtype_gfx12(pte::kMtypeUc);
        // GFX12: a leaf above the PTB is marked PDE_PTE_GFX12, and PTB leaves carry PTE_IS_PTE;
        // both are bit 63 (amdgpu_vm.h, gmc_v12_0_get_vm_pde/pte).
        e |= level < 3 ? pte::kPdePteGfx12 : pte::kIsPteGfx12;
    } else {
        if (uc) e |= pte::mtype_nv10(pte::kMtypeUc);
        if (level < 3) e |= pte::kPdePteGfx11;
    }
    return e;
}

PageTable::PageTable(PtMemory& memory, uint64_t root_paddr, unsigned gc_generation, uint64_t va_start)
    : mem_(memory), root_(root_paddr), gen_(gc_generation), va_start_(va_start) {}

bool PageTable::is_leaf(uint64_t e, unsigned level) const {
    if (level == 3) return true;
    if (level == 0) return false;
    return gen_ >= 12 ? (e & pte::kPdePteGfx12) != 0 : (e & pte::kPdePteGfx11) != 0;
}

unsigned fragment_of(uint64_t v, uint64_t p, uint64_t range_va, uint64_t range_size) {
    // AMDGPU_PTE_FRAG (amdgpu_vm.h): the page belongs to a block of 2^frag pages that is
    // contiguous and aligned both virtually and physically, so the TLB may cache the block as one.
    // The largest such block inside the mapped range (below 2 MiB: a 2 MiB block gets a PDE leaf).
    for (unsigned f = 8; f > 0; --f) {
        const uint64_t block = 4096ull << f;
        const uint64_t vb = v & ~(block - 1);
        if ((v - vb) != (p & (block - 1))) continue;  // not congruent: VA and PA blocks differ
        if (vb >= range_va && vb + block <= range_va + range_size) return f;
    }
    return 0;
}

void PageTable::map(uint64_t va, uint64_t paddr, uint64_t size, const MapFlags& flags) {
    if (va % 4096 || paddr % 4096 || size % 4096 || size == 0) {
        throw Error("", fmt::format("map: va {:#x}, paddr {:#x}, size {:#x} must be non-empty 4 KiB multiples", va, paddr, size));
    }
    if (va < va_start_ || va + size - 1 > kVmEnd || va + size < va) {
        throw Error("", fmt::format("map: [{:#x}, +{:#x}) outside the VM range [{:#x}, {:#x}]", va, size, va_start_, kVmEnd));
    }
    // Refuse overlaps before writing anything.
    for (uint64_t off = 0; off < size;) {
        if (auto t = translate(va + off)) {
            throw Error("", fmt::format("map: VA {:#x} is already mapped (to {:#x})", va + off, t->paddr));
        }
        off += 4096;
    }
    uint64_t off = 0;
    while (off < size) {
        uint64_t v = va + off, p = paddr + off, left = size - off;
        uint64_t table = root_;
        for (unsigned level = 0; level < 4; ++level) {
            uint64_t span = 1ull << kShift[level];
            uint64_t slot = table + index(v, level) * 8;
            bool leaf_ok = level == 3 || ((level == 1 || level == 2) && (v - va_start_) % span == 0 && p % span == 0 &&
                                          left >= span);
            if (leaf_ok) {
                unsigned frag = level == 3 ? fragment_of(v - va_start_, p, va - va_start_, size) : static_cast<unsigned>(kShift[level] - 12);
                mem_.write64(slot, encode_entry(gen_, level, true, p, flags, frag));
                off += span;
                break;
            }
            uint64_t e = mem_.read64(slot);
            if (!(e & pte::kValid)) {
                uint64_t next = mem_.alloc_table();
                ++tables_;
                mem_.write64(slot, encode_entry(gen_, level, false, next, flags));
                table = next;
            } else {
                table = e & pte::kAddressMask;
            }
        }
    }
}

std::optional<Translation> PageTable::translate(uint64_t va) {
    if (va < va_start_) return std::nullopt;
    uint64_t table = root_;
    for (unsigned level = 0; level < 4; ++level) {
        uint64_t e = mem_.read64(table + index(va, level) * 8);
        if (!(e & pte::kValid)) return std::nullopt;
        if (is_leaf(e, level)) {
            uint64_t span = 1ull << kShift[level];
            return Translation{(e & pte::kAddressMask & ~(span - 1)) + ((va - va_start_) & (span - 1)), span, e, level};
        }
        table = e & pte::kAddressMask;
    }
    return std::nullopt;
}

// Returns true when `table` has no valid entry left.
bool PageTable::unmap_in(uint64_t table, unsigned level, uint64_t va, uint64_t size) {
    uint64_t span = 1ull << kShift[level];
    uint64_t off = 0;
    while (off < size) {
        uint64_t v = va + off;
        uint64_t slot = table + index(v, level) * 8;
        uint64_t e = mem_.read64(slot);
        uint64_t in_entry = span - ((v - va_start_) & (span - 1));
        uint64_t n = std::min(in_entry, size - off);
        if (!(e & pte::kValid)) throw Error("", fmt::format("unmap: VA {:#x} is not mapped", v));
        if (is_leaf(e, level)) {
            if (n != span) throw Error("", fmt::format("unmap: [{:#x}, +{:#x}) splits a {:#x}-byte page", v, n, span));
            mem_.write64(slot, 0);
        } else {
            uint64_t child = e & pte::kAddressMask;
            if (unmap_in(child, level + 1, v, n)) {
                mem_.write64(slot, 0);
                mem_.free_table(child);
                --tables_;
            }
        }
        off += n;
    }
    for (unsigned i = 0; i < 512; ++i) {
        if (mem_.read64(table + i * 8) & pte::kValid) return false;
    }
    return true;
}

void PageTable::unmap(uint64_t va, uint64_t size) {
    if (va % 4096 || size % 4096 || size == 0 || va < va_start_) {
        throw Error("", fmt::format("unmap: va {:#x}, size {:#x} must be 4 KiB multiples inside the VM range", va, size));
    }
    unmap_in(root_, 0, va, size);
}

}  // namespace baregpu::am
