// PM4 for Adreno 6xx: the type-4 (register write) and type-7 (opcode) packet headers with their
// odd-parity bits, the opcodes and events this driver emits, and small encoders.
//
// Header layouts and the parity fold: mesa src/freedreno/common/freedreno_pm4.h
// (pm4_odd_parity_bit, pm4_pkt4_hdr, pm4_pkt7_hdr). Opcode, event and packet-field values: mesa
// src/freedreno/registers/adreno/adreno_pm4.xml at bminor/mesa-mesa 32be52a4 (mesa main, 2025).
#pragma once

#include <cstdint>

namespace baregpu::qcom::pm4 {

// adreno_pm4_packet_type
inline constexpr uint32_t kType4 = 0x40000000;  // CP_TYPE4_PKT
inline constexpr uint32_t kType7 = 0x70000000;  // CP_TYPE7_PKT

// 1 when `v` has an even number of set bits: together with the parity bit the header field has
// odd parity. freedreno_pm4.h folds the value to one nibble and looks it up in 0x9669.
constexpr uint32_t odd_parity_bit(uint32_t v) {
    v ^= v >> 16;
    v ^= v >> 8;
    v ^= v >> 4;
    return (0x9669u >> (v & 0xf)) & 1u;
}

// Type 4: write `count` (< 128) consecutive registers from `reg` (18 bits); count dwords follow.
constexpr uint32_t type4(uint32_t reg, uint32_t count) {
    return kType4 | (count & 0x7f) | odd_parity_bit(count) << 7 | (reg & 0x3ffff) << 8 | odd_parity_bit(reg) << 27;
}

// Type 7: opcode (7 bits) with `count` (< 16384) payload dwords.
constexpr uint32_t type7(uint32_t opcode, uint32_t count) {
    return kType7 | (count & 0x3fff) | odd_parity_bit(count) << 15 | (opcode & 0x7f) << 16 | odd_parity_bit(opcode) << 23;
}

// adreno_pm4_type3_packets (the A6XX variants).
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
    CP_INDIRECT_BUFFER = 0x3f,
    CP_COND_EXEC = 0x44,
    CP_EVENT_WRITE = 0x46,
    CP_SET_MARKER = 0x65,
};

// vgt_event_type.
enum Event : uint32_t {
    CACHE_FLUSH_TS = 0x04,     // flush UCHE, then write the packet's value to ADDR (all generations)
    CACHE_INVALIDATE = 0x31,   // A6XX: invalidate UCHE (A7XX reuses 0x31 as CACHE_CLEAN)
    CACHE_CLEAN = 0x31,        // A7XX: write back; what KGSL gen7 writes its end-of-pipe timestamps with
    CACHE_INVALIDATE7 = 0x33,  // A7XX
};

// CP_EVENT_WRITE7 (A7XX, the same opcode 0x46 as A6XX's CP_EVENT_WRITE) dword 0: EVENT bits 0-7,
// WRITE_SRC bits 20-22 (EV_WRITE_USER_32B = 0), WRITE_DST bit 24 (EV_DST_RAM = 0), WRITE_ENABLED
// bit 27; with EV_DST_RAM the address (2 dwords) and PAYLOAD_0 follow.
inline constexpr uint32_t kEvWriteUser32b = 0;
constexpr uint32_t event_write7_0(uint32_t event, bool write) { return (event & 0xff) | kEvWriteUser32b << 20 | uint32_t(write) << 27; }

// CP_WAIT_REG_MEM dword 0: FUNCTION (cp_cond_function) bits 0-2, POLL (poll_memory_type) bits 4-5.
inline constexpr uint32_t kWriteGe = 5;     // WRITE_GE
inline constexpr uint32_t kPollMemory = 1;  // POLL_MEMORY
// CP_REG_TO_MEM dword 0: REG bits 0-17, CNT bits 18-29, 64B bit 30.
constexpr uint32_t reg_to_mem0(uint32_t reg, uint32_t count, bool b64) { return (reg & 0x3ffff) | (count & 0xfff) << 18 | uint32_t(b64) << 30; }
// CP_SET_MARKER: MODE bits 0-3 (a6xx_marker), RM6_COMPUTE = 8.
inline constexpr uint32_t kRm6Compute = 8;
// CP_LOAD_STATE6 dword 0: DST_OFF 0-13, STATE_TYPE 14-15, STATE_SRC 16-17, STATE_BLOCK 18-21,
// NUM_UNIT 22-31. ST6_CONSTANTS = 1, SS6_DIRECT = 0, SB6_CS_SHADER = 0xd; a unit of constants is
// one vec4 (16 bytes).
inline constexpr uint32_t kSt6Constants = 1, kSs6Direct = 0, kSb6CsShader = 0xd;
// ST6_SHADER = 0 with SS6_INDIRECT = 2: the program's instructions, read from the address in
// dwords 1-2 (NUM_UNIT in 128-byte units).
inline constexpr uint32_t kSt6Shader = 0, kSs6Indirect = 2;
constexpr uint32_t load_state6_0(uint32_t dst_off, uint32_t type, uint32_t src, uint32_t block, uint32_t units) {
    return (dst_off & 0x3fff) | (type & 3) << 14 | (src & 3) << 16 | (block & 0xf) << 18 | (units & 0x3ff) << 22;
}
// CP_INDIRECT_BUFFER dword 2: IB_SIZE bits 0-19, in dwords.
inline constexpr uint32_t kMaxIbDwords = 0xfffff;

}  // namespace baregpu::qcom::pm4
