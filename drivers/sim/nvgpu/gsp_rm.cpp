// The simulated GSP-RM (gsp_rm.hpp has the layouts and their headers).
#include "gsp_rm.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

#include <cstring>

namespace baregpu::sim::nvgpu {
namespace gsp = baregpu::nv::gsp;
namespace {

// rpc_global_enums.h (570.144)
constexpr uint32_t kFnUnloadingGuestDriver = 47;
constexpr uint32_t kFnContinuationRecord = 71;  // NV_VGPU_MSG_FUNCTION_CONTINUATION_RECORD
constexpr uint32_t kFnSetSystemInfo = 72;   // NV_VGPU_MSG_FUNCTION_GSP_SET_SYSTEM_INFO
constexpr uint32_t kFnSetRegistry = 73;     // NV_VGPU_MSG_FUNCTION_SET_REGISTRY
constexpr uint32_t kEvInitDone = 0x1001;    // NV_VGPU_MSG_EVENT_GSP_INIT_DONE
constexpr uint32_t kEvRunCpuSequencer = 0x1002;  // NV_VGPU_MSG_EVENT_GSP_RUN_CPU_SEQUENCER
// rmgspseq.h GSP_SEQ_BUF_OPCODE
constexpr uint32_t kSeqRegWrite = 0, kSeqRegModify = 1, kSeqRegPoll = 2, kSeqDelayUs = 3, kSeqRegStore = 4,
                   kSeqCoreResume = 8;
// libos_init_args.h
constexpr uint64_t kLibosArgSize = 32;
constexpr uint8_t kKindContiguous = 1, kLocSysmem = 1;
constexpr uint64_t kPage = 0x1000;
constexpr const char* kSrcArgs = "open-gpu-kernel-modules 570.144 libos_init_args.h, gsp_init_args.h; kernel_gsp.c";
constexpr const char* kSrcQueue = "open-gpu-kernel-modules 570.144 message_queue_cpu.c, msgq.c";

uint64_t id8(std::string_view name) {  // ASCII packed big-endian into the low bytes, as LibOS names regions
    uint64_t v = 0;
    for (char c : name) v = (v << 8) | static_cast<uint8_t>(c);
    return v;
}
template <typename T>
T get(std::span<const std::byte> b, size_t at) {
    T v{};
    if (at + sizeof(T) <= b.size()) std::memcpy(&v, b.data() + at, sizeof(T));
    return v;
}
void put32(std::vector<std::byte>& b, uint32_t v) {
    const size_t at = b.size();
    b.resize(at + 4);
    std::memcpy(b.data() + at, &v, 4);
}

}  // namespace

void GspRmModel::reset() {
    state_ = State::Off;
    cmd_.reset();
    stat_.reset();
    cmd_store_ = stat_store_ = {};
    corrupt_next_ = silent_ = false;
    poll_reads_left = 2;
    registry_keys_.clear();
}

bool GspRmModel::start(uint64_t libos_args) {
    unloaded_ = false;
    libos_args_ = libos_args;
    seen_.clear();
    // LibOS region list: one page of LibosMemoryRegionInitArgument, ended by an id8 of 0.
    std::vector<std::byte> args(kPage);
    if (!port_->dma_read(BusAddress{libos_args}, args)) {
        bad(fmt::format("GSP-RM cannot read the LibOS arguments at {:#x}", libos_args), "GSP mailbox0/1", kSrcArgs);
        return false;
    }
    std::optional<uint64_t> rmargs;
    for (uint64_t at = 0; at + kLibosArgSize <= kPage; at += kLibosArgSize) {
        const uint64_t id = get<uint64_t>(args, at);
        if (id == 0) break;
        if (get<uint8_t>(args, at + 24) != kKindContiguous || get<uint8_t>(args, at + 25) != kLocSysmem)
            bad(fmt::format("LibOS region {:#x}: kind/loc {}/{} (want CONTIGUOUS/SYSMEM)", id, get<uint8_t>(args, at + 24),
                            get<uint8_t>(args, at + 25)),
                "LibosMemoryRegionInitArgument", kSrcArgs);
        if (id == id8("RMARGS")) rmargs = get<uint64_t>(args, at + 8);
    }
    if (!rmargs) {
        bad("no RMARGS region in the LibOS arguments", "LibosMemoryRegionInitArgument", kSrcArgs);
        return false;
    }
    std::vector<std::byte> rm(72);  // GSP_ARGUMENTS_CACHED (570.144)
    if (!port_->dma_read(BusAddress{*rmargs}, rm)) {
        bad(fmt::format("GSP-RM cannot read RMARGS at {:#x}", *rmargs), "GSP_ARGUMENTS_CACHED", kSrcArgs);
        return false;
    }
    const uint64_t shared = get<uint64_t>(rm, 0);
    const uint32_t ptes = get<uint32_t>(rm, 8);
    const uint64_t cmd_off = get<uint64_t>(rm, 16), stat_off = get<uint64_t>(rm, 24);
    // The first pages list every page of the region (themselves included). The model needs the
    // region contiguous in bus addresses to alias it (real GSP maps page by page).
    std::vector<std::byte> list(uint64_t{ptes} * 8);
    if (ptes == 0 || !port_->dma_read(BusAddress{shared}, list)) {
        bad(fmt::format("message queue page list at {:#x} with {} entries is unreadable", shared, ptes),
            "MESSAGE_QUEUE_INIT_ARGUMENTS", kSrcArgs);
        return false;
    }
    const uint64_t first = get<uint64_t>(list, 0);
    for (uint32_t i = 0; i < ptes; ++i)
        if (get<uint64_t>(list, i * 8) != first + i * kPage) {
            bad(fmt::format("message queue page {} at {:#x}, not {:#x} (the page list must list the region, first page "
                            "= the list itself; the model also needs it contiguous)",
                            i, get<uint64_t>(list, i * 8), first + i * kPage),
                "MESSAGE_QUEUE_INIT_ARGUMENTS.sharedMemPhysAddr", kSrcArgs);
            return false;
        }
    if (first != shared || cmd_off + gsp::kGspQueueSize > stat_off || stat_off + gsp::kGspQueueSize > ptes * kPage) {
        bad(fmt::format("queue layout: page list {:#x} (first entry {:#x}), cmd +{:#x}, stat +{:#x}, {} pages", shared,
                        first, cmd_off, stat_off, ptes),
            "MESSAGE_QUEUE_INIT_ARGUMENTS", kSrcArgs);
        return false;
    }
    std::byte* base = port_->dma_host_memory(BusAddress{shared}, uint64_t{ptes} * kPage);
    if (base == nullptr) {
        bad("message queue region is not one IOMMU mapping", "MESSAGE_QUEUE_INIT_ARGUMENTS", kSrcArgs);
        return false;
    }
    queue_bus_ = shared;
    queue_bytes_ = uint64_t{ptes} * kPage;
    queue_base_ = base;
    cmd_store_ = std::span(base + cmd_off, gsp::kGspQueueSize);
    stat_store_ = std::span(base + stat_off, gsp::kGspQueueSize);
    // GSP lays out its own (status) queue; with MSGQ_FLAGS_SWAP_RX its readPtr of the command
    // queue lives in the status queue's rx slot and the CPU's in the command queue's.
    gsp::init_queue(stat_store_, gsp::kGspMsgSize);
    try {
        cmd_.emplace(cmd_store_, gsp::rx_header_slot(stat_store_), port_->device_name() + " GSP");
        stat_.emplace(stat_store_, gsp::rx_header_slot(cmd_store_), port_->device_name() + " GSP");
    } catch (const Error& e) {
        bad(std::string("command queue header: ") + e.what(), "msgqTxHeader", kSrcQueue);
        return false;
    }
    state_ = State::AwaitingResume;
    consume_boot_rpcs();

    // One CPU-sequencer run (rpc_run_cpu_sequencer_v17_00 + GSP_SEQUENCER_BUFFER_CMDs).
    std::vector<std::byte> seq(40);
    std::vector<std::byte> cmds;
    auto op = [&](uint32_t code, std::initializer_list<uint32_t> words) {
        put32(cmds, code);
        for (uint32_t w : words) put32(cmds, w);
    };
    op(kSeqRegWrite, {SequencerScript::kWriteReg, SequencerScript::kWriteVal});
    op(kSeqRegModify, {SequencerScript::kModifyReg, SequencerScript::kModifyMask, SequencerScript::kModifyVal});
    op(kSeqRegPoll, {SequencerScript::kPollReg, 0x1, 0x1, 1000, 0});
    op(kSeqDelayUs, {10});
    op(kSeqRegStore, {SequencerScript::kWriteReg, 0});
    op(kSeqCoreResume, {});
    const uint32_t dwords = static_cast<uint32_t>(cmds.size() / 4);
    std::memcpy(seq.data(), &dwords, 4);      // bufferSizeDWord
    std::memcpy(seq.data() + 4, &dwords, 4);  // cmdIndex: dwords used
    seq.insert(seq.end(), cmds.begin(), cmds.end());
    post_event(kEvRunCpuSequencer, seq);
    return true;
}

void GspRmModel::consume_boot_rpcs() {
    // GSP_SET_SYSTEM_INFO then SET_REGISTRY, queued by the CPU before GSP ran.
    const uint32_t expected[2] = {kFnSetSystemInfo, kFnSetRegistry};
    for (uint32_t want : expected) {
        std::optional<gsp::RpcMessage> m;
        try {
            if (!on_queues([&] { m = cmd_->receive(); })) return;
        } catch (const Error& e) {
            bad(std::string("pre-queued RPC: ") + e.what(), "command queue", kSrcQueue);
            return;
        }
        if (!m) {
            bad(fmt::format("RPC {} was not queued before GSP-RM started", want), "command queue",
                "open-gpu-kernel-modules 570.144 kernel_gsp.c kgspInitRm (rpcSetSystemInfo, rpcSetRegistry before boot)");
            return;
        }
        seen_.push_back(m->function);
        if (m->function != want) {
            bad(fmt::format("pre-queued RPC {} where {} was expected", m->function, want), "command queue",
                "open-gpu-kernel-modules 570.144 kernel_gsp.c kgspInitRm");
            continue;
        }
        if (want == kFnSetSystemInfo) {
            // GspSystemInfo (570.144: 0x3a0 bytes): PCIDeviceID (vendor | device << 16) at +0x58, after
            // ten NvU64 and two NvU32.
            if (m->payload.size() != 0x3a0)
                bad(fmt::format("GSP_SET_SYSTEM_INFO carries {:#x} bytes; 570.144's GspSystemInfo is 0x3a0",
                                m->payload.size()),
                    "GSP_SET_SYSTEM_INFO", "open-gpu-kernel-modules 570.144 gsp_static_config.h GspSystemInfo");
            const uint32_t id = get<uint32_t>(m->payload, 0x58);
            if (id != (0x10deu | uint32_t{device_id_} << 16))
                bad(fmt::format("GspSystemInfo.PCIDeviceID {:#x}, this device is {:#x}", id,
                                0x10deu | uint32_t{device_id_} << 16),
                    "GSP_SET_SYSTEM_INFO", "open-gpu-kernel-modules 570.144 gsp_static_config.h GspSystemInfo");
        } else {
            // PACKED_REGISTRY_TABLE {size, numEntries} + {nameOffset, type u8, data, length} entries.
            const auto& p = m->payload;
            const uint32_t n = get<uint32_t>(p, 4);
            for (uint32_t i = 0; i < n && 8 + (i + 1) * 16 <= p.size(); ++i) {
                const uint32_t name = get<uint32_t>(p, 8 + i * 16);
                std::string key;
                for (size_t k = name; k < p.size() && p[k] != std::byte{0}; ++k) key.push_back(static_cast<char>(p[k]));
                registry_keys_.push_back(key);
            }
        }
        reply(*m, kNvOk, {});
    }
}

void GspRmModel::resume(std::map<uint32_t, uint32_t>& regs) {
    if (state_ != State::AwaitingResume) {
        bad("CORE_RESUME with no sequencer run pending", "GSP RISC-V CPUCTL", "rmgspseq.h");
        return;
    }
    bool ok = true;
    if (regs[SequencerScript::kWriteReg] != SequencerScript::kWriteVal) {
        bad(fmt::format("sequencer REG_WRITE: register {:#x} holds {:#x}, want {:#x}", SequencerScript::kWriteReg,
                        regs[SequencerScript::kWriteReg], SequencerScript::kWriteVal),
            "CPU sequencer", "rmgspseq.h GSP_SEQ_BUF_PAYLOAD_REG_WRITE {addr; val}");
        ok = false;
    }
    if (regs[SequencerScript::kModifyReg] != SequencerScript::kModifyExpected) {
        bad(fmt::format("sequencer REG_MODIFY: register {:#x} holds {:#x}, want {:#x} = (old & ~mask) | val with the "
                        "payload read as {{addr; mask; val}}",
                        SequencerScript::kModifyReg, regs[SequencerScript::kModifyReg], SequencerScript::kModifyExpected),
            "CPU sequencer", "rmgspseq.h GSP_SEQ_BUF_PAYLOAD_REG_MODIFY {addr; mask; val}");
        ok = false;
    }
    if (poll_reads_left > 0) {
        bad("sequencer REG_POLL: the CPU resumed GSP without polling the register until it matched", "CPU sequencer",
            "rmgspseq.h GSP_SEQ_BUF_PAYLOAD_REG_POLL");
        ok = false;
    }
    if (!ok) return;  // GSP-RM would fault; the CPU sees no INIT_DONE
    state_ = State::Serving;
    post_event(kEvInitDone, {});
}

bool GspRmModel::on_queues(const std::function<void()>& use) {
    bool mapped = false;
    port_->with_host_memory(BusAddress{queue_bus_}, queue_bytes_, [&](std::span<std::byte> bytes) {
        if (bytes.data() != queue_base_) return;  // the IOVA now maps other memory
        mapped = true;
        use();
    });
    if (!mapped) {
        cmd_.reset();
        stat_.reset();
        cmd_store_ = stat_store_ = {};
        state_ = State::Off;
    }
    return mapped;
}

void GspRmModel::post_event(uint32_t function, std::span<const std::byte> payload) {
    // Off: GSP-RM never ran, or it unloaded (UNLOADING_GUEST_DRIVER) and the CPU may have freed the
    // queue memory since: an engine fault still in flight then has nowhere to go.
    if (!stat_ || state_ == State::Off) return;
    bool sent = true;
    if (!on_queues([&] { sent = stat_->send(function, payload); })) return;
    if (!sent)
        bad(fmt::format("status queue full posting event {:#x}: the CPU stopped reading", function), "status queue",
            kSrcQueue);
}

void GspRmModel::reply(const gsp::RpcMessage& request, uint32_t rpc_result, std::span<const std::byte> payload) {
    if (silent_) return;
    bool sent = true;
    on_queues([&] {
        const uint32_t wp = stat_->header().write_ptr;
        // The reply's element carries the status queue's own count, not the request's sequence: kernel RM matches
        // replies on the function only (kernel_gsp.c _kgspRpcRecvPoll), so a driver that waits for an echo is shown.
        sent = stat_->send_reply(request.function, rpc_result, kReplySequenceBase + replies_++, payload);
        if (sent && corrupt_next_) {  // a flipped bit in the reply's rpc header spare word: the checksum no longer holds
            corrupt_next_ = false;
            const auto& h = stat_->header();
            stat_store_[h.entry_off + size_t{wp} * h.msg_size + gsp::kElementHeaderSize + 0x1c] ^= std::byte{0x01};
        }
    });
    if (!sent) bad(fmt::format("status queue full replying to RPC {}", request.function), "status queue", kSrcQueue);
}

void GspRmModel::doorbell() {
    if (state_ != State::Serving) {
        if (state_ == State::Off)
            bad("GSP command doorbell rung while GSP-RM is not running", "NV_PGSP_QUEUE_HEAD(0)", kSrcQueue);
        return;
    }
    // A large RPC arrives as its first record followed by CONTINUATION_RECORDs (rpc.c _issueRpcLarge);
    // the request is complete when a record of another function follows or the queue is empty.
    std::optional<gsp::RpcMessage> pending;  // its sequence is the first record's: the reply answers that
    uint32_t last_sequence = 0;
    for (;;) {
        std::optional<gsp::RpcMessage> m;
        try {
            if (!on_queues([&] { m = cmd_->receive(); })) return;
        } catch (const Error& e) {
            bad(std::string("command queue: ") + e.what(), "command queue", kSrcQueue);
            return;
        }
        if (m && m->function == kFnContinuationRecord) {
            if (!pending || m->sequence != last_sequence + 1) {
                bad(fmt::format("CONTINUATION_RECORD (rpc sequence {}) without the record it continues", m->sequence),
                    "command queue", "open-gpu-kernel-modules 570.144 rpc.c _issueRpcLarge");
                continue;
            }
            pending->payload.insert(pending->payload.end(), m->payload.begin(), m->payload.end());
            last_sequence = m->sequence;
            continue;
        }
        if (pending && !serve(*pending)) return;
        if (!m) return;
        last_sequence = m->sequence;
        pending = std::move(m);
    }
}

bool GspRmModel::serve(const gsp::RpcMessage& request) {
    seen_.push_back(request.function);
    if (request.function == kFnUnloadingGuestDriver) {
        reply(request, kNvOk, request.payload);
        state_ = State::Off;
        unloaded_ = true;
        return false;
    }
    std::vector<std::byte> out;
    const uint32_t result = server_ ? server_->handle(request.function, request.payload, out) : kNvErrNotSupported;
    reply(request, result, out);
    return true;
}

}  // namespace baregpu::sim::nvgpu
