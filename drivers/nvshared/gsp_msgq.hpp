// The GSP-RM message queues (CPU <-> GSP RPC transport) as a pure data structure over memory the
// caller provides (host pages shared with GSP in the driver; plain buffers in tests).
// Sources, open-gpu-kernel-modules:
//   src/nvidia/inc/libraries/msgq/msgq_priv.h   msgqTxHeader, msgqRxHeader, MSGQ_VERSION
//   src/nvidia/inc/libraries/msgq/msgq.h        MSGQ_FLAGS_SWAP_RX, MSGQ_MSG_SIZE_MIN
//   src/nvidia/src/libraries/msgq/msgq.c        msgqTxCreate (layout), msgqRxLink (header checks),
//                                               free space = readPtr + msgCount - writePtr - 1
//   src/nvidia/inc/kernel/gpu/gsp/message_queue_priv.h  GSP_MSG_QUEUE_ELEMENT, _checkSum32
//   src/nvidia/src/kernel/gpu/gsp/message_queue_cpu.c   element sizes (4 KiB .. 16 x 4 KiB), elemCount,
//                                               seqNum, checksum on send, checksum/seqNum checks on receive
//   src/nvidia/generated/g_rpc-message-header.h rpc_message_header_v03_00
//   src/nvidia/inc/kernel/vgpu/rpc_headers.h    header version, "VRPC" signature, RPC_PENDING
//   src/nvidia/src/kernel/vgpu/rpc.c            _issueRpcLarge: CONTINUATION_RECORD records
//   src/nvidia/inc/kernel/vgpu/rpc_global_enums.h CONTINUATION_RECORD = 71
// Cross-check: Linux nouveau nvkm/subdev/gsp/r535.c (r535_gsp_msgq_* / r535_gsp_cmdq_*).
//
// A queue's backing store: the producer's msgqTxHeader at +0, a msgqRxHeader slot at +rxHdrOff,
// msgCount entries of msgSize bytes from +entryOff. Where the *consumer* publishes its readPtr
// depends on MSGQ_FLAGS_SWAP_RX: with it (GSP's queues use flags = 1) the reader of queue A writes its
// readPtr into the rx slot of the *other* queue B's store, so every side writes only its own pages.
// Writer and reader therefore take the readPtr's 4 bytes as a separate span (msgq_priv.h msgqRxHeader).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace baregpu::nv::gsp {

// msgq_priv.h msgqTxHeader (8 x NvU32).
struct MsgqTxHeader {
    uint32_t version = 0;
    uint32_t size = 0;       // bytes of the whole backing store
    uint32_t msg_size = 0;   // entry size, power of two, >= 16
    uint32_t msg_count = 0;  // (size - entryOff) / msgSize
    uint32_t write_ptr = 0;  // next entry the producer writes
    uint32_t flags = 0;
    uint32_t rx_hdr_off = 0;
    uint32_t entry_off = 0;
};
inline constexpr uint32_t kMsgqVersion = 0;       // MSGQ_VERSION
inline constexpr uint32_t kMsgqFlagSwapRx = 1;    // MSGQ_FLAGS_SWAP_RX
inline constexpr uint32_t kMsgqMsgSizeMin = 16;   // MSGQ_MSG_SIZE_MIN
inline constexpr size_t kMsgqTxHeaderSize = 32;   // sizeof(msgqTxHeader)
inline constexpr size_t kMsgqRxHeaderSize = 4;    // sizeof(msgqRxHeader): NvU32 readPtr

// GSP_MSG_QUEUE_ELEMENT: authTagBuffer[16], aadBuffer[16], checkSum, seqNum, elemCount, then the
// 8-byte aligned rpc_message_header_v at 0x30 (NV_OFFSETOF(GSP_MSG_QUEUE_ELEMENT, rpc)).
inline constexpr size_t kElementChecksumOffset = 0x20;
inline constexpr size_t kElementSeqNumOffset = 0x24;
inline constexpr size_t kElementCountOffset = 0x28;
inline constexpr size_t kElementHeaderSize = 0x30;
// rpc_message_header_v03_00: header_version, signature, length (rpc header + payload), function,
// rpc_result, rpc_result_private, sequence, u (spare / cpuRmGfid).
inline constexpr size_t kRpcHeaderSize = 0x20;
inline constexpr uint32_t kRpcHeaderVersion = 0x03000000;  // NV_VGPU_MSG_HEADER_VERSION_MAJOR_TOT << 24
inline constexpr uint32_t kRpcSignature = 0x43505256;      // NV_VGPU_MSG_SIGNATURE_VALID ("VRPC")
inline constexpr uint32_t kRpcResultPending = 0xFFFFFFFF;  // NV_VGPU_MSG_RESULT_RPC_PENDING
inline constexpr uint32_t kFunctionContinuationRecord = 71;  // NV_VGPU_MSG_FUNCTION_CONTINUATION_RECORD
// message_queue_cpu.c _getMsgQueueParams: queueElementSizeMin = RM_PAGE_SIZE, Max = 16 pages;
// GSP's queues: 256 KiB each, msgSize 4 KiB, header align 2^4, entry align 2^12 (entryOff 0x1000).
inline constexpr size_t kQueueElementSizeMax = 0x10000;
inline constexpr size_t kMaxRpcSize = kQueueElementSizeMax - kElementHeaderSize;  // gspMsgQueueGetMaxRpcSize
inline constexpr size_t kMaxPayloadPerRecord = kMaxRpcSize - kRpcHeaderSize;
inline constexpr uint32_t kGspQueueSize = 0x40000, kGspMsgSize = 0x1000;

// _checkSum32: XOR of the little-endian 64-bit words of data (its size a multiple of 8), folded
// high ^ low. A record is sent with checkSum chosen so that the checksum of the whole record is 0.
uint32_t checksum32(std::span<const std::byte> data);

// Lays out an empty queue in store as msgqTxCreate does (rxHdrOff = align(32, 2^hdr_align_log2),
// entryOff = align(rxHdrOff + 4, 2^entry_align_log2), writePtr 0) and returns the header written.
MsgqTxHeader init_queue(std::span<std::byte> store, uint32_t msg_size, uint32_t flags = kMsgqFlagSwapRx,
                        unsigned hdr_align_log2 = 4, unsigned entry_align_log2 = 12);
MsgqTxHeader read_tx_header(std::span<const std::byte> store);
// The 4-byte msgqRxHeader slot of a queue's store (at its header's rxHdrOff).
std::span<std::byte> rx_header_slot(std::span<std::byte> store);

// One received record.
struct RpcMessage {
    uint32_t seq_num = 0;     // GSP_MSG_QUEUE_ELEMENT.seqNum
    uint32_t elem_count = 0;  // GSP_MSG_QUEUE_ELEMENT.elemCount
    uint32_t header_version = 0, signature = 0, function = 0, rpc_result = 0, rpc_result_private = 0,
             sequence = 0;
    std::vector<std::byte> payload;  // rpc.length - 0x20 bytes after the rpc header
};

// Elements one record of payload_bytes takes in a queue of msg_size entries.
uint32_t elements_for_payload(size_t payload_bytes, uint32_t msg_size);

// The producer side of one queue.
class MsgqWriter {
public:
    // store: the queue (already laid out by init_queue); read_ptr: the consumer's readPtr (4 bytes).
    MsgqWriter(std::span<std::byte> store, std::span<std::byte> read_ptr, std::string device = "");

    const MsgqTxHeader& header() const { return tx_; }
    // Entries that can be written now (msgqTxGetFreeSpace). ProtocolError when the consumer's
    // readPtr is not an entry index.
    uint32_t free_elements() const;
    // One record (payload <= kMaxPayloadPerRecord). Returns false, writing nothing, when fewer
    // than its elemCount entries are free. rpc_result / rpc_result_private start as RPC_PENDING.
    bool send(uint32_t function, std::span<const std::byte> payload);
    // Any size: the first record carries `function` and up to kMaxPayloadPerRecord bytes, the rest
    // follow as CONTINUATION_RECORD records (rpc.c _issueRpcLarge). All or nothing: returns false,
    // writing nothing, when the queue cannot take every record now; throws when it never could.
    bool send_large(uint32_t function, std::span<const std::byte> payload);

    // GSP's side: the reply to a request keeps the request's rpc sequence and carries its
    // rpc_result (rpc_result_private 0). false, writing nothing, when there is no room.
    bool send_reply(uint32_t function, uint32_t rpc_result, uint32_t sequence, std::span<const std::byte> payload);

    uint32_t next_seq_num() const { return seq_num_; }
    uint32_t next_rpc_sequence() const { return rpc_sequence_; }

private:
    friend class LargeRpcSender;
    std::span<std::byte> store_;
    std::span<std::byte> read_ptr_;
    std::string device_;
    MsgqTxHeader tx_;
    uint32_t seq_num_ = 0;       // MESSAGE_QUEUE_INFO.txSeqNum
    uint32_t rpc_sequence_ = 0;  // OBJRPC.sequence
    struct ReplyFields {
        uint32_t rpc_result = 0;
        uint32_t sequence = 0;
    };
    void write_record(uint32_t function, std::span<const std::byte> payload, uint32_t elements,
                      const std::optional<ReplyFields>& reply);
};

// A large RPC sent record by record as room appears, for RPCs bigger than the queue (rpc.c
// _issueRpcLarge waits for space before each record). The first record carries `function`, the
// others CONTINUATION_RECORD; no record is ever split or written over unread entries.
class LargeRpcSender {
public:
    // writer and payload must outlive the sender.
    LargeRpcSender(MsgqWriter& writer, uint32_t function, std::span<const std::byte> payload);
    // Writes every whole record that fits now; returns true once the last one is written.
    bool pump();
    bool done() const { return started_ && offset_ == payload_.size(); }
    size_t records_sent() const { return records_; }

private:
    MsgqWriter& writer_;
    uint32_t function_;
    std::span<const std::byte> payload_;
    size_t offset_ = 0;
    size_t records_ = 0;
    bool started_ = false;
};

// The consumer side of one queue.
class MsgqReader {
public:
    // store: the producer's queue; its header is checked as msgqRxLink does (ProtocolError naming
    // the field). read_ptr: where this consumer publishes its readPtr; set to 0 here.
    MsgqReader(std::span<const std::byte> store, std::span<std::byte> read_ptr, std::string device = "");

    const MsgqTxHeader& header() const { return rx_; }
    uint32_t read_ptr() const { return read_ptr_value_; }
    // Entries written and not yet consumed (msgqRxGetReadAvailable).
    uint32_t available() const;
    // The next record, or nullopt when there is none. Throws ProtocolError (naming slot, seqNum,
    // expected and found) on a bad elemCount or length, a checksum that is not 0, or a seqNum that
    // is not the next one; readPtr then stays where it was.
    std::optional<RpcMessage> receive();

private:
    std::span<const std::byte> store_;
    std::span<std::byte> read_ptr_;
    std::string device_;
    MsgqTxHeader rx_;
    uint32_t read_ptr_value_ = 0;
    uint32_t seq_num_ = 0;  // MESSAGE_QUEUE_INFO.rxSeqNum
};

// Reassembles a large RPC: its first record, then CONTINUATION_RECORD records with consecutive
// rpc sequence numbers until total_payload bytes have arrived (rpc.c _issueRpcLarge, receive side).
class LargeRpcAssembler {
public:
    explicit LargeRpcAssembler(size_t total_payload, std::string device = "");
    // Returns true once the message is complete. ProtocolError on a record out of order, of the
    // wrong function, or carrying more bytes than announced.
    bool add(const RpcMessage& record);
    bool complete() const { return started_ && message_.payload.size() == total_; }
    const RpcMessage& message() const { return message_; }

private:
    size_t total_;
    std::string device_;
    bool started_ = false;
    RpcMessage message_;
    uint32_t last_sequence_ = 0;
};

}  // namespace baregpu::nv::gsp
