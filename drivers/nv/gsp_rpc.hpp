// GspRpc: the CPU side of GSP-RM's RPC transport over the two message queues in host memory
// (command queue CPU -> GSP, status queue GSP -> CPU; format drivers/nvshared/gsp_msgq). It sends an
// RPC, rings NV_PGSP_QUEUE_HEAD(0), and waits for the reply with the same function and rpc
// sequence, servicing the asynchronous events GSP posts meanwhile (CPU sequencer, OS error log,
// MMU fault). Every wait is bounded: a missing reply is a TimeoutError naming the RPC (name and
// number) and the queue pointers; a bad checksum, seqNum or length is a ProtocolError from the reader.
// Single-threaded: one caller at a time (the RM layer serialises).
#pragma once

#include "drivers/nvshared/gsp_msgq.hpp"
#include "drivers/pci/pci_device.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace baregpu::nv {

struct RpcReply {
    uint32_t function = 0;
    uint32_t rpc_result = 0;  // NV_STATUS of the transport-level call (0 = NV_OK)
    uint32_t sequence = 0;
    std::vector<std::byte> payload;  // after rpc_message_header_v
};

// What GSP reported asynchronously (kept for the error that ends a hang; also logged by the owner).
struct GspEventLog {
    std::vector<std::string> os_errors;  // OS_ERROR_LOG text (rpc_os_error_log_v17_00.errString)
    std::vector<uint32_t> os_error_chids;  // ... and its chid, one per os_errors entry
    unsigned mmu_faults = 0;             // MMU_FAULT_QUEUED events
};

class GspRpc {
public:
    using EventHandler = std::function<void(const gsp::RpcMessage&)>;

    // cmd_store / stat_store: the two 256 KiB queues (host memory GSP reaches). The command queue is
    // laid out here (msgqTxCreate); the status queue is GSP's to lay out (attach_status_queue).
    GspRpc(pci::PciDevice& device, std::span<std::byte> cmd_store, std::span<std::byte> stat_store);

    // Queues an RPC without ringing the doorbell or waiting (the pre-boot SET_SYSTEM_INFO and
    // SET_REGISTRY). Returns its rpc sequence number.
    uint32_t queue(uint32_t function, std::span<const std::byte> payload);
    // Waits until GSP has laid out the status queue (its msgqTxHeader with entryOff 0x1000), then
    // links the reader. TimeoutError ("RPC queue not initialized") after `timeout`.
    void attach_status_queue(std::chrono::nanoseconds timeout = std::chrono::seconds(10));

    // Sends, rings the doorbell, waits for the reply with this function and sequence.
    RpcReply call(uint32_t function, std::span<const std::byte> payload,
                  std::chrono::nanoseconds timeout = std::chrono::seconds(10));
    // Waits for a message with `function` (and `sequence`, when given), servicing events.
    RpcReply wait_for(uint32_t function, std::optional<uint32_t> sequence,
                      std::chrono::nanoseconds timeout = std::chrono::seconds(10));

    // Services what GSP posted so far (events only: no call is outstanding), without waiting.
    // Returns how many messages it read. Same threading rule as call().
    size_t poll_events();
    // Handlers for asynchronous events (the boot installs the CPU sequencer's). OS_ERROR_LOG and
    // MMU_FAULT_QUEUED are recorded in events() whether or not a handler is set.
    void on_event(uint32_t function, EventHandler handler) { handlers_[function] = std::move(handler); }
    const GspEventLog& events() const { return events_; }
    bool status_queue_attached() const { return reader_.has_value(); }

private:
    void ring_doorbell();
    void service(const gsp::RpcMessage& m);

    pci::PciDevice& device_;
    std::span<std::byte> cmd_store_, stat_store_;
    gsp::MsgqWriter writer_;
    std::optional<gsp::MsgqReader> reader_;
    std::map<uint32_t, EventHandler> handlers_;
    GspEventLog events_;
};

}  // namespace baregpu::nv
