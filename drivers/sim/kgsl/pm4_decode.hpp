// What the simulated A630 command processor knows of PM4: header decoding with the parity check,
// the opcodes it executes, the registers it reads, and the protected register ranges.
// Sources: mesa src/freedreno/common/freedreno_pm4.h (header layout, odd parity) and
// src/freedreno/registers/adreno/adreno_pm4.xml (bminor/mesa-mesa 32be52a4) for opcodes and packet
// fields, including CP_EVENT_WRITE7 (A7XX); register offsets from a6xx.xml (bminor/mesa-mesa 011ba184,
// mesa a6xx.xml (both generations); the protected ranges after Linux drivers/gpu/drm/msm/adreno/a6xx_gpu.c's
// CP_PROTECT list for A630 (the RBBM block, the CP's own registers including CP_PROTECT_REG[]).
#pragma once

#include <cstdint>
#include <string>

namespace baregpu::sim::kgsl::pm4 {

constexpr uint32_t odd_parity_bit(uint32_t v) {
    v ^= v >> 16;
    v ^= v >> 8;
    v ^= v >> 4;
    return (0x9669u >> (v & 0xf)) & 1u;
}

enum Opcode : uint32_t {
    CP_NOP = 0x10,
    CP_WAIT_MEM_WRITES = 0x12,
    CP_WAIT_FOR_ME = 0x13,
    CP_WAIT_FOR_IDLE = 0x26,
    CP_EXEC_CS = 0x33,
    CP_LOAD_STATE6_FRAG = 0x34,
    CP_WAIT_REG_MEM = 0x3c,
    CP_MEM_WRITE = 0x3d,
    CP_REG_TO_MEM = 0x3e,
    CP_COND_EXEC = 0x44,
    CP_EVENT_WRITE = 0x46,
    CP_SET_MARKER = 0x65,
};
inline constexpr uint32_t CACHE_FLUSH_TS = 0x04, CACHE_INVALIDATE = 0x31;

inline constexpr uint32_t CACHE_CLEAN = 0x31, CACHE_FLUSH7 = 0x32, CACHE_INVALIDATE7 = 0x33;  // A7XX (0x31 is CACHE_CLEAN there)

// Registers (a6xx.xml at bminor/mesa-mesa 011ba184, which describes A6XX and A7XX).
inline constexpr uint32_t CP_ALWAYS_ON_COUNTER = 0x0980;
inline constexpr uint32_t SP_CS_BASE = 0xa9b4;
struct ComputeRegisters {
    uint32_t ndrange0, kernel_group_x;
};
inline constexpr ComputeRegisters kA6xxCompute{0xb990, 0xb999};  // SP_CS_NDRANGE_0, SP_CS_KERNEL_GROUP_X (A6XX)
inline constexpr ComputeRegisters kA7xxCompute{0xa9d4, 0xa9dc};  // the same, variants="A7XX-"

// The program state a real SP reads for a dispatch, beyond the grid: what mesa's computerator
// (src/freedreno/computerator/a6xx.cc, cs_program_emit) programs before every CP_EXEC_CS.
// Offsets from a6xx.xml. A register a dispatch needs that the context never wrote has no public
// reset value, so the model refuses the dispatch instead of guessing one.
struct NeededRegister {
    uint32_t reg;
    const char* name;
};
inline constexpr uint32_t SP_CS_CNTL_0 = 0xa9b0, SP_CS_CNTL_1 = 0xa9b1, SP_CS_PVT_MEM_PARAM = 0xa9b6, SP_CS_PVT_MEM_BASE = 0xa9b7,
                          SP_CS_PVT_MEM_SIZE = 0xa9b9, SP_CS_CONFIG = 0xa9bb, SP_CS_INSTR_SIZE = 0xa9bc, SP_CS_PVT_MEM_STACK_OFFSET = 0xa9bd,
                          SP_MODE_CNTL = 0xab00;
inline constexpr uint32_t A6XX_SP_CS_CONST_CONFIG = 0xb987, A6XX_SP_CS_CONST_CONFIG_0 = 0xb997, A6XX_SP_CS_WGE_CNTL = 0xb998,
                          A6XX_SP_UPDATE_CNTL = 0xbb08;
inline constexpr uint32_t A7XX_SP_CS_WIE_CNTL_0 = 0xa9c2, A7XX_SP_CS_WIE_CNTL_1 = 0xa9c3, A7XX_SP_PS_WAVE_CNTL = 0xa9c6,
                          A7XX_SP_REG_PROG_ID_0 = 0xa9c8, A7XX_SP_CS_CONST_CONFIG = 0xa9cd, A7XX_SP_CS_WGE_CNTL = 0xa9db,
                          A7XX_SP_CS_NDRANGE_7 = 0xa9df, A7XX_SP_UPDATE_CNTL = 0xab1f;
inline constexpr NeededRegister kA6xxNeeded[] = {
    {SP_MODE_CNTL, "SP_MODE_CNTL"},
    {A6XX_SP_UPDATE_CNTL, "SP_UPDATE_CNTL"},
    {A6XX_SP_CS_CONST_CONFIG, "SP_CS_CONST_CONFIG"},
    {SP_CS_CNTL_0, "SP_CS_CNTL_0"},
    {SP_CS_CNTL_1, "SP_CS_CNTL_1"},
    {SP_CS_CONFIG, "SP_CS_CONFIG"},
    {SP_CS_INSTR_SIZE, "SP_CS_INSTR_SIZE"},
    {SP_CS_PVT_MEM_PARAM, "SP_CS_PVT_MEM_PARAM"},
    {SP_CS_PVT_MEM_BASE, "SP_CS_PVT_MEM_BASE"},
    {SP_CS_PVT_MEM_SIZE, "SP_CS_PVT_MEM_SIZE"},
    {SP_CS_PVT_MEM_STACK_OFFSET, "SP_CS_PVT_MEM_STACK_OFFSET"},
    {A6XX_SP_CS_CONST_CONFIG_0, "SP_CS_CONST_CONFIG_0"},
    {A6XX_SP_CS_WGE_CNTL, "SP_CS_WGE_CNTL"},
    {SP_CS_BASE, "SP_CS_BASE"},
};
inline constexpr NeededRegister kA7xxNeeded[] = {
    {SP_MODE_CNTL, "SP_MODE_CNTL"},
    {A7XX_SP_UPDATE_CNTL, "SP_UPDATE_CNTL"},
    {A7XX_SP_CS_CONST_CONFIG, "SP_CS_CONST_CONFIG"},
    {SP_CS_CNTL_0, "SP_CS_CNTL_0"},
    {SP_CS_CNTL_1, "SP_CS_CNTL_1"},
    {SP_CS_CONFIG, "SP_CS_CONFIG"},
    {SP_CS_INSTR_SIZE, "SP_CS_INSTR_SIZE"},
    {SP_CS_PVT_MEM_PARAM, "SP_CS_PVT_MEM_PARAM"},
    {SP_CS_PVT_MEM_BASE, "SP_CS_PVT_MEM_BASE"},
    {SP_CS_PVT_MEM_SIZE, "SP_CS_PVT_MEM_SIZE"},
    {SP_CS_PVT_MEM_STACK_OFFSET, "SP_CS_PVT_MEM_STACK_OFFSET"},
    {A7XX_SP_PS_WAVE_CNTL, "SP_PS_WAVE_CNTL"},
    {A7XX_SP_REG_PROG_ID_0, "SP_REG_PROG_ID_0"},
    {A7XX_SP_CS_WIE_CNTL_0, "SP_CS_WIE_CNTL_0"},
    {A7XX_SP_CS_WIE_CNTL_1, "SP_CS_WIE_CNTL_1"},
    {A7XX_SP_CS_WGE_CNTL, "SP_CS_WGE_CNTL"},
    {A7XX_SP_CS_NDRANGE_7, "SP_CS_NDRANGE_7"},
    {SP_CS_BASE, "SP_CS_BASE"},
};

struct Header {
    enum Type { type4, type7, invalid } type = invalid;
    uint32_t count = 0;   // payload dwords
    uint32_t opcode = 0;  // type 7
    uint32_t reg = 0;     // type 4
    std::string error;    // why the header is invalid (bad parity, reserved bits, unknown type)
};
Header decode(uint32_t word);

struct ProtectedRange {
    uint32_t first, last;
    const char* block;
};
// The protected range `reg` falls in, or nullptr.
const ProtectedRange* protected_range(uint32_t reg);

const char* opcode_name(uint32_t opcode);

}  // namespace baregpu::sim::kgsl::pm4
