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

inline constexpr uint32_t SP_CS_CNTL_0 = 0xa9b0;
inline constexpr uint32_t SP_CS_CNTL_1 = 0xa9b1;
inline constexpr uint32_t SP_CS_BASE = 0xa9b4;             // reg64: the program
inline constexpr uint32_t SP_CS_PVT_MEM_PARAM = 0xa9b6;
inline constexpr uint32_t SP_CS_PVT_MEM_BASE = 0xa9b7;     // reg64
inline constexpr uint32_t SP_CS_PVT_MEM_SIZE = 0xa9b9;
inline constexpr uint32_t SP_CS_INSTR_SIZE = 0xa9bc;
inline constexpr uint32_t SP_CS_PVT_MEM_STACK_OFFSET = 0xa9bd;
inline constexpr uint32_t SP_CS_NDRANGE_0 = 0xb990;        // A6XX; then NDRANGE_1..6 (global size / offset x, y, z)
inline constexpr uint32_t SP_CS_CONST_CONFIG_0 = 0xb997;   // A6XX
inline constexpr uint32_t SP_CS_WGE_CNTL = 0xb998;         // A6XX
inline constexpr uint32_t SP_CS_KERNEL_GROUP_X = 0xb999;   // A6XX; _Y, _Z follow
inline constexpr uint32_t SP_UPDATE_CNTL = 0xbb08;         // A6XX

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
inline constexpr uint32_t SP_CS_NDRANGE_7 = 0xa9df;        // the size of the last workgroup (new)
inline constexpr uint32_t SP_CS_CONST_CONFIG = 0xa9cd;     // A6XX 0xb987
inline constexpr uint32_t SP_UPDATE_CNTL = 0xab1f;

}  // namespace baregpu::qcom::a7xx

namespace baregpu::qcom {

// What differs between the generations in the packets drivers/qcom emits.
struct Generation {
    enum Family : uint8_t { a6xx, a7xx } family = a6xx;
    uint32_t ndrange0 = a6xx::SP_CS_NDRANGE_0;
    uint32_t kernel_group_x = a6xx::SP_CS_KERNEL_GROUP_X;

    static constexpr Generation of(uint32_t core) {
        Generation g;
        if (core >= 7) g = {a7xx, a7xx::SP_CS_NDRANGE_0, a7xx::SP_CS_KERNEL_GROUP_X};
        return g;
    }
};

}  // namespace baregpu::qcom
