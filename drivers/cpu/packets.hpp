// The CPU device's command packets: what its queues encode and its command processors execute.
// Every packet starts with an 8-byte header {opcode, size in bytes}; sizes are multiples of 8;
// all fields are little-endian host words. A ring holds packets back to back; a wrap packet
// fills the ring's tail when the next packet does not fit before the end.
#pragma once

#include <cstdint>

namespace baregpu::cpu {

enum class Opcode : uint32_t {
    nop = 0,
    wrap = 1,       // skip to the start of the ring (ring only)
    wait = 2,       // until *(u64*)signal >= value
    signal = 3,     // *(u64*)signal = value, after everything before completed
    timestamp = 4,  // *(u64*)dst = device ticks, after everything before completed
    barrier = 5,    // make host and peer writes visible to what follows
    exec = 6,       // launch a kernel (compute only)
    copy = 7,       // memmove (copy only)
    indirect = 8,   // run the packets in [address, address + size) (ring only; no nesting)
};

struct PacketHeader {
    Opcode opcode;
    uint32_t size;  // bytes including this header
};

struct WaitPacket {
    PacketHeader header;
    uint64_t signal;
    uint64_t value;
};

struct SignalPacket {
    PacketHeader header;
    uint64_t signal;
    uint64_t value;
};

struct TimestampPacket {
    PacketHeader header;
    uint64_t dst;
};

struct BarrierPacket {
    PacketHeader header;
};

// Followed by kernarg_size bytes of kernel arguments, padded to 8.
struct ExecPacket {
    PacketHeader header;
    uint64_t entry;         // the kernel function's address
    uint32_t program_slot;  // the device's program table slot that must hold `entry`
    uint32_t kernarg_size;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_bytes;
    uint32_t reserved;
};

struct CopyPacket {
    PacketHeader header;
    uint64_t dst;
    uint64_t src;
    uint64_t size;
};

struct IndirectPacket {
    PacketHeader header;
    uint64_t address;
    uint64_t size;
};

static_assert(sizeof(PacketHeader) == 8);
static_assert(sizeof(WaitPacket) == 24 && sizeof(SignalPacket) == 24 && sizeof(TimestampPacket) == 16);
static_assert(sizeof(ExecPacket) == 56 && sizeof(CopyPacket) == 32 && sizeof(IndirectPacket) == 24);

}  // namespace baregpu::cpu
