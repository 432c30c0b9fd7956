// The GSP CPU sequencer: a script GSP-RM sends (event GSP_RUN_CPU_SEQUENCER) for the CPU to run
// against the chip's registers and falcons while GSP itself cannot. Layouts, open-gpu-kernel-modules
// 570.144: g_rpc-structures.h rpc_run_cpu_sequencer_v17_00 {bufferSizeDWord, cmdIndex, regSaveArea[8]}
// (40 bytes) then commandBuffer[cmdIndex] dwords; src/nvidia/arch/nvalloc/common/inc/rmgspseq.h
// GSP_SEQ_BUF_OPCODE: 0 REG_WRITE {addr; val}, 1 REG_MODIFY {addr; mask; val}, 2 REG_POLL
// {addr; mask; val; timeout; error}, 3 DELAY_US {val}, 4 REG_STORE {addr; index}, 5 CORE_RESET,
// 6 CORE_START, 7 CORE_WAIT_FOR_HALT, 8 CORE_RESUME (no payload). REG_MODIFY's field order is
// {addr, mask, val} — tinygrad's nv/ip.py run_cpu_seq reads {addr, val, mask}.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace baregpu::nv {

enum class SeqOpcode : uint32_t {
    RegWrite = 0,
    RegModify = 1,
    RegPoll = 2,
    DelayUs = 3,
    RegStore = 4,
    CoreReset = 5,
    CoreStart = 6,
    CoreWaitForHalt = 7,
    CoreResume = 8,
};

struct SeqOp {
    SeqOpcode opcode = SeqOpcode::RegWrite;
    uint32_t addr = 0, mask = 0, val = 0, timeout_us = 0, error = 0, index = 0;  // as the opcode uses them
};

inline constexpr size_t kRunCpuSequencerHeaderSize = 40;
inline constexpr unsigned kSeqRegSaveAreaSize = 8;

// Decodes an event payload. ProtocolError (naming device, dword index, opcode) for an unknown
// opcode, a truncated payload, or a cmdIndex past the buffer.
std::vector<SeqOp> parse_sequencer(std::span<const std::byte> payload, const std::string& device);

// What the ops act on: BAR0 registers, the device clock, and the GSP core operations.
class SequencerTarget {
public:
    virtual ~SequencerTarget() = default;
    virtual uint32_t read32(uint32_t addr) = 0;
    virtual void write32(uint32_t addr, uint32_t value) = 0;
    virtual void delay(std::chrono::nanoseconds d) = 0;
    virtual std::chrono::nanoseconds now() = 0;
    virtual void core_reset() = 0;
    virtual void core_start() = 0;
    virtual void core_wait_for_halt() = 0;
    virtual void core_resume() = 0;
    virtual const std::string& device_name() const = 0;
};

// Runs the ops in order. REG_MODIFY: reg = (reg & ~mask) | val. REG_POLL waits until
// (reg & mask) == val for its timeout (10 s when 0) and throws TimeoutError naming the register,
// mask, expected and last value. REG_STORE saves into save_area[index] (ProtocolError past 8).
void run_sequencer(std::span<const SeqOp> ops, SequencerTarget& target,
                   std::span<uint32_t, kSeqRegSaveAreaSize> save_area);

}  // namespace baregpu::nv
