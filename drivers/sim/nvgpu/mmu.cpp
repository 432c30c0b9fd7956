#include "mmu.hpp"

#include <fmt/format.h>

#include <cstring>
#include <vector>

namespace baregpu::sim::nvgpu {

namespace {

struct Level {
    unsigned shift, index_bits, entry_bytes;
};
// uvm_pascal_mmu.c (49-bit) / uvm_hopper_mmu.c (57-bit): root first, the 4 KiB PTE level last.
constexpr Level kV2[] = {{47, 2, 8}, {38, 9, 8}, {29, 9, 8}, {21, 8, 16}, {12, 9, 8}};
constexpr Level kV3[] = {{56, 1, 8}, {47, 9, 8}, {38, 9, 8}, {29, 9, 8}, {21, 8, 16}, {12, 9, 8}};

constexpr uint64_t get(uint64_t word, unsigned hi, unsigned lo) {
    return (word >> lo) & ((hi - lo == 63) ? ~uint64_t{0} : ((uint64_t{1} << (hi - lo + 1)) - 1));
}

}  // namespace

const char* mmu_fault_type_name(MmuFaultType t) {
    switch (t) {
    case MmuFaultType::pde_invalid: return "PDE invalid";
    case MmuFaultType::pte_invalid: return "PTE invalid";
    case MmuFaultType::read_only: return "write to a read-only page";
    case MmuFaultType::va_limit: return "VA outside the address space";
    case MmuFaultType::unbound: return "page or table outside VRAM / unreachable system memory";
    }
    return "?";
}

std::string MmuFault::describe() const {
    return fmt::format("MMU fault: {} of VA {:#x}: {} (walk level {})", access == MmuAccess::read ? "read" : "write",
                       va, mmu_fault_type_name(type), level);
}

bool Mmu::read_table_qword(bool vram, uint64_t address, uint64_t& out) const {
    if (vram) {
        if (address > vram_.size() || vram_.size() - address < 8) return false;
        std::memcpy(&out, vram_.data() + address, 8);
        return true;
    }
    if (!port_) return false;
    std::byte b[8];
    if (!port_->dma_read(BusAddress(address), b)) return false;
    std::memcpy(&out, b, 8);
    return true;
}

std::variant<MmuTranslation, MmuFault> Mmu::translate(uint64_t pdb, MmuFormat format, uint64_t va,
                                                      MmuAccess access) const {
    const bool v3 = format == MmuFormat::v3;
    std::span<const Level> levels = v3 ? std::span<const Level>(kV3) : std::span<const Level>(kV2);
    const unsigned va_bits = v3 ? 57 : 49;
    auto fault = [&](MmuFaultType t, unsigned level) { return MmuFault{va, access, t, level}; };
    if (va >> va_bits) return fault(MmuFaultType::va_limit, 0);
    bool table_vram = true;
    uint64_t table = pdb;
    for (unsigned level = 0; level < levels.size(); ++level) {
        const Level& l = levels[level];
        uint64_t index = get(va, l.shift + l.index_bits - 1, l.shift);
        uint64_t at = table + index * l.entry_bytes;
        uint64_t lo = 0, hi = 0;
        if (!read_table_qword(table_vram, at, lo)) return fault(MmuFaultType::unbound, level);
        if (l.entry_bytes == 16 && !read_table_qword(table_vram, at + 8, hi)) return fault(MmuFaultType::unbound, level);
        const bool last = level + 1 == levels.size();
        // A PTE: the last level, or IS_PTE (bit 0) at PDE1 (512 MiB) / PDE0 (2 MiB).
        const bool leaf_capable = last || l.shift == 29 || l.shift == 21;
        if (last || (leaf_capable && get(lo, 0, 0) == 1)) {
            if (get(lo, 0, 0) == 0) return fault(MmuFaultType::pte_invalid, level);  // PTE_VALID 0:0
            // PTE_APERTURE 2:1: 0 VIDEO, 1 PEER, 2 SYS_COH, 3 SYS_NONCOH.
            uint64_t aperture = get(lo, 2, 1);
            if (aperture == 1) return fault(MmuFaultType::unbound, level);  // peers are not modelled
            MmuTranslation t;
            t.vram = aperture == 0;
            t.page_size = uint64_t{1} << l.shift;
            uint64_t base;
            if (!v3) {
                // VER2: ADDRESS_VID (35-3):8, ADDRESS_SYS 53:8, both >> 12; READ_ONLY 6:6.
                base = (t.vram ? get(lo, 32, 8) : get(lo, 53, 8)) << 12;
                t.read_only = get(lo, 6, 6) != 0;
            } else {
                // VER3: ADDRESS_VID 39:12, ADDRESS_SYS 51:12 in place; PCF 7:3 bit 2 = RO in REGULAR_*.
                base = t.vram ? (lo & 0x000000fffffff000ull) : (lo & 0x000ffffffffff000ull);
                t.read_only = (get(lo, 7, 3) & 4) != 0;
            }
            if (base & (t.page_size - 1)) return fault(MmuFaultType::pte_invalid, level);  // misaligned big page
            t.address = base + (va & (t.page_size - 1));
            if (access == MmuAccess::write && t.read_only) return fault(MmuFaultType::read_only, level);
            if (t.vram && t.address >= vram_.size()) return fault(MmuFaultType::unbound, level);
            return t;
        }
        // A PDE. At the dual level the small-page half (high qword) is what a 4 KiB walk follows:
        // VER2 APERTURE_SMALL 66:65 and ADDRESS_SMALL 117:72 (>> 12); VER3 APERTURE_SMALL 66:65,
        // ADDRESS_SMALL 115:76 (in place). Otherwise VER2 APERTURE 2:1, ADDRESS 53:8; VER3 APERTURE 2:1,
        // ADDRESS 51:12. Aperture 0 = INVALID, 1 VIDEO, 2 SYS_COH, 3 SYS_NONCOH.
        uint64_t pde = l.entry_bytes == 16 ? hi : lo;
        uint64_t aperture = get(pde, 2, 1);
        if (aperture == 0) return fault(MmuFaultType::pde_invalid, level);
        table_vram = aperture == 1;
        table = v3 ? (pde & 0x000ffffffffff000ull) : (get(pde, 53, 8) << 12);
    }
    return fault(MmuFaultType::pte_invalid, static_cast<unsigned>(levels.size()) - 1);
}

template <typename Span, typename Copy>
std::optional<MmuFault> Mmu::access(uint64_t pdb, MmuFormat format, uint64_t va, Span data, MmuAccess kind,
                                    Copy copy) const {
    struct Piece { MmuTranslation t; uint64_t offset, bytes; };
    std::vector<Piece> pieces;
    for (uint64_t done = 0; done < data.size();) {
        auto r = translate(pdb, format, va + done, kind);
        if (auto* f = std::get_if<MmuFault>(&r)) return *f;
        const auto& t = std::get<MmuTranslation>(r);
        uint64_t in_page = t.page_size - ((va + done) & (t.page_size - 1));
        uint64_t n = std::min<uint64_t>(in_page, data.size() - done);
        if (t.vram && vram_.size() - t.address < n) return MmuFault{va + done, kind, MmuFaultType::unbound, 0};
        pieces.push_back({t, done, n});
        done += n;
    }
    for (const auto& p : pieces)
        if (!copy(p.t, data.subspan(p.offset, p.bytes))) return MmuFault{va + p.offset, kind, MmuFaultType::unbound, 0};
    return std::nullopt;
}

std::optional<MmuFault> Mmu::read(uint64_t pdb, MmuFormat format, uint64_t va, std::span<std::byte> out) const {
    return access(pdb, format, va, out, MmuAccess::read, [&](const MmuTranslation& t, std::span<std::byte> d) {
        if (t.vram) {
            std::memcpy(d.data(), vram_.data() + t.address, d.size());
            return true;
        }
        return port_ != nullptr && port_->dma_read(BusAddress(t.address), d);
    });
}

std::optional<MmuFault> Mmu::write(uint64_t pdb, MmuFormat format, uint64_t va, std::span<const std::byte> in) const {
    return access(pdb, format, va, in, MmuAccess::write, [&](const MmuTranslation& t, std::span<const std::byte> d) {
        if (t.vram) {
            std::memcpy(vram_.data() + t.address, d.data(), d.size());
            return true;
        }
        return port_ != nullptr && port_->dma_write(BusAddress(t.address), d);
    });
}

std::byte* Mmu::vram_pointer(uint64_t pdb, MmuFormat format, uint64_t va, uint64_t bytes, MmuAccess access) const {
    auto r = translate(pdb, format, va, access);
    const auto* t = std::get_if<MmuTranslation>(&r);
    if (!t || !t->vram) return nullptr;
    uint64_t in_page = t->page_size - (va & (t->page_size - 1));
    if (bytes > in_page || vram_.size() - t->address < bytes) return nullptr;
    return vram_.data() + t->address;
}

}  // namespace baregpu::sim::nvgpu
