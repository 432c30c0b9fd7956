// The GSP RPC transport (gsp_rpc.hpp).
#include "drivers/nv/gsp_rpc.hpp"

#include "base/error.hpp"
#include "drivers/nv/boot_registers.hpp"
#include "drivers/nv/gsp_rpc_functions.hpp"
#include "drivers/nv/wait.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cstring>

namespace baregpu::nv {

std::string gsp::rpc_name(uint32_t f) {
    const char* n = nullptr;
    switch (f) {
    case kFnAllocMemory: n = "ALLOC_MEMORY"; break;
    case kFnUnloadingGuestDriver: n = "UNLOADING_GUEST_DRIVER"; break;
    case kFnSetPageDirectory: n = "SET_PAGE_DIRECTORY"; break;
    case kFnContinuationRecord: n = "CONTINUATION_RECORD"; break;
    case kFnGspSetSystemInfo: n = "GSP_SET_SYSTEM_INFO"; break;
    case kFnSetRegistry: n = "SET_REGISTRY"; break;
    case kFnGspRmControl: n = "GSP_RM_CONTROL"; break;
    case kFnGspRmAlloc: n = "GSP_RM_ALLOC"; break;
    case kEvGspInitDone: n = "GSP_INIT_DONE"; break;
    case kEvGspRunCpuSequencer: n = "GSP_RUN_CPU_SEQUENCER"; break;
    case kEvMmuFaultQueued: n = "MMU_FAULT_QUEUED"; break;
    case kEvOsErrorLog: n = "OS_ERROR_LOG"; break;
    default: return fmt::format("RPC {}", f);
    }
    return fmt::format("{} ({})", n, f);
}

namespace {
// With MSGQ_FLAGS_SWAP_RX, GSP publishes its readPtr of the command queue in the status queue's
// rx slot, which GSP lays out at rxHdrOff 32 (msgqTxCreate with the GSP's 16-byte header alignment).
constexpr size_t kStatRxHdrOff = 32;
}  // namespace

GspRpc::GspRpc(pci::PciDevice& device, std::span<std::byte> cmd_store, std::span<std::byte> stat_store)
    : device_(device),
      cmd_store_(cmd_store),
      stat_store_(stat_store),
      writer_((gsp::init_queue(cmd_store, gsp::kGspMsgSize), cmd_store), stat_store.subspan(kStatRxHdrOff, 4),
              device.name()) {}

uint32_t GspRpc::queue(uint32_t function, std::span<const std::byte> payload) {
    const uint32_t seq = writer_.next_rpc_sequence();
    const bool ok = payload.size() > gsp::kMaxPayloadPerRecord ? writer_.send_large(function, payload)
                                                               : writer_.send(function, payload);
    if (!ok)
        throw TimeoutError(device_.name(), fmt::format("GSP command queue full sending {} ({} bytes): GSP has not "
                                                       "consumed earlier RPCs (writePtr {}, free {})",
                                                       gsp::rpc_name(function), payload.size(),
                                                       writer_.header().write_ptr, writer_.free_elements()));
    return seq;
}

void GspRpc::ring_doorbell() {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // the record and writePtr before the doorbell
    device_.bar(0).write32(BarOffset{reg::kPgspQueueHead0}, 0);
}

void GspRpc::attach_status_queue(std::chrono::nanoseconds timeout) {
    uint32_t entry_off = 0;
    if (!poll_until(device_, timeout, [&] {
            entry_off = gsp::read_tx_header(stat_store_).entry_off;
            return entry_off == 0x1000;
        }))
        throw TimeoutError(device_.name(), fmt::format("GSP RPC status queue not initialized: its msgqTxHeader.entryOff "
                                                       "is {:#x}, want 0x1000 after {} ms",
                                                       entry_off, timeout.count() / 1000000));
    reader_.emplace(stat_store_, gsp::rx_header_slot(cmd_store_), device_.name());
}

RpcReply GspRpc::call(uint32_t function, std::span<const std::byte> payload, std::chrono::nanoseconds timeout) {
    queue(function, payload);
    ring_doorbell();
    // Matched on the function alone, as kernel RM does (kernel_gsp.c _kgspRpcRecvPoll compares the reply's function
    // with the one it sent; nothing says GSP-RM echoes the element's sequence number).
    return wait_for(function, std::nullopt, timeout);
}

void GspRpc::service(const gsp::RpcMessage& m) {
    if (m.function == gsp::kEvOsErrorLog) {
        // rpc_os_error_log_v17_00 {exceptType, runlistId, chid, errString[0x100]}
        std::string text;
        for (size_t i = 12; i < m.payload.size() && m.payload[i] != std::byte{0}; ++i)
            text.push_back(static_cast<char>(m.payload[i]));
        events_.os_errors.push_back(text);
        uint32_t chid = 0;
        if (m.payload.size() >= 12) std::memcpy(&chid, m.payload.data() + 8, 4);
        events_.os_error_chids.push_back(chid);
    } else if (m.function == gsp::kEvMmuFaultQueued) {
        ++events_.mmu_faults;
    }
    auto it = handlers_.find(m.function);
    if (it != handlers_.end()) it->second(m);
}

size_t GspRpc::poll_events() {
    if (!reader_) return 0;
    size_t n = 0;
    while (auto m = reader_->receive()) {
        service(*m);
        ++n;
    }
    return n;
}

RpcReply GspRpc::wait_for(uint32_t function, std::optional<uint32_t> sequence, std::chrono::nanoseconds timeout) {
    if (!reader_)
        throw Error(device_.name(), fmt::format("waiting for GSP {} before the status queue is attached",
                                                gsp::rpc_name(function)));
    std::optional<RpcReply> got;
    const bool ok = poll_until(device_, timeout, [&] {
        while (auto m = reader_->receive()) {  // ProtocolError (checksum, seqNum, length) propagates
            if (m->function == function && (!sequence || m->sequence == *sequence)) {
                got = RpcReply{m->function, m->rpc_result, m->sequence, std::move(m->payload)};
                return true;
            }
            service(*m);  // events, and replies nobody waits for (the pre-queued RPCs')
        }
        return false;
    });
    if (!ok || !got) {
        uint32_t gsp_read_ptr = 0;  // GSP's readPtr of the command queue (status queue rx slot)
        std::memcpy(&gsp_read_ptr, stat_store_.data() + kStatRxHdrOff, 4);
        throw TimeoutError(device_.name(),
                           fmt::format("GSP did not answer {}{} in {} ms (status queue readPtr {} writePtr {}; command "
                                       "queue writePtr {}, GSP's readPtr {})",
                                       gsp::rpc_name(function), sequence ? fmt::format(" sequence {}", *sequence) : "",
                                       timeout.count() / 1000000, reader_->read_ptr(),
                                       gsp::read_tx_header(stat_store_).write_ptr, writer_.header().write_ptr,
                                       gsp_read_ptr));
    }
    return std::move(*got);
}

}  // namespace baregpu::nv
