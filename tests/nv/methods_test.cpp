// drivers/nv copy engine and compute method encoders. Expected words are composed from
// open-gpu-kernel-modules class/clc7b5.h and clc6c0.h values re-typed here, with the method header
// layout of clc56f.h (SEC_OP 31:29 = 1 incrementing, COUNT 28:16, SUBCHANNEL 15:13, ADDRESS 11:0 in dwords).
#include "base/error.hpp"
#include "drivers/nv/ce_methods.hpp"
#include "drivers/nv/compute_methods.hpp"

#include <catch2/catch.hpp>

#include <vector>

namespace methods_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::nv;

namespace {
constexpr uint32_t incr(uint32_t count, uint32_t subch, uint32_t method) {
    return 1u << 29 | count << 16 | subch << 13 | method / 4;
}
}  // namespace

TEST_CASE("ce_copy writes clc7b5.h methods with a pitch, non-pipelined LAUNCH_DMA", "[nv][ce]") {
    std::vector<uint32_t> mem(64);
    PushBuffer pb(mem);
    ce_set_object(pb, 4);
    ce_copy(pb, 4, 0x1'2345'6000, 0x1ff'0000'1000, 0x300000, CeRelease{0x5000, 0x1'0000'0007, true, true, false});
    std::vector<uint32_t> want{
        incr(1, 4, 0x0000), 0xc7b5,                                   // SET_OBJECT AMPERE_DMA_COPY_B
        incr(4, 4, 0x0400), 0x1, 0x23456000, 0x1ff, 0x00001000,       // OFFSET_IN_UPPER .. OFFSET_OUT_LOWER
        incr(1, 4, 0x0418), 0x300000,                                 // LINE_LENGTH_IN
        incr(4, 4, 0x0240), 0x0, 0x5000, 0x7, 0x1,                    // SET_SEMAPHORE_A, B, PAYLOAD, PAYLOAD_UPPER
        // LAUNCH_DMA: NON_PIPELINED (2 at 1:0), FLUSH_ENABLE 2:2, SEMAPHORE_TYPE FOUR_WORD (2 at 4:3),
        // SRC/DST_MEMORY_LAYOUT PITCH 7:7 / 8:8, SEMAPHORE_PAYLOAD_SIZE TWO_WORD 27:27.
        incr(1, 4, 0x0300), 2u | 1u << 2 | 2u << 3 | 1u << 7 | 1u << 8 | 1u << 27,
    };
    CHECK(std::vector<uint32_t>(pb.dwords().begin(), pb.dwords().end()) == want);
    CHECK_THROWS_AS(ce_copy(pb, 4, uint64_t{1} << 49, 0, 16), Error);
    CHECK_THROWS_AS(ce_copy(pb, 4, 0, 0, 0), Error);
    CHECK_THROWS_AS(ce_release(pb, 4, CeRelease{0x5004, 1, true, false, false}), Error);  // 64-bit payload misaligned
}

TEST_CASE("ce_release: semaphore only, one word, non-stall interrupt", "[nv][ce]") {
    std::vector<uint32_t> mem(16);
    PushBuffer pb(mem);
    ce_release(pb, 2, CeRelease{0x9000, 5, false, false, true});
    std::vector<uint32_t> want{incr(4, 2, 0x0240), 0x0, 0x9000, 5, 0,
                               // DATA_TRANSFER_TYPE NONE, FLUSH, ONE_WORD (1 at 4:3), INTERRUPT NON_BLOCKING (2 at 6:5)
                               incr(1, 2, 0x0300), 1u << 2 | 1u << 3 | 2u << 5};
    CHECK(std::vector<uint32_t>(pb.dwords().begin(), pb.dwords().end()) == want);
}

TEST_CASE("compute_launch writes SEND_PCAS_A and SEND_SIGNALING_PCAS2_B (clc6c0.h)", "[nv][compute]") {
    std::vector<uint32_t> mem(16);
    PushBuffer pb(mem);
    compute_set_object(pb, 1);
    compute_launch(pb, 1, 0xab'cdef'0100);
    std::vector<uint32_t> want{incr(1, 1, 0x0000), 0xc9c0, incr(1, 1, 0x02b4), 0xabcdef01, incr(1, 1, 0x02c0), 2};
    CHECK(std::vector<uint32_t>(pb.dwords().begin(), pb.dwords().end()) == want);
    CHECK_THROWS_AS(compute_launch(pb, 1, 0x180), Error);              // not 256-byte aligned
    CHECK_THROWS_AS(compute_launch(pb, 1, uint64_t{1} << 40), Error);  // SHIFTED8 overflows 32 bits
    CHECK_THROWS_AS(compute_launch(pb, 1, 0x100, 1), Error);           // INVALIDATE does not launch
}

}  // namespace methods_test
