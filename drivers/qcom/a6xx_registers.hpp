// The A6xx registers the compute path writes, as dword offsets (what type-4 packets carry).
//
// CP_ALWAYS_ON_COUNTER: mesa / Linux drivers/gpu/drm/msm/registers/adreno/a6xx.xml
// (<reg64 offset="0x0980" name="CP_ALWAYS_ON_COUNTER"/>), a 19.2 MHz counter.
// The SP_CS_* / HLSQ offsets below are as ../shared/research/nv_qcom_usb.md B.4 quotes them from
// mesa 25.2.7 a6xx.xml (names there changed across mesa versions: SP_CS_NDRANGE_0 is the older
// HLSQ_CS_NDRANGE_0, SP_CS_BASE the older SP_CS_OBJ_START); not re-checked against a6xx.xml here.
#pragma once

#include <cstdint>

namespace baregpu::qcom::a6xx {

inline constexpr uint32_t CP_ALWAYS_ON_COUNTER = 0x0980;  // 64-bit, LO then HI
inline constexpr uint64_t kAlwaysOnHz = 19'200'000;

inline constexpr uint32_t SP_CS_CNTL_0 = 0xa9b0;       // threadsize, register footprint
inline constexpr uint32_t SP_CS_CNTL_1 = 0xa9b1;       // constlen, shared size
inline constexpr uint32_t SP_CS_BASE = 0xa9b4;         // 64-bit: the program (older SP_CS_OBJ_START)
inline constexpr uint32_t SP_CS_PVT_MEM_PARAM = 0xa9b6;
inline constexpr uint32_t SP_CS_PVT_MEM_BASE = 0xa9b7;  // 64-bit
inline constexpr uint32_t SP_CS_PVT_MEM_SIZE = 0xa9b9;
inline constexpr uint32_t SP_CS_INSTR_SIZE = 0xa9bc;    // in units of 128 bytes
inline constexpr uint32_t SP_CS_NDRANGE_0 = 0xb990;     // kerneldim, localsize-1 (x,y,z), then 6 regs of global size/offset
inline constexpr uint32_t SP_CS_CONST_CONFIG_0 = 0xb997;
inline constexpr uint32_t SP_CS_WGE_CNTL = 0xb998;
inline constexpr uint32_t SP_CS_KERNEL_GROUP_X = 0xb999;  // workgroup counts x, y, z (0xb999..0xb99b)

// SP_CS_NDRANGE_0 fields: KERNELDIM bits 0-1, LOCALSIZEX bits 2-11, LOCALSIZEY 12-21, LOCALSIZEZ
// 22-31 (each the size minus one), as in CP_EXEC_CS_INDIRECT's LOCALSIZE fields (adreno_pm4.xml).
constexpr uint32_t ndrange0(uint32_t x, uint32_t y, uint32_t z) {
    return 3u | ((x - 1) & 0x3ff) << 2 | ((y - 1) & 0x3ff) << 12 | ((z - 1) & 0x3ff) << 22;
}

}  // namespace baregpu::qcom::a6xx
