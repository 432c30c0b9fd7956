#include "mmu_format.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

namespace baregpu::nv {

namespace {

// Levels: root first. Entry counts from uvm_pascal_mmu.c / uvm_hopper_mmu.c (index_bits_*).
constexpr MmuGeometry kV2{49, 5, {{{47, 2, 8}, {38, 9, 8}, {29, 9, 8}, {21, 8, 16}, {12, 9, 8}, {0, 0, 0}}}};
constexpr MmuGeometry kV3{57, 6, {{{56, 1, 8}, {47, 9, 8}, {38, 9, 8}, {29, 9, 8}, {21, 8, 16}, {12, 9, 8}}}};

constexpr uint64_t field(uint64_t value, unsigned lo) { return value << lo; }

// Aperture field values. PTE (dev_mmu.h NV_MMU_VER2/3_PTE_APERTURE): 0 VIDEO, 1 PEER, 2 SYS_COH,
// 3 SYS_NONCOH. PDE (NV_MMU_VER2/3_PDE_APERTURE): 0 INVALID, 1 VIDEO, 2 SYS_COH, 3 SYS_NONCOH.
constexpr uint64_t pte_aperture(Aperture a) {
    return a == Aperture::vram ? 0 : a == Aperture::sys_coherent ? 2 : 3;
}
constexpr uint64_t pde_aperture(Aperture a) {
    return a == Aperture::vram ? 1 : a == Aperture::sys_coherent ? 2 : 3;
}

void check_address(uint64_t address, unsigned bits, Aperture a, const char* what) {
    if (address % 4096 != 0 || (bits < 64 && (address >> bits) != 0))
        throw Error("", fmt::format("MMU: {} address {:#x} ({}) must be 4 KiB aligned and below 2^{}", what, address,
                                    aperture_name(a), bits));
}

}  // namespace

const char* aperture_name(Aperture a) {
    switch (a) {
    case Aperture::vram: return "VRAM";
    case Aperture::sys_coherent: return "system coherent";
    case Aperture::sys_noncoherent: return "system non-coherent";
    }
    return "?";
}

const MmuGeometry& mmu_geometry(MmuVersion v) { return v == MmuVersion::v2 ? kV2 : kV3; }

uint64_t encode_pte(MmuVersion v, uint64_t address, const PteAttributes& at) {
    if (v == MmuVersion::v2) {
        // VER2_PTE: VALID 0:0, APERTURE 2:1, VOL 3:3, READ_ONLY 6:6, ADDRESS_VID (35-3):8 (37-bit
        // FB offsets), ADDRESS_SYS 53:8 (58-bit bus addresses), both address >> 12; KIND 63:56.
        check_address(address, at.aperture == Aperture::vram ? 37 : 58, at.aperture, "PTE");
        return field(1, 0) | field(pte_aperture(at.aperture), 1) | field(at.volatile_ ? 1 : 0, 3) |
               field(at.read_only ? 1 : 0, 6) | field(address >> 12, 8) | field(at.kind, 56);
    }
    // VER3_PTE: VALID 0:0, APERTURE 2:1, PCF 7:3, KIND 11:8, ADDRESS_VID 39:12, ADDRESS_SYS 51:12.
    check_address(address, at.aperture == Aperture::vram ? 40 : 52, at.aperture, "PTE");
    if (at.kind > 0xf) throw Error("", fmt::format("MMU v3: PTE kind {:#x} does not fit KIND 11:8", at.kind));
    // PCF: REGULAR_RW_ATOMIC_CACHED_ACE 0x0, REGULAR_RW_ATOMIC_UNCACHED_ACE 0x1,
    //      REGULAR_RO_ATOMIC_CACHED_ACE 0x4, REGULAR_RO_ATOMIC_UNCACHED_ACE 0x5.
    uint64_t pcf = (at.read_only ? 4u : 0u) | (at.volatile_ ? 1u : 0u);
    return field(1, 0) | field(pte_aperture(at.aperture), 1) | field(pcf, 3) | field(at.kind, 8) |
           (address & ((uint64_t{1} << 52) - 1) & ~uint64_t{0xfff});
}

uint64_t encode_pde(MmuVersion v, uint64_t table, Aperture a) {
    bool sys = a != Aperture::vram;
    if (v == MmuVersion::v2) {
        // VER2_PDE: IS_PTE 0:0 = 0, APERTURE 2:1, VOL 3:3, NO_ATS 5:5, ADDRESS 53:8 = table >> 12.
        check_address(table, sys ? 58 : 37, a, "PDE");
        return field(pde_aperture(a), 1) | field(sys ? 1 : 0, 3) | field(1, 5) | field(table >> 12, 8);
    }
    // VER3_PDE: IS_PTE 0:0 = 0, APERTURE 2:1, PCF 5:3 (VALID_CACHED_ATS_NOT_ALLOWED 2,
    // VALID_UNCACHED_ATS_NOT_ALLOWED 3), ADDRESS 51:12 (the address in place).
    check_address(table, 52, a, "PDE");
    return field(pde_aperture(a), 1) | field(sys ? 3 : 2, 3) | table;
}

std::array<uint64_t, 2> encode_dual_pde_small(MmuVersion v, uint64_t table, Aperture a) {
    bool sys = a != Aperture::vram;
    if (v == MmuVersion::v2) {
        // VER2_DUAL_PDE: APERTURE_BIG 2:1 = INVALID, NO_ATS 5:5; APERTURE_SMALL 66:65, VOL_SMALL 67:67,
        // ADDRESS_SMALL 117:72 = table >> 12.
        check_address(table, sys ? 58 : 37, a, "dual PDE");
        return {field(1, 5), field(pde_aperture(a), 1) | field(sys ? 1 : 0, 3) | field(table >> 12, 8)};
    }
    // VER3_DUAL_PDE: APERTURE_BIG 2:1 = INVALID, PCF_BIG 5:3; APERTURE_SMALL 66:65, PCF_SMALL 69:67,
    // ADDRESS_SMALL 115:76 (bits 51:12 of the high qword: the address in place).
    check_address(table, 52, a, "dual PDE");
    return {field(2, 3), field(pde_aperture(a), 1) | field(sys ? 3 : 2, 3) | table};
}

}  // namespace baregpu::nv
