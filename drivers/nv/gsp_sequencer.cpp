// The GSP CPU sequencer (gsp_sequencer.hpp).
#include "drivers/nv/gsp_sequencer.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace baregpu::nv {
namespace {
unsigned payload_words(SeqOpcode op) {
    switch (op) {
    case SeqOpcode::RegWrite: return 2;
    case SeqOpcode::RegModify: return 3;
    case SeqOpcode::RegPoll: return 5;
    case SeqOpcode::DelayUs: return 1;
    case SeqOpcode::RegStore: return 2;
    default: return 0;
    }
}
}  // namespace

std::vector<SeqOp> parse_sequencer(std::span<const std::byte> payload, const std::string& device) {
    if (payload.size() < kRunCpuSequencerHeaderSize)
        throw ProtocolError(device, fmt::format("GSP_RUN_CPU_SEQUENCER: {} bytes, shorter than the 40-byte "
                                                "rpc_run_cpu_sequencer_v17_00 header",
                                                payload.size()));
    uint32_t cmd_index = 0;
    std::memcpy(&cmd_index, payload.data() + 4, 4);
    const size_t words = (payload.size() - kRunCpuSequencerHeaderSize) / 4;
    if (cmd_index > words)
        throw ProtocolError(device, fmt::format("GSP_RUN_CPU_SEQUENCER: cmdIndex {} dwords, but only {} follow the header",
                                                cmd_index, words));
    auto word = [&](size_t i) {
        uint32_t v;
        std::memcpy(&v, payload.data() + kRunCpuSequencerHeaderSize + i * 4, 4);
        return v;
    };
    std::vector<SeqOp> ops;
    for (size_t i = 0; i < cmd_index;) {
        const uint32_t code = word(i);
        if (code > static_cast<uint32_t>(SeqOpcode::CoreResume))
            throw ProtocolError(device, fmt::format("GSP_RUN_CPU_SEQUENCER: unknown opcode {} at dword {} (rmgspseq.h "
                                                    "knows 0..8)",
                                                    code, i));
        SeqOp op;
        op.opcode = static_cast<SeqOpcode>(code);
        const unsigned n = payload_words(op.opcode);
        if (i + 1 + n > cmd_index)
            throw ProtocolError(device, fmt::format("GSP_RUN_CPU_SEQUENCER: opcode {} at dword {} needs {} payload dwords, "
                                                    "{} left",
                                                    code, i, n, cmd_index - i - 1));
        switch (op.opcode) {
        case SeqOpcode::RegWrite: op.addr = word(i + 1), op.val = word(i + 2); break;
        case SeqOpcode::RegModify: op.addr = word(i + 1), op.mask = word(i + 2), op.val = word(i + 3); break;
        case SeqOpcode::RegPoll:
            op.addr = word(i + 1), op.mask = word(i + 2), op.val = word(i + 3), op.timeout_us = word(i + 4),
            op.error = word(i + 5);
            break;
        case SeqOpcode::DelayUs: op.val = word(i + 1); break;
        case SeqOpcode::RegStore: op.addr = word(i + 1), op.index = word(i + 2); break;
        default: break;
        }
        ops.push_back(op);
        i += 1 + n;
    }
    return ops;
}

void run_sequencer(std::span<const SeqOp> ops, SequencerTarget& t, std::span<uint32_t, kSeqRegSaveAreaSize> save) {
    for (const SeqOp& op : ops) {
        switch (op.opcode) {
        case SeqOpcode::RegWrite: t.write32(op.addr, op.val); break;
        case SeqOpcode::RegModify: t.write32(op.addr, (t.read32(op.addr) & ~op.mask) | op.val); break;
        case SeqOpcode::RegPoll: {
            const std::chrono::nanoseconds timeout =
                op.timeout_us ? std::chrono::nanoseconds(std::chrono::microseconds(op.timeout_us)) : std::chrono::seconds(10);
            const auto start = t.now();
            std::chrono::nanoseconds pause = std::chrono::microseconds(1);
            uint32_t last = 0;
            while (((last = t.read32(op.addr)) & op.mask) != op.val) {
                if (t.now() - start >= timeout)
                    throw TimeoutError(t.device_name(),
                                       fmt::format("GSP CPU sequencer REG_POLL: BAR0 {:#x} & {:#x} == {:#x} not reached in "
                                                   "{} us (last {:#x}, GSP error code {:#x})",
                                                   op.addr, op.mask, op.val, timeout.count() / 1000, last, op.error));
                t.delay(pause);
                pause = std::min<std::chrono::nanoseconds>(pause * 2, std::chrono::milliseconds(1));
            }
            break;
        }
        case SeqOpcode::DelayUs: t.delay(std::chrono::microseconds(op.val)); break;
        case SeqOpcode::RegStore:
            if (op.index >= kSeqRegSaveAreaSize)
                throw ProtocolError(t.device_name(),
                                    fmt::format("GSP CPU sequencer REG_STORE index {} past regSaveArea[8]", op.index));
            save[op.index] = t.read32(op.addr);
            break;
        case SeqOpcode::CoreReset: t.core_reset(); break;
        case SeqOpcode::CoreStart: t.core_start(); break;
        case SeqOpcode::CoreWaitForHalt: t.core_wait_for_halt(); break;
        case SeqOpcode::CoreResume: t.core_resume(); break;
        }
    }
}

}  // namespace baregpu::nv
