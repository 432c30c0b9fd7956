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

inline constexpr uint32_t CACHE_INVALIDATE7 = 0x33;  // A7XX (0x31 is CACHE_CLEAN there)

// Registers (a6xx.xml at bminor/mesa-mesa 011ba184, which describes A6XX and A7XX).
inline constexpr uint32_t CP_ALWAYS_ON_COUNTER = 0x0980;
inline constexpr uint32_t SP_CS_BASE = 0xa9b4;
struct ComputeRegisters {
    uint32_t ndrange0, kernel_group_x;
};
inline constexpr ComputeRegisters kA6xxCompute{0xb990, 0xb999};  // SP_CS_NDRANGE_0, SP_CS_KERNEL_GROUP_X (A6XX)
inline constexpr ComputeRegisters kA7xxCompute{0xa9d4, 0xa9dc};  // the same, variants="A7XX-"

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
