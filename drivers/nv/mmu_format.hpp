// The GPU MMU's page-table entry formats, as the driver writes them.
//   MMU v2 (Pascal .. Ada, AD102): open-gpu-kernel-modules kernel-open/nvidia-uvm/hwref/turing/tu102/dev_mmu.h
//          (NV_MMU_VER2_PDE_*, NV_MMU_VER2_DUAL_PDE_*, NV_MMU_VER2_PTE_*); 49-bit VA, index bits
//          2/9/9/8/9 at shifts 47/38/29/21/12 (kernel-open/nvidia-uvm/uvm_pascal_mmu.c).
//   MMU v3 (Hopper, Blackwell): kernel-open/nvidia-uvm/hwref/hopper/gh100/dev_mmu.h (NV_MMU_VER3_*);
//          57-bit VA, index bits 1/9/9/9/8/9 at shifts 56/47/38/29/21/12 (uvm_hopper_mmu.c).
// The level at shift 21 (PDE0) holds 16-byte dual PDEs (big-page half in the low qword, small-page
// half in the high qword) or a 2 MiB PTE in the low qword; the level at shift 29 (PDE1) holds
// 8-byte PDEs or a 512 MiB PTE (uvm_ampere_mmu.c: "PDE1 (or 512M PTE)"). Bit 0 of an entry at
// those levels is IS_PTE.
#pragma once

#include <array>
#include <cstdint>

namespace baregpu::nv {

enum class MmuVersion { v2, v3 };

// Where an entry points. VRAM addresses are offsets into FB; system addresses are bus addresses.
enum class Aperture { vram, sys_coherent, sys_noncoherent };

const char* aperture_name(Aperture a);

struct MmuLevel {
    unsigned shift;       // VA bit the level's index starts at
    unsigned index_bits;  // entries = 1 << index_bits
    unsigned entry_bytes; // 8, or 16 for the dual PDE level
};

struct MmuGeometry {
    unsigned va_bits;
    unsigned level_count;
    std::array<MmuLevel, 6> levels;  // root first; the last is the 4 KiB PTE level
};

const MmuGeometry& mmu_geometry(MmuVersion v);

// A leaf's attributes. In v2 `volatile_` is PTE_VOL (3:3) and `read_only` PTE_READ_ONLY (6:6);
// in v3 both fold into PCF (7:3): REGULAR_{RW,RO}_ATOMIC_{CACHED,UNCACHED}_ACE.
struct PteAttributes {
    Aperture aperture = Aperture::vram;
    bool volatile_ = false;  // uncached: the default for system memory
    bool read_only = false;
    uint8_t kind = 0;        // v2 KIND 63:56 (8 bits), v3 KIND 11:8 (4 bits); 0 = pitch/generic
};

// A PTE (any level: 4 KiB, 2 MiB at PDE0, 512 MiB at PDE1) for physical address `address`
// (4 KiB aligned). Throws baregpu::Error when the address or kind does not fit its field.
uint64_t encode_pte(MmuVersion v, uint64_t address, const PteAttributes& attributes);
// An 8-byte PDE pointing at the next table (4 KiB aligned). v2 sets NO_ATS and VOL for system
// memory; v3 PCF = VALID_{CACHED,UNCACHED}_ATS_NOT_ALLOWED.
uint64_t encode_pde(MmuVersion v, uint64_t table_address, Aperture aperture);
// A dual PDE whose small-page (4 KiB) half points at `small_table` and whose big half is invalid.
// [0] is the low qword (bits 63:0), [1] the high qword (bits 127:64).
std::array<uint64_t, 2> encode_dual_pde_small(MmuVersion v, uint64_t small_table, Aperture aperture);

// ---- the TLB invalidation registers (BAR0) ----
// NV_VIRTUAL_FUNCTION_FULL_PHYS_OFFSET 0x00B80000 (src/common/inc/swref/published/turing/tu102/dev_vm.h
// and ampere/ga100/dev_vm.h): the VF register window seen through BAR0 on the physical function.
inline constexpr uint32_t NV_VIRTUAL_FUNCTION_FULL_PHYS_OFFSET = 0x00b80000;
// NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB 0x30A0: APERTURE 1:1 (0 VID_MEM, 1 SYS_MEM), ADDR 31:4 = pdb >> 12.
inline constexpr uint32_t NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB = 0x30a0;
// NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_UPPER_PDB 0x30A4: ADDR 19:0 = pdb >> 40.
inline constexpr uint32_t NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_UPPER_PDB = 0x30a4;
// NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE 0x30B0: ALL_VA 0:0, ALL_PDB 1:1, HUBTLB_ONLY 2:2, TRIGGER 31:31.
inline constexpr uint32_t NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE = 0x30b0;
inline constexpr uint32_t kMmuInvalidateAllVa = 1u << 0;
inline constexpr uint32_t kMmuInvalidateAllPdb = 1u << 1;
inline constexpr uint32_t kMmuInvalidateTrigger = 1u << 31;

}  // namespace baregpu::nv
