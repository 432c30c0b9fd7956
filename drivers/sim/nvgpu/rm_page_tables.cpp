#include "rm_page_tables.hpp"

#include <atomic>
#include <cstring>

namespace baregpu::sim::nvgpu {

namespace {

constexpr uint64_t kTablePage = 4096;
// dev_mmu.h VER2, root first: PDE3 (2 index bits), PDE2, PDE1 (9 bits), PDE0 (dual, 8 bits, 16-byte
// entries), PTE (9 bits); VA shifts 47 / 38 / 29 / 21 / 12.
struct Level {
    unsigned shift, index_bits, entry_bytes;
};
constexpr Level kLevels[] = {{47, 2, 8}, {38, 9, 8}, {29, 9, 8}, {21, 8, 16}, {12, 9, 8}};
constexpr unsigned kPteLevel = 4, kDualLevel = 3;

// NV_MMU_VER2_PDE_APERTURE 2:1 (1 VIDEO_MEMORY), NV_MMU_VER2_PDE_ADDRESS_VID (35-3):8 (>> 12).
constexpr uint64_t pde_video(uint64_t table) { return (uint64_t{1} << 1) | ((table >> 12) << 8); }
// NV_MMU_VER2_PTE_VALID 0:0, APERTURE 2:1 (0 VIDEO, 2 SYSTEM_COHERENT), VOL 3:3, ADDRESS_{VID,SYS} from 8 (>> 12).
constexpr uint64_t pte(bool vram, uint64_t address) {
    return 1 | (uint64_t{vram ? 0u : 2u} << 1) | (uint64_t{vram ? 0u : 1u} << 3) | ((address >> 12) << 8);
}

}  // namespace

uint64_t RmPageTables::read64(uint64_t at) const {
    uint64_t v;
    std::memcpy(&v, vram_.data() + at, 8);
    return v;
}

void RmPageTables::write64(uint64_t at, uint64_t value) {
    // One store per entry: the engine thread may walk while RM writes another range.
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(vram_.data() + at)).store(value, std::memory_order_release);
}

std::optional<uint64_t> RmPageTables::new_root() { return alloc_table_(); }

std::optional<uint64_t> RmPageTables::pte_slot(uint64_t pdb, uint64_t va, bool create) {
    uint64_t table = pdb;
    for (unsigned level = 0; level < kPteLevel; ++level) {
        const Level& l = kLevels[level];
        const uint64_t index = (va >> l.shift) & ((uint64_t{1} << l.index_bits) - 1);
        // The dual PDE's small-page half (NV_MMU_VER2_DUAL_PDE_*_SMALL, bits 66:65 / 117:72) is the
        // entry's high qword; its big half stays invalid (no 64 KiB pages).
        const uint64_t at = table + index * l.entry_bytes + (level == kDualLevel ? 8 : 0);
        uint64_t entry = read64(at);
        if (((entry >> 1) & 3) == 0) {
            if (!create) return std::nullopt;
            std::optional<uint64_t> next = alloc_table_();
            if (!next) return std::nullopt;
            entry = pde_video(*next);
            write64(at, entry);
        }
        table = ((entry >> 8) & ((uint64_t{1} << 46) - 1)) << 12;
    }
    return table + ((va >> 12) & 511) * 8;
}

bool RmPageTables::map(uint64_t pdb, uint64_t va, uint64_t length, bool vram, uint64_t address) {
    for (uint64_t done = 0; done < length; done += kTablePage) {
        std::optional<uint64_t> slot = pte_slot(pdb, va + done, true);
        if (!slot) return false;
        write64(*slot, pte(vram, address + done));
    }
    return true;
}

void RmPageTables::unmap(uint64_t pdb, uint64_t va, uint64_t length) {
    for (uint64_t done = 0; done < length; done += kTablePage) {
        if (std::optional<uint64_t> slot = pte_slot(pdb, va + done, false)) write64(*slot, 0);
    }
}

}  // namespace baregpu::sim::nvgpu
