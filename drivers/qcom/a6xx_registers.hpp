// The A6xx / A7xx registers the compute path writes, as dword offsets (what type-4 packets carry),
// from mesa src/freedreno/registers/adreno/a6xx.xml at bminor/mesa-mesa 011ba184 (which describes
// both generations; A7XX variants are marked variants="A7XX-" there). Older mesa and the Linux
// copy name some of them differently (SP_CS_NDRANGE_0 was HLSQ_CS_NDRANGE_0, SP_CS_BASE was
// SP_CS_OBJ_START).
#pragma once

#include <cstdint>

namespace baregpu::qcom::a6xx {

inline constexpr uint32_t CP_ALWAYS_ON_COUNTER = 0x0980;  // reg64, variants A6XX-A7XX
inline constexpr uint64_t kAlwaysOnHz = 19'200'000;        // the always-on counter's rate

// Both generations (the compute program state of mesa computerator a6xx.cc cs_program_emit).
inline constexpr uint32_t SP_CS_CNTL_0 = 0xa9b0;
inline constexpr uint32_t SP_CS_CNTL_1 = 0xa9b1;
inline constexpr uint32_t SP_CS_BASE = 0xa9b4;             // reg64: the program
inline constexpr uint32_t SP_CS_PVT_MEM_PARAM = 0xa9b6;
inline constexpr uint32_t SP_CS_PVT_MEM_BASE = 0xa9b7;     // reg64
inline constexpr uint32_t SP_CS_PVT_MEM_SIZE = 0xa9b9;
inline constexpr uint32_t SP_CS_CONFIG = 0xa9bb;
inline constexpr uint32_t SP_CS_INSTR_SIZE = 0xa9bc;
inline constexpr uint32_t SP_CS_PVT_MEM_STACK_OFFSET = 0xa9bd;
inline constexpr uint32_t SP_MODE_CNTL = 0xab00;
// A6XX only (A7XX moved them, below).
inline constexpr uint32_t SP_CS_CONST_CONFIG = 0xb987;
inline constexpr uint32_t SP_CS_NDRANGE_0 = 0xb990;        // then NDRANGE_1..6 (global size / offset x, y, z)
inline constexpr uint32_t SP_CS_CONST_CONFIG_0 = 0xb997;
inline constexpr uint32_t SP_CS_WGE_CNTL = 0xb998;
inline constexpr uint32_t SP_CS_KERNEL_GROUP_X = 0xb999;   // _Y, _Z follow
inline constexpr uint32_t SP_UPDATE_CNTL = 0xbb08;

// Field encodings (a6xx.xml bitfields; "units" where the xml shifts the value right).
// SP_MODE_CNTL: CONSTANT_DEMOTION_ENABLE bit 0, ISAMMODE bits 1-2 (ISAMMODE_GL = 2).
inline constexpr uint32_t kModeCntl = 0x1 | 2u << 1;
// SP_UPDATE_CNTL: VS, HS, DS, GS, FS, CS state bits 0-5 and GFX_UAV bit 7, as computerator sets them.
inline constexpr uint32_t kUpdateCntl = 0x3f | 0x80;
// SP_CS_CONST_CONFIG: CONSTLEN bits 0-7 in units of 4 vec4 (shr 2), ENABLED bit 8.
constexpr uint32_t const_config(uint32_t constlen_vec4) { return ((constlen_vec4 / 4) & 0xff) | 0x100; }
// SP_CS_CNTL_0: HALFREGFOOTPRINT 1-6, FULLREGFOOTPRINT 7-12, BRANCHSTACK 14-19, THREADSIZE 20 (THREAD64 = 0).
constexpr uint32_t cs_cntl_0(uint32_t full_regs, uint32_t half_regs, uint32_t branchstack, bool thread128) {
    return (half_regs & 0x3f) << 1 | (full_regs & 0x3f) << 7 | (branchstack & 0x3f) << 14 | uint32_t(thread128) << 20;
}
// SP_CS_CNTL_1: SHARED_SIZE 0-4 (KiB, at least 1, computerator's max((shared - 1) / 1024, 1)),
// CONSTANTRAMMODE 5-6 (CONSTLEN_128 / 192 / 256 / 512 = 0..3, the smallest that holds constlen).
constexpr uint32_t cs_cntl_1(uint32_t shared_bytes, uint32_t constlen_vec4) {
    uint32_t kib = shared_bytes > 1024 ? (shared_bytes - 1) / 1024 : 1;
    uint32_t mode = constlen_vec4 > 256 ? 3 : constlen_vec4 > 192 ? 2 : constlen_vec4 > 128 ? 1 : 0;
    return (kib & 0x1f) | mode << 5;
}
// SP_CS_CONFIG: ENABLED bit 8, NUAV bits 22-27.
constexpr uint32_t cs_config(uint32_t uavs) { return 0x100 | (uavs & 0x3f) << 22; }
// "No register": regid(63, 0), what computerator gives the ids a program does not read.
inline constexpr uint32_t kRegidNone = 0xfc;
// SP_CS_CONST_CONFIG_0 (A6XX) and SP_CS_WIE_CNTL_0 (A7XX): WGIDCONSTID 0-7, WGSIZECONSTID 8-15,
// WGOFFSETCONSTID 16-23, LOCALIDREGID 24-31.
constexpr uint32_t wie_cntl_0(uint32_t wg_id_const, uint32_t local_id_reg) {
    return (wg_id_const & 0xff) | kRegidNone << 8 | kRegidNone << 16 | (local_id_reg & 0xff) << 24;
}
// SP_CS_WGE_CNTL (A6XX): LINEARLOCALIDREGID 0-7, THREADSIZE bit 9.
constexpr uint32_t wge_cntl(bool thread128) { return kRegidNone | uint32_t(thread128) << 9; }
// What CP_LOAD_STATE6(ST6_SHADER) preloads at most: a6xx_gen1's instr_cache_size (mesa
// freedreno_devices.py); later chips hold 127, so this is never too many.
inline constexpr uint32_t kInstrCacheUnits = 64;

// SP_CS_NDRANGE_0: KERNELDIM bits 0-1, LOCALSIZEX 2-11, LOCALSIZEY 12-21, LOCALSIZEZ 22-31 (each
// "value minus one").
constexpr uint32_t ndrange0(uint32_t x, uint32_t y, uint32_t z) {
    return 3u | ((x - 1) & 0x3ff) << 2 | ((y - 1) & 0x3ff) << 12 | ((z - 1) & 0x3ff) << 22;
}

}  // namespace baregpu::qcom::a6xx

namespace baregpu::qcom::a7xx {

// Where A7XX moved the A6XX compute registers above (same a6xx.xml, variants="A7XX-").
inline constexpr uint32_t SP_CS_NDRANGE_0 = 0xa9d4;        // NDRANGE_1..6 at 0xa9d5..0xa9da
inline constexpr uint32_t SP_CS_WGE_CNTL = 0xa9db;
inline constexpr uint32_t SP_CS_KERNEL_GROUP_X = 0xa9dc;   // _Y 0xa9dd, _Z 0xa9de
inline constexpr uint32_t SP_CS_NDRANGE_7 = 0xa9df;        // LOCALSIZEX/Y/Z (minus one) at bits 2/12/22
inline constexpr uint32_t SP_CS_CONST_CONFIG = 0xa9cd;     // A6XX 0xb987
inline constexpr uint32_t SP_UPDATE_CNTL = 0xab1f;
inline constexpr uint32_t SP_CS_WIE_CNTL_0 = 0xa9c2;       // then SP_CS_WIE_CNTL_1
inline constexpr uint32_t SP_PS_WAVE_CNTL = 0xa9c6;        // THREADSIZE bit 0
inline constexpr uint32_t SP_REG_PROG_ID_0 = 0xa9c8;       // _1.._3 follow
// SP_CS_WGE_CNTL (A7XX): LINEARLOCALIDREGID 0-7, THREADSIZE bit 9, WORKGROUPRASTORDERZFIRSTEN bit
// 11, WGTILEWIDTH 20-25, WGTILEHEIGHT 26-31 (computerator: width 4, height 3/5/9/17 as the local
// y size is a multiple of 8/4/2/none).
constexpr uint32_t wge_cntl(bool thread128, uint32_t local_y) {
    uint32_t height = local_y % 8 == 0 ? 3 : local_y % 4 == 0 ? 5 : local_y % 2 == 0 ? 9 : 17;
    return a6xx::kRegidNone | uint32_t(thread128) << 9 | 1u << 11 | 4u << 20 | height << 26;
}
// SP_CS_WIE_CNTL_1: LINEARLOCALIDREGID 0-7, THREADSIZE bit 8, WORKITEMRASTORDER bit 15 (LINEAR = 0).
constexpr uint32_t wie_cntl_1(bool thread128) { return a6xx::kRegidNone | uint32_t(thread128) << 8; }
// SP_CS_NDRANGE_7: the local size as in SP_CS_NDRANGE_0, without KERNELDIM.
constexpr uint32_t ndrange7(uint32_t x, uint32_t y, uint32_t z) { return ((x - 1) & 0x3ff) << 2 | ((y - 1) & 0x3ff) << 12 | ((z - 1) & 0x3ff) << 22; }

}  // namespace baregpu::qcom::a7xx

namespace baregpu::qcom {

// What differs between the generations in the packets drivers/qcom emits.
struct Generation {
    enum Family : uint8_t { a6xx, a7xx } family = a6xx;
    uint32_t ndrange0 = a6xx::SP_CS_NDRANGE_0;
    uint32_t kernel_group_x = a6xx::SP_CS_KERNEL_GROUP_X;
    uint32_t const_config = a6xx::SP_CS_CONST_CONFIG;
    uint32_t update_cntl = a6xx::SP_UPDATE_CNTL;

    static constexpr Generation of(uint32_t core) {
        Generation g;
        if (core >= 7) g = {a7xx, a7xx::SP_CS_NDRANGE_0, a7xx::SP_CS_KERNEL_GROUP_X, a7xx::SP_CS_CONST_CONFIG, a7xx::SP_UPDATE_CNTL};
        return g;
    }
};

}  // namespace baregpu::qcom
