// GSP-RM message queues (see gsp_msgq.hpp for the sources of every layout and rule).
#include "drivers/nvshared/gsp_msgq.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace baregpu::nv::gsp {
namespace {

uint32_t load32(std::span<const std::byte> s, size_t off) {
    uint32_t v;
    std::memcpy(&v, s.data() + off, 4);
    return v;
}

// The pointers are shared with the other side: read and written once, as volatile 32-bit accesses,
// with fences ordering them against the entries (message_queue_cpu.c: portAtomicMemoryFenceStore
// before msgqTxSubmitBuffers).
uint32_t load_shared(std::span<const std::byte> word) {
    const uint32_t v = *reinterpret_cast<const volatile uint32_t*>(word.data());
    std::atomic_thread_fence(std::memory_order_acquire);
    return v;
}

void store_shared(std::span<std::byte> word, uint32_t v) {
    std::atomic_thread_fence(std::memory_order_release);
    *reinterpret_cast<volatile uint32_t*>(word.data()) = v;
}

constexpr size_t kWritePtrOffset = 16;  // offsetof(msgqTxHeader, writePtr)

uint32_t align_up(uint32_t v, unsigned log2) { return (v + (1u << log2) - 1) & ~((1u << log2) - 1); }

void require_word(std::span<const std::byte> s, const char* what) {
    if (s.size() < 4 || reinterpret_cast<uintptr_t>(s.data()) % 4 != 0)
        throw Error("", fmt::format("GSP msgq: {} must be 4 aligned bytes", what));
}

// A record's bytes, logically contiguous, live in elements slot, slot+1, ... (mod msgCount).
struct RecordMap {
    size_t entry_off;
    uint32_t msg_size;
    uint32_t msg_count;
    uint32_t first_slot;
    size_t at(size_t logical) const {
        const uint32_t slot = static_cast<uint32_t>((first_slot + logical / msg_size) % msg_count);
        return entry_off + static_cast<size_t>(slot) * msg_size + logical % msg_size;
    }
};

void copy_in(std::span<std::byte> store, const RecordMap& m, size_t logical, std::span<const std::byte> src) {
    while (!src.empty()) {
        const size_t n = std::min(src.size(), m.msg_size - logical % m.msg_size);
        std::memcpy(store.data() + m.at(logical), src.data(), n);
        src = src.subspan(n);
        logical += n;
    }
}

void copy_out(std::span<const std::byte> store, const RecordMap& m, size_t logical, std::span<std::byte> dst) {
    while (!dst.empty()) {
        const size_t n = std::min(dst.size(), m.msg_size - logical % m.msg_size);
        std::memcpy(dst.data(), store.data() + m.at(logical), n);
        dst = dst.subspan(n);
        logical += n;
    }
}

// _checkSum32 over [0, bytes) of a record that may wrap (bytes a multiple of 8; msg_size is too).
uint32_t record_checksum(std::span<const std::byte> store, const RecordMap& m, size_t bytes) {
    uint64_t x = 0;
    for (size_t off = 0; off < bytes; off += 8) {
        uint64_t w;
        std::memcpy(&w, store.data() + m.at(off), 8);
        x ^= w;
    }
    return static_cast<uint32_t>(x >> 32) ^ static_cast<uint32_t>(x);
}

MsgqTxHeader parse_header(std::span<const std::byte> store) {
    MsgqTxHeader h;
    h.version = load32(store, 0);
    h.size = load32(store, 4);
    h.msg_size = load32(store, 8);
    h.msg_count = load32(store, 12);
    h.write_ptr = load32(store, 16);
    h.flags = load32(store, 20);
    h.rx_hdr_off = load32(store, 24);
    h.entry_off = load32(store, 28);
    return h;
}

}  // namespace

uint32_t checksum32(std::span<const std::byte> data) {
    if (data.size() % 8 != 0)
        throw Error("", fmt::format("GSP msgq checksum: {} bytes is not a multiple of 8 (pad with zeros)",
                                    data.size()));
    uint64_t x = 0;
    for (size_t off = 0; off < data.size(); off += 8) {
        uint64_t w;
        std::memcpy(&w, data.data() + off, 8);
        x ^= w;
    }
    return static_cast<uint32_t>(x >> 32) ^ static_cast<uint32_t>(x);
}

MsgqTxHeader init_queue(std::span<std::byte> store, uint32_t msg_size, uint32_t flags, unsigned hdr_align_log2,
                        unsigned entry_align_log2) {
    // msgqTxCreate's checks: msgSize >= MSGQ_MSG_SIZE_MIN, alignments 2^3 .. 2^12, room for one entry.
    if (msg_size < kMsgqMsgSizeMin || (msg_size & (msg_size - 1)) != 0)
        throw Error("", fmt::format("GSP msgq: msgSize {} is not a power of two >= {}", msg_size, kMsgqMsgSizeMin));
    if (hdr_align_log2 < 3 || hdr_align_log2 > 12 || entry_align_log2 < 3 || entry_align_log2 > 12)
        throw Error("", "GSP msgq: alignments must be 2^3 .. 2^12 (MSGQ_META_MIN_ALIGN .. MAX_ALIGN)");
    if (store.size() > UINT32_MAX || reinterpret_cast<uintptr_t>(store.data()) % (1u << hdr_align_log2) != 0)
        throw Error("", fmt::format("GSP msgq: backing store of {} bytes is too large or not {}-byte aligned",
                                    store.size(), 1u << hdr_align_log2));
    MsgqTxHeader h;
    h.version = kMsgqVersion;
    h.size = static_cast<uint32_t>(store.size());
    h.msg_size = msg_size;
    h.flags = flags;
    h.rx_hdr_off = align_up(kMsgqTxHeaderSize, hdr_align_log2);
    h.entry_off = align_up(h.rx_hdr_off + kMsgqRxHeaderSize, entry_align_log2);
    if (h.size < h.entry_off + msg_size)
        throw Error("", fmt::format("GSP msgq: {} bytes hold no {}-byte entry after offset {:#x}", h.size, msg_size,
                                    h.entry_off));
    h.msg_count = (h.size - h.entry_off) / msg_size;
    h.write_ptr = 0;
    std::memset(store.data(), 0, h.entry_off);
    const uint32_t words[8] = {h.version, h.size, h.msg_size, h.msg_count, h.write_ptr, h.flags, h.rx_hdr_off,
                               h.entry_off};
    std::memcpy(store.data(), words, sizeof words);
    return h;
}

MsgqTxHeader read_tx_header(std::span<const std::byte> store) {
    if (store.size() < kMsgqTxHeaderSize) throw Error("", "GSP msgq: store smaller than msgqTxHeader");
    return parse_header(store);
}

std::span<std::byte> rx_header_slot(std::span<std::byte> store) {
    const MsgqTxHeader h = read_tx_header(store);
    if (!range_within(h.rx_hdr_off, kMsgqRxHeaderSize, store.size()))
        throw Error("", fmt::format("GSP msgq: rxHdrOff {:#x} is outside the {}-byte store", h.rx_hdr_off,
                                    store.size()));
    return store.subspan(h.rx_hdr_off, kMsgqRxHeaderSize);
}

uint32_t elements_for_payload(size_t payload_bytes, uint32_t msg_size) {
    const size_t len = kElementHeaderSize + kRpcHeaderSize + payload_bytes;
    return static_cast<uint32_t>((len + msg_size - 1) / msg_size);  // gspMsgQueueBytesToElements
}

// ---- writer ----

MsgqWriter::MsgqWriter(std::span<std::byte> store, std::span<std::byte> read_ptr, std::string device)
    : store_(store), read_ptr_(read_ptr.first(std::min<size_t>(read_ptr.size(), 4))), device_(std::move(device)) {
    require_word(read_ptr_, "the readPtr location");
    require_word(store_.subspan(0, std::min<size_t>(store_.size(), 4)), "the queue store");
    tx_ = read_tx_header(store_);
    if (tx_.version != kMsgqVersion || tx_.size != store_.size() || tx_.msg_size < kMsgqMsgSizeMin ||
        tx_.msg_size % 8 != 0 || tx_.msg_count == 0 || tx_.write_ptr >= tx_.msg_count ||
        !range_within(tx_.entry_off, static_cast<uint64_t>(tx_.msg_count) * tx_.msg_size, store_.size()))
        throw Error(device_, "GSP msgq writer: the store does not hold a queue laid out by init_queue");
}

uint32_t MsgqWriter::free_elements() const {
    const uint32_t rp = load_shared(read_ptr_);
    if (rp >= tx_.msg_count)
        throw ProtocolError(device_, fmt::format("GSP msgq: consumer readPtr {} is not an entry of a {}-entry queue "
                                                 "(writePtr {})",
                                                 rp, tx_.msg_count, tx_.write_ptr));
    uint32_t free = rp + tx_.msg_count - tx_.write_ptr - 1;
    if (free >= tx_.msg_count) free -= tx_.msg_count;
    return free;
}

void MsgqWriter::write_record(uint32_t function, std::span<const std::byte> payload, uint32_t elements,
                              const std::optional<ReplyFields>& reply) {
    const RecordMap m{tx_.entry_off, tx_.msg_size, tx_.msg_count, tx_.write_ptr};
    const size_t record_bytes = static_cast<size_t>(elements) * tx_.msg_size;
    // Zero the whole record first: the checksum reads the padding to 8 bytes, and no stale bytes
    // of an earlier message should travel in the slack.
    for (size_t off = 0; off < record_bytes; off += tx_.msg_size)
        std::memset(store_.data() + m.at(off), 0, tx_.msg_size);
    const uint32_t rpc_length = static_cast<uint32_t>(kRpcHeaderSize + payload.size());
    const uint32_t element[3] = {0 /* checkSum */, seq_num_, elements};
    const uint32_t result = reply ? reply->rpc_result : kRpcResultPending;
    const uint32_t sequence = reply ? reply->sequence : rpc_sequence_;
    const uint32_t rpc[8] = {kRpcHeaderVersion, kRpcSignature, rpc_length, function, result,
                             reply ? 0 : kRpcResultPending, sequence, 0};
    copy_in(store_, m, kElementChecksumOffset, std::as_bytes(std::span(element)));
    copy_in(store_, m, kElementHeaderSize, std::as_bytes(std::span(rpc)));
    copy_in(store_, m, kElementHeaderSize + kRpcHeaderSize, payload);
    const size_t msg_len = kElementHeaderSize + rpc_length;
    const uint32_t sum = record_checksum(store_, m, (msg_len + 7) & ~size_t{7});
    copy_in(store_, m, kElementChecksumOffset, std::as_bytes(std::span(&sum, 1)));
    // (The kernel sums header + rpc.length rounded to 8 bytes; nouveau's r535 sums whole 4 KiB
    // elements. With the slack zeroed above both give the same value.)

    tx_.write_ptr = (tx_.write_ptr + elements) % tx_.msg_count;
    store_shared(store_.subspan(kWritePtrOffset, 4), tx_.write_ptr);  // msgqTxSubmitBuffers, after a fence
    ++seq_num_;
    if (!reply) ++rpc_sequence_;
}

bool MsgqWriter::send(uint32_t function, std::span<const std::byte> payload) {
    if (payload.size() > kMaxPayloadPerRecord)
        throw Error(device_, fmt::format("GSP RPC {}: {} bytes of payload is over one record's {} (use send_large)",
                                         function, payload.size(), kMaxPayloadPerRecord));
    const uint32_t elements = elements_for_payload(payload.size(), tx_.msg_size);
    if (elements > tx_.msg_count - 1)
        throw Error(device_, fmt::format("GSP RPC {}: a record of {} elements never fits a {}-entry queue", function,
                                         elements, tx_.msg_count));
    if (free_elements() < elements) return false;
    write_record(function, payload, elements, std::nullopt);
    return true;
}

bool MsgqWriter::send_reply(uint32_t function, uint32_t rpc_result, uint32_t sequence, std::span<const std::byte> payload) {
    if (payload.size() > kMaxPayloadPerRecord)
        throw Error(device_, fmt::format("GSP reply to RPC {}: {} bytes of payload is over one record's {}", function,
                                         payload.size(), kMaxPayloadPerRecord));
    const uint32_t elements = elements_for_payload(payload.size(), tx_.msg_size);
    if (elements > tx_.msg_count - 1 || free_elements() < elements) return false;
    write_record(function, payload, elements, ReplyFields{rpc_result, sequence});
    return true;
}

bool MsgqWriter::send_large(uint32_t function, std::span<const std::byte> payload) {
    uint64_t needed = 0;
    size_t records = 0;
    for (size_t off = 0; off < payload.size() || records == 0; off += kMaxPayloadPerRecord, ++records)
        needed += elements_for_payload(std::min(kMaxPayloadPerRecord, payload.size() - off), tx_.msg_size);
    if (needed > tx_.msg_count - 1)
        throw Error(device_, fmt::format("GSP RPC {}: {} bytes need {} elements in {} records; the queue holds at "
                                         "most {}",
                                         function, payload.size(), needed, records, tx_.msg_count - 1));
    if (free_elements() < needed) return false;
    size_t off = 0;
    do {
        const size_t n = std::min(kMaxPayloadPerRecord, payload.size() - off);
        write_record(off == 0 ? function : kFunctionContinuationRecord, payload.subspan(off, n),
                     elements_for_payload(n, tx_.msg_size), std::nullopt);
        off += n;
    } while (off < payload.size());
    return true;
}

LargeRpcSender::LargeRpcSender(MsgqWriter& writer, uint32_t function, std::span<const std::byte> payload)
    : writer_(writer), function_(function), payload_(payload) {}

bool LargeRpcSender::pump() {
    while (!done()) {
        const size_t n = std::min(kMaxPayloadPerRecord, payload_.size() - offset_);
        const uint32_t elements = elements_for_payload(n, writer_.tx_.msg_size);
        if (elements > writer_.tx_.msg_count - 1)
            throw Error(writer_.device_, fmt::format("GSP RPC {}: a record of {} elements never fits a {}-entry queue",
                                                     function_, elements, writer_.tx_.msg_count));
        if (writer_.free_elements() < elements) return false;
        writer_.write_record(started_ ? kFunctionContinuationRecord : function_, payload_.subspan(offset_, n),
                             elements, std::nullopt);
        started_ = true;
        offset_ += n;
        ++records_;
    }
    return true;
}

// ---- reader ----

MsgqReader::MsgqReader(std::span<const std::byte> store, std::span<std::byte> read_ptr, std::string device)
    : store_(store), read_ptr_(read_ptr.first(std::min<size_t>(read_ptr.size(), 4))), device_(std::move(device)) {
    require_word(read_ptr_, "the readPtr location");
    require_word(store_.subspan(0, std::min<size_t>(store_.size(), 4)), "the queue store");
    rx_ = read_tx_header(store_);
    auto bad = [&](const char* field, uint64_t expected, uint64_t found) {
        return ProtocolError(device_, fmt::format("GSP msgq header: {} is {:#x}, expected {:#x}", field, found,
                                                  expected));
    };
    // msgqRxLink's checks, so a half-written or foreign header is refused before any entry is read.
    if (rx_.version != kMsgqVersion) throw bad("version", kMsgqVersion, rx_.version);
    if (rx_.size != store_.size()) throw bad("size", store_.size(), rx_.size);
    if (rx_.msg_size < kMsgqMsgSizeMin || (rx_.msg_size & (rx_.msg_size - 1)) != 0)
        throw bad("msgSize (a power of two >= 16)", kGspMsgSize, rx_.msg_size);
    if (rx_.rx_hdr_off < kMsgqTxHeaderSize) throw bad("rxHdrOff (>= 32)", kMsgqTxHeaderSize, rx_.rx_hdr_off);
    if (rx_.entry_off < rx_.rx_hdr_off + kMsgqRxHeaderSize || rx_.size < rx_.entry_off + rx_.msg_size)
        throw bad("entryOff", align_up(rx_.rx_hdr_off + kMsgqRxHeaderSize, 12), rx_.entry_off);
    if (rx_.msg_count != (rx_.size - rx_.entry_off) / rx_.msg_size)
        throw bad("msgCount", (rx_.size - rx_.entry_off) / rx_.msg_size, rx_.msg_count);
    store_shared(read_ptr_, 0);
}

uint32_t MsgqReader::available() const {
    const uint32_t wp = load_shared(store_.subspan(kWritePtrOffset, 4));
    if (wp >= rx_.msg_count)
        throw ProtocolError(device_, fmt::format("GSP msgq: producer writePtr {} is not an entry of a {}-entry queue "
                                                 "(readPtr {})",
                                                 wp, rx_.msg_count, read_ptr_value_));
    uint32_t avail = wp + rx_.msg_count - read_ptr_value_;
    if (avail >= rx_.msg_count) avail -= rx_.msg_count;
    return avail;
}

std::optional<RpcMessage> MsgqReader::receive() {
    const uint32_t avail = available();
    if (avail == 0) return std::nullopt;
    const RecordMap m{rx_.entry_off, rx_.msg_size, rx_.msg_count, read_ptr_value_};
    uint32_t element[3];
    copy_out(store_, m, kElementChecksumOffset, std::as_writable_bytes(std::span(element)));
    const uint32_t stored_sum = element[0], seq = element[1], count = element[2];
    const uint32_t max_elements = static_cast<uint32_t>(kQueueElementSizeMax / rx_.msg_size);
    if (count == 0 || count > avail || count > std::max(max_elements, 1u))
        throw ProtocolError(device_, fmt::format("GSP msgq: record at entry {} (seqNum {}) has elemCount {}; {} "
                                                 "entries are written, a record has 1..{}",
                                                 read_ptr_value_, seq, count, avail, max_elements));
    uint32_t rpc[8];
    copy_out(store_, m, kElementHeaderSize, std::as_writable_bytes(std::span(rpc)));
    const uint32_t rpc_length = rpc[2];
    const uint64_t msg_len = kElementHeaderSize + static_cast<uint64_t>(rpc_length);
    if (rpc_length < kRpcHeaderSize || msg_len > static_cast<uint64_t>(count) * rx_.msg_size)
        throw ProtocolError(device_, fmt::format("GSP msgq: record at entry {} (seqNum {}, function {}) has rpc length "
                                                 "{:#x}; its {} elements hold {:#x} .. {:#x}",
                                                 read_ptr_value_, seq, rpc[3], rpc_length, count, kRpcHeaderSize,
                                                 count * rx_.msg_size - kElementHeaderSize));
    const uint32_t sum = record_checksum(store_, m, (msg_len + 7) & ~uint64_t{7});
    if (sum != 0)
        throw ProtocolError(device_, fmt::format("GSP msgq: record at entry {} (seqNum {}, function {}, {} elements): "
                                                 "checksum field {:#010x}, expected {:#010x} (the record's contents "
                                                 "XOR to {:#010x}, not 0)",
                                                 read_ptr_value_, seq, rpc[3], count, stored_sum, stored_sum ^ sum,
                                                 sum));
    if (seq != seq_num_)
        throw ProtocolError(device_, fmt::format("GSP msgq: record at entry {} (function {}): seqNum {}, expected {}",
                                                 read_ptr_value_, rpc[3], seq, seq_num_));
    RpcMessage msg;
    msg.seq_num = seq;
    msg.elem_count = count;
    msg.header_version = rpc[0];
    msg.signature = rpc[1];
    msg.function = rpc[3];
    msg.rpc_result = rpc[4];
    msg.rpc_result_private = rpc[5];
    msg.sequence = rpc[6];
    msg.payload.resize(rpc_length - kRpcHeaderSize);
    copy_out(store_, m, kElementHeaderSize + kRpcHeaderSize, msg.payload);

    read_ptr_value_ = (read_ptr_value_ + count) % rx_.msg_count;  // msgqRxMarkConsumed
    store_shared(read_ptr_, read_ptr_value_);
    ++seq_num_;
    return msg;
}

// ---- large RPCs ----

LargeRpcAssembler::LargeRpcAssembler(size_t total_payload, std::string device)
    : total_(total_payload), device_(std::move(device)) {}

bool LargeRpcAssembler::add(const RpcMessage& record) {
    if (complete())
        throw ProtocolError(device_, fmt::format("GSP large RPC {}: record {} after all {} bytes arrived",
                                                 message_.function, record.sequence, total_));
    if (!started_) {
        message_ = record;
        started_ = true;
    } else {
        if (record.function != kFunctionContinuationRecord)
            throw ProtocolError(device_, fmt::format("GSP large RPC {}: expected a CONTINUATION_RECORD ({}), got "
                                                     "function {} (sequence {})",
                                                     message_.function, kFunctionContinuationRecord, record.function,
                                                     record.sequence));
        if (record.sequence != last_sequence_ + 1)
            throw ProtocolError(device_, fmt::format("GSP large RPC {}: continuation sequence {}, expected {}",
                                                     message_.function, record.sequence, last_sequence_ + 1));
        message_.payload.insert(message_.payload.end(), record.payload.begin(), record.payload.end());
    }
    last_sequence_ = record.sequence;
    if (message_.payload.size() > total_)
        throw ProtocolError(device_, fmt::format("GSP large RPC {}: {} bytes arrived, {} were announced",
                                                 message_.function, message_.payload.size(), total_));
    return complete();
}

}  // namespace baregpu::nv::gsp
