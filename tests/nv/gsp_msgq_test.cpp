// drivers/nv GSP message queue. Offsets and rules re-stated from open-gpu-kernel-modules
// (msgq_priv.h msgqTxHeader, message_queue_priv.h GSP_MSG_QUEUE_ELEMENT and _checkSum32,
// g_rpc-message-header.h rpc_message_header_v03_00, rpc.c _issueRpcLarge) and checked on the raw bytes
// with the test's own reader, not the library's.
#include "base/error.hpp"
#include "drivers/nvshared/gsp_msgq.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

namespace gsp_msgq_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::nv;
using namespace baregpu::nv::gsp;

namespace {

// A page-aligned-enough backing store (uint64_t keeps 8-byte alignment).
struct Store {
    std::vector<uint64_t> mem;
    explicit Store(size_t bytes) : mem(bytes / 8, 0) {}
    std::span<std::byte> bytes() { return std::as_writable_bytes(std::span(mem)); }
    uint32_t u32(size_t off) {
        uint32_t v;
        std::memcpy(&v, bytes().data() + off, 4);
        return v;
    }
    void put32(size_t off, uint32_t v) { std::memcpy(bytes().data() + off, &v, 4); }
};

// The two GSP queues as the CPU lays them out: 256 KiB each, 4 KiB entries, SWAP_RX.
struct Queues {
    Store cmd{0x40000}, stat{0x40000};
    Queues() {
        init_queue(cmd.bytes(), 0x1000);
        init_queue(stat.bytes(), 0x1000);
    }
    // With MSGQ_FLAGS_SWAP_RX, GSP (the reader of the command queue) publishes its readPtr in the
    // status queue's rx slot at +32 (rxHdrOff).
    std::span<std::byte> cmd_read_ptr() { return stat.bytes().subspan(32, 4); }
};

std::vector<std::byte> pattern(size_t n, uint8_t seed) {
    std::vector<std::byte> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(static_cast<uint8_t>(seed + i * 7 + (i >> 8)));
    return v;
}

// _checkSum32, written again: XOR of 64-bit little-endian words, folded hi ^ lo.
uint32_t xor_fold(const std::byte* p, size_t n) {
    uint64_t x = 0;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = 0;
        for (size_t b = 0; b < 8; ++b) w |= static_cast<uint64_t>(std::to_integer<uint8_t>(p[i + b])) << (8 * b);
        x ^= w;
    }
    return static_cast<uint32_t>(x) ^ static_cast<uint32_t>(x >> 32);
}

constexpr size_t kEntries = 0x1000;  // entryOff
constexpr uint32_t kCount = 63;      // (0x40000 - 0x1000) / 0x1000

}  // namespace

TEST_CASE("checksum32 is _checkSum32", "[nv][gsp]") {
    const uint8_t one[8] = {1, 0, 0, 0, 2, 0, 0, 0};  // word 0x0000000200000001 -> 2 ^ 1
    CHECK(checksum32(std::as_bytes(std::span(one))) == 3);
    const uint8_t two[16] = {0xff, 0, 0, 0, 0, 0, 0, 0x10, 0x0f, 0, 0, 0, 0, 0, 0, 0x01};
    // words 0x10000000000000ff ^ 0x010000000000000f = 0x11000000000000f0 -> 0x11000000 ^ 0xf0
    CHECK(checksum32(std::as_bytes(std::span(two))) == 0x110000f0u);
    CHECK_THROWS_AS(checksum32(std::as_bytes(std::span(one)).first(4)), Error);
}

TEST_CASE("init_queue lays out the header as msgqTxCreate does", "[nv][gsp]") {
    Store s(0x40000);
    const MsgqTxHeader h = init_queue(s.bytes(), 0x1000);
    // msgqTxHeader {version, size, msgSize, msgCount, writePtr, flags, rxHdrOff, entryOff}; the values
    // tinygrad's CPU writes for the command queue (nv/ip.py init_rm_args).
    const uint32_t expect[8] = {0, 0x40000, 0x1000, 63, 0, 1, 32, 0x1000};
    for (unsigned i = 0; i < 8; ++i) CHECK(s.u32(4 * i) == expect[i]);
    CHECK(h.msg_count == 63);
    CHECK(rx_header_slot(s.bytes()).data() == s.bytes().data() + 32);
    CHECK_THROWS_AS(init_queue(s.bytes(), 24), Error);  // not a power of two
}

TEST_CASE("a small RPC: element, rpc header and checksum on the raw bytes; round trip", "[nv][gsp]") {
    Queues q;
    MsgqWriter w(q.cmd.bytes(), q.cmd_read_ptr());
    MsgqReader r(q.cmd.bytes(), q.cmd_read_ptr());
    const auto payload = pattern(24, 3);
    REQUIRE(w.send(76, payload));  // GSP_RM_CONTROL
    const size_t e = kEntries;
    CHECK(q.cmd.u32(0x24 + e) == 0);            // seqNum
    CHECK(q.cmd.u32(0x28 + e) == 1);            // elemCount: 0x30 + 0x20 + 24 bytes in one 4 KiB element
    CHECK(q.cmd.u32(0x30 + e) == 0x03000000u);  // header_version
    CHECK(q.cmd.u32(0x34 + e) == 0x43505256u);  // signature "VRPC"
    CHECK(q.cmd.u32(0x38 + e) == 0x20 + 24);    // length: rpc header + payload
    CHECK(q.cmd.u32(0x3c + e) == 76);           // function
    CHECK(q.cmd.u32(0x40 + e) == 0xffffffffu);  // rpc_result = RPC_PENDING
    CHECK(q.cmd.u32(0x44 + e) == 0xffffffffu);  // rpc_result_private
    CHECK(q.cmd.u32(0x48 + e) == 0);            // sequence
    CHECK(std::memcmp(q.cmd.bytes().data() + e + 0x50, payload.data(), payload.size()) == 0);
    CHECK(xor_fold(q.cmd.bytes().data() + e, 0x30 + 0x20 + 24) == 0);  // whole record XORs to 0
    CHECK(q.cmd.u32(0x2c + e) == 0);            // padding
    CHECK(q.cmd.u32(16) == 1);                  // writePtr

    CHECK(r.available() == 1);
    auto m = r.receive();
    REQUIRE(m);
    CHECK(m->function == 76);
    CHECK(m->payload == payload);
    CHECK(m->seq_num == 0);
    CHECK(q.stat.u32(32) == 1);                 // GSP's readPtr, in the status queue's page
    CHECK_FALSE(r.receive());
}

TEST_CASE("a multi-element RPC and one that crosses the queue end", "[nv][gsp]") {
    Queues q;
    MsgqWriter w(q.cmd.bytes(), q.cmd_read_ptr());
    MsgqReader r(q.cmd.bytes(), q.cmd_read_ptr());
    const auto big = pattern(0x2500, 9);  // 0x30 + 0x20 + 0x2500 = 0x2550 -> 3 elements
    REQUIRE(w.send(103, big));
    CHECK(q.cmd.u32(kEntries + 0x28) == 3);
    CHECK(q.cmd.u32(16) == 3);
    auto m = r.receive();
    REQUIRE(m);
    CHECK(m->payload == big);
    CHECK(m->elem_count == 3);
    // Walk writePtr to 61 with one-element records, then a 3-element record takes 61, 62, 0.
    for (int i = 0; i < 58; ++i) {
        REQUIRE(w.send(10, pattern(8, static_cast<uint8_t>(i))));
        REQUIRE(r.receive());
    }
    CHECK(q.cmd.u32(16) == 61);
    const auto wrap = pattern(0x2500, 77);
    REQUIRE(w.send(103, wrap));
    CHECK(q.cmd.u32(16) == 1);  // (61 + 3) % 63
    // Element 0 of the record at entry 61; its third element is entry 0.
    CHECK(q.cmd.u32(kEntries + 61 * 0x1000 + 0x28) == 3);
    const size_t tail = 0x2550 - 2 * 0x1000;  // bytes of the record in entry 0
    CHECK(std::memcmp(q.cmd.bytes().data() + kEntries, wrap.data() + (0x2000 - 0x50), tail) == 0);
    auto wm = r.receive();
    REQUIRE(wm);
    CHECK(wm->payload == wrap);
    CHECK(wm->seq_num == 59);  // 0, then 58 one-element records
    CHECK(q.stat.u32(32) == 1);
}

TEST_CASE("continuation records carry what does not fit one record, and reassemble", "[nv][gsp]") {
    Queues q;
    MsgqWriter w(q.cmd.bytes(), q.cmd_read_ptr());
    MsgqReader r(q.cmd.bytes(), q.cmd_read_ptr());
    // One record holds 0x10000 - 0x30 - 0x20 = 0xffb0 payload bytes (queueElementSizeMax = 16 pages).
    const auto payload = pattern(0x18000, 5);
    REQUIRE(w.send_large(72, payload));
    CHECK(q.cmd.u32(kEntries + 0x28) == 16);               // first record: 16 elements
    CHECK(q.cmd.u32(kEntries + 0x38) == 0x20 + 0xffb0);
    const size_t second = kEntries + 16 * 0x1000;
    CHECK(q.cmd.u32(second + 0x3c) == 71);                 // CONTINUATION_RECORD
    CHECK(q.cmd.u32(second + 0x38) == 0x20 + (0x18000 - 0xffb0));
    CHECK(q.cmd.u32(second + 0x28) == 9);                  // 0x50 + 0x8050 bytes -> 9 elements
    CHECK(q.cmd.u32(second + 0x48) == 1);                  // rpc sequence follows the first
    CHECK(q.cmd.u32(16) == 25);

    LargeRpcAssembler a(payload.size());
    auto m1 = r.receive();
    REQUIRE(m1);
    CHECK_FALSE(a.add(*m1));
    auto m2 = r.receive();
    REQUIRE(m2);
    CHECK(a.add(*m2));
    CHECK(a.message().function == 72);
    CHECK(a.message().payload == payload);

    // Out of order or foreign records are refused.
    LargeRpcAssembler b(payload.size());
    b.add(*m1);
    RpcMessage other = *m2;
    other.function = 76;
    CHECK_THROWS_AS(b.add(other), ProtocolError);
    other = *m2;
    other.sequence = 5;
    CHECK_THROWS_AS(b.add(other), ProtocolError);
    LargeRpcAssembler c(10);
    CHECK_THROWS_AS(c.add(*m1), ProtocolError);            // more bytes than announced
}

TEST_CASE("a corrupted byte is a ProtocolError naming the record; readPtr stays", "[nv][gsp]") {
    Queues q;
    MsgqWriter w(q.cmd.bytes(), q.cmd_read_ptr());
    MsgqReader r(q.cmd.bytes(), q.cmd_read_ptr());
    REQUIRE(w.send(76, pattern(100, 1)));
    q.cmd.bytes()[kEntries + 0x50 + 17] ^= std::byte{0x40};
    try {
        r.receive();
        FAIL("no error");
    } catch (const ProtocolError& e) {
        const std::string what = e.what();
        CHECK(what.find("entry 0") != std::string::npos);
        CHECK(what.find("checksum") != std::string::npos);
        CHECK(what.find("seqNum 0") != std::string::npos);
    }
    CHECK(r.read_ptr() == 0);
    CHECK(q.stat.u32(32) == 0);
}

TEST_CASE("a full queue: the writer refuses and overwrites nothing", "[nv][gsp]") {
    Queues q;
    MsgqWriter w(q.cmd.bytes(), q.cmd_read_ptr());
    // 63 entries hold 62 (readPtr + msgCount - writePtr - 1): 20 three-element records = 60, then 2 left.
    int sent = 0;
    while (w.send(103, pattern(0x2500, static_cast<uint8_t>(sent)))) ++sent;
    CHECK(sent == 20);
    CHECK(w.free_elements() == 2);
    const std::vector<uint64_t> before = q.cmd.mem;
    CHECK_FALSE(w.send(103, pattern(0x2500, 99)));
    CHECK_FALSE(w.send_large(103, pattern(0x2500, 99)));
    CHECK(q.cmd.mem == before);
    CHECK(w.next_seq_num() == 20);
    REQUIRE(w.send(10, pattern(8, 0)));  // one element still fits
    REQUIRE(w.send(10, pattern(8, 0)));
    CHECK(w.free_elements() == 0);
    CHECK_FALSE(w.send(10, pattern(8, 0)));
    // The consumer frees three: the next three-element record fits exactly.
    MsgqReader r(q.cmd.bytes(), q.cmd_read_ptr());
    REQUIRE(r.receive());
    CHECK(w.free_elements() == 3);
    CHECK(w.send(103, pattern(0x2500, 1)));
    // A record that could never fit, and a readPtr that is no entry.
    CHECK_THROWS_AS(w.send(1, pattern(kMaxPayloadPerRecord + 1, 0)), Error);
    q.stat.put32(32, 63);
    CHECK_THROWS_AS(w.free_elements(), ProtocolError);
}

TEST_CASE("seqNum must be the next one", "[nv][gsp]") {
    Queues q;
    MsgqWriter w(q.cmd.bytes(), q.cmd_read_ptr());
    MsgqReader r(q.cmd.bytes(), q.cmd_read_ptr());
    REQUIRE(w.send(1, pattern(8, 0)));
    REQUIRE(w.send(2, pattern(8, 1)));
    REQUIRE(r.receive());
    // Record 2 at entry 1: seqNum 1 -> 5, and checkSum adjusted so that the record still XORs to 0
    // (seqNum is the high half and checkSum the low half of the same 64-bit word: fold XORs both in).
    const size_t e = kEntries + 0x1000;
    q.cmd.put32(e + 0x24, 5);
    q.cmd.put32(e + 0x20, q.cmd.u32(e + 0x20) ^ 1 ^ 5);
    try {
        r.receive();
        FAIL("no error");
    } catch (const ProtocolError& err) {
        CHECK(std::string(err.what()).find("seqNum 5, expected 1") != std::string::npos);
    }
}

TEST_CASE("the reader refuses a queue header msgqRxLink would refuse", "[nv][gsp]") {
    Queues q;
    q.cmd.put32(12, 64);  // msgCount
    CHECK_THROWS_AS(MsgqReader(q.cmd.bytes(), q.cmd_read_ptr()), ProtocolError);
    q.cmd.put32(12, 63);
    q.cmd.put32(0, 1);  // version
    CHECK_THROWS_AS(MsgqReader(q.cmd.bytes(), q.cmd_read_ptr()), ProtocolError);
    q.cmd.put32(0, 0);
    MsgqReader r(q.cmd.bytes(), q.cmd_read_ptr());
    q.cmd.put32(16, 63);  // writePtr beyond the ring
    CHECK_THROWS_AS(r.available(), ProtocolError);
}

TEST_CASE("an RPC larger than the queue goes record by record as the reader frees room", "[nv][gsp]") {
    Queues q;
    MsgqWriter w(q.cmd.bytes(), q.cmd_read_ptr());
    MsgqReader r(q.cmd.bytes(), q.cmd_read_ptr());
    // 0x40000 bytes: four full records (16 elements each) and one of 0x40000 - 4 * 0xffb0 = 0x140 bytes
    // (1 element): 65 elements, more than the 62 a 63-entry queue holds at once.
    const auto payload = pattern(0x40000, 11);
    CHECK_THROWS_AS(w.send_large(73, payload), Error);
    LargeRpcSender sender(w, 73, payload);
    LargeRpcAssembler assembler(payload.size());
    int rounds = 0;
    while (!assembler.complete()) {
        REQUIRE(++rounds < 20);
        sender.pump();
        CHECK((sender.done() || w.free_elements() < 16));  // stopped: all sent, or the next record did not fit
        while (auto m = r.receive()) assembler.add(*m);
    }
    CHECK(sender.done());
    CHECK(sender.records_sent() == 5);
    CHECK(assembler.message().function == 73);
    CHECK(assembler.message().payload == payload);
    CHECK(r.available() == 0);
}

}  // namespace gsp_msgq_test
