// drivers/nv GPFIFO entries, method headers, host semaphores and the ring. Expected words
// are composed here from the field positions of open-gpu-kernel-modules class/clc56f.h and clc86f.h,
// re-stated below — not from the encoder's constants.
#include "base/error.hpp"
#include "drivers/nv/gpfifo.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <vector>

namespace gpfifo_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::nv;

namespace {
// clc56f.h NVC56F_DMA_*: SEC_OP 31:29, COUNT / IMMD_DATA 28:16, SUBCHANNEL 15:13, ADDRESS 11:0 (dwords).
constexpr uint32_t dma(uint32_t sec_op, uint32_t count, uint32_t subch, uint32_t method_bytes) {
    return sec_op << 29 | count << 16 | subch << 13 | method_bytes / 4;
}
// clc56f.h method offsets.
constexpr uint32_t NVC56F_NON_STALL_INTERRUPT = 0x20, NVC56F_SEM_ADDR_LO = 0x5c;
// NVC56F_SEM_EXECUTE: OPERATION 2:0 (RELEASE 1, ACQ_CIRC_GEQ 3), RELEASE_WFI 20, PAYLOAD_SIZE 24, RELEASE_TIMESTAMP 25.
}  // namespace

TEST_CASE("GP entry words (NVC56F_GP_ENTRY0/1)", "[nv][gpfifo]") {
    const uint64_t va = 0x12'3456'7890;
    const GpEntry e = gp_entry(va, 0x100, GpLevel::subroutine);
    CHECK(e.entry0 == 0x34567890u);                              // GET 31:2 (va bits 31:2), FETCH 0 = unconditional
    CHECK(e.entry1 == (0x12u | 1u << 9 | 0x100u << 10));        // GET_HI 7:0, LEVEL 9, LENGTH 30:10
    // The same entry as tinygrad builds it: addr | len << 42 | LEVEL_SUBROUTINE << 41.
    CHECK(e.raw() == (va | 0x100ull << 42 | 1ull << 41));
    const GpEntry s = gp_entry(0x1000, 1, GpLevel::main, GpFetch::conditional, GpSync::wait);
    CHECK(s.entry0 == 0x1001u);
    CHECK(s.entry1 == (1u << 10 | 1u << 31));                    // SYNC 31 = WAIT
    CHECK(gp_entry(0x1000, 0x1FFFFF).entry1 == 0x1FFFFFu << 10);
    CHECK_THROWS_AS(gp_entry(0x1002, 1), Error);                 // not 4-byte aligned
    CHECK_THROWS_AS(gp_entry(1ull << 40, 1), Error);             // GET_HI has 8 bits
    CHECK_THROWS_AS(gp_entry(0x1000, 0), Error);
    CHECK_THROWS_AS(gp_entry(0x1000, 0x200000), Error);          // LENGTH has 21 bits
}

TEST_CASE("method headers (NVC56F_DMA_*)", "[nv][gpfifo]") {
    // SEND_PCAS_A (0x2b4) on subchannel 1, one word: SEC_OP_INC_METHOD = 1.
    CHECK(method_incr(1, 0x2b4, 1) == 0x200120adu);
    CHECK(method_incr(1, 0x2b4, 1) == dma(1, 1, 1, 0x2b4));
    CHECK(method_nonincr(4, 0x400, 0x1FFF) == dma(3, 0x1FFF, 4, 0x400));   // SEC_OP_NON_INC_METHOD = 3
    CHECK(method_immediate(7, 0x3FFC, 0x1234) == dma(4, 0x1234, 7, 0x3FFC));  // SEC_OP_IMMD_DATA_METHOD = 4
    CHECK(method_one_incr(0, 0x10, 2) == dma(5, 2, 0, 0x10));               // SEC_OP_ONE_INC = 5
    CHECK(method_immediate(0, 0, 0) == 0x80000000u);
    CHECK_THROWS_AS(method_incr(8, 0, 1), Error);        // 3-bit subchannel
    CHECK_THROWS_AS(method_incr(0, 0x4000, 1), Error);   // 12-bit dword address
    CHECK_THROWS_AS(method_incr(0, 0x2, 1), Error);      // not a dword offset
    CHECK_THROWS_AS(method_incr(0, 0, 0x2000), Error);   // 13-bit count
}

TEST_CASE("host semaphores and the non-stall interrupt", "[nv][gpfifo]") {
    std::array<uint32_t, 32> buf{};
    PushBuffer pb(buf);
    pb.sem_release(0xab'cdef'0010, 0x1'0000'0002).sem_acquire_geq(0x40, 7, false).non_stall_interrupt();
    const std::vector<uint32_t> expect = {
        dma(1, 5, 0, NVC56F_SEM_ADDR_LO), 0xcdef0010u, 0xabu, 0x2u, 0x1u,
        1u | 1u << 20 | 1u << 24 | 1u << 25,             // RELEASE, WFI, 64-bit, timestamp
        dma(1, 5, 0, NVC56F_SEM_ADDR_LO), 0x40u, 0u, 7u, 0u,
        3u,                                               // ACQ_CIRC_GEQ, 32-bit
        dma(1, 1, 0, NVC56F_NON_STALL_INTERRUPT), 0u,
    };
    CHECK(std::vector<uint32_t>(pb.dwords().begin(), pb.dwords().end()) == expect);

    // SEM_ADDR_HI_OFFSET: 7:0 on Ampere (clc56f.h), 24:0 on Hopper (clc86f.h).
    std::array<uint32_t, 8> small{};
    PushBuffer ampere(small);
    CHECK_THROWS_AS(ampere.sem_release(1ull << 40, 1), Error);
    CHECK(ampere.size_dwords() == 0);
    PushBuffer hopper(small, HostClass::hopper_c86f);
    hopper.sem_release(1ull << 40, 1);
    CHECK(hopper.dwords()[2] == 0x100u);
    CHECK_THROWS_AS(hopper.sem_release(0x42, 1), Error);        // not 4-byte aligned
    CHECK_THROWS_AS(PushBuffer(small).sem_acquire_geq(0x40, 1ull << 32, false), Error);  // 32-bit payload
    // Full buffer: refused before a word is written.
    std::array<uint32_t, 5> five{};
    PushBuffer tight(five);
    CHECK_THROWS_AS(tight.sem_release(0x40, 1), Error);
    CHECK(tight.size_dwords() == 0);
}

TEST_CASE("GpFifoRing wraps and never overwrites what GPGet has not passed", "[nv][gpfifo]") {
    std::array<uint64_t, 4> ring;
    ring.fill(0xfeedfeedfeedfeedull);
    GpFifoRing r(ring);
    const GpEntry a = gp_entry(0x1000, 1), b = gp_entry(0x2000, 2), c = gp_entry(0x3000, 3), d = gp_entry(0x4000, 4);
    CHECK(r.free_entries(0) == 3);  // put == get is empty: 4 slots hold 3 entries
    CHECK(r.try_push(a, 0));
    CHECK(r.try_push(b, 0));
    CHECK(r.try_push(c, 0));
    CHECK(r.put() == 3);
    CHECK_FALSE(r.try_push(d, 0));  // full: slot 3 would make put == get
    CHECK(ring[3] == 0xfeedfeedfeedfeedull);
    CHECK(r.put() == 3);
    // The GPU fetched two: two more fit, wrapping to slot 0.
    CHECK(r.free_entries(2) == 2);
    CHECK(r.try_push(d, 2));
    CHECK(r.try_push(a, 2));
    CHECK(r.put() == 1);
    CHECK(ring[3] == d.raw());
    CHECK(ring[0] == a.raw());
    CHECK_FALSE(r.try_push(b, 2));  // slot 1 is GPGet's slot-to-be: refused
    CHECK(ring[1] == b.raw());      // still the old entry b from the first lap (not rewritten)
    CHECK_THROWS_AS(r.free_entries(4), ProtocolError);  // GPGet beyond the ring
}

TEST_CASE("GpFifoRing::push waits through the caller's function and gives up when told", "[nv][gpfifo]") {
    std::array<uint64_t, 2> ring{};
    GpFifoRing r(ring);
    CHECK(r.try_push(gp_entry(0x1000, 1), 0));
    std::vector<uint32_t> gets = {0, 0, 1};  // the GPU passes the entry on the third look
    size_t looks = 0, waits = 0;
    auto read_get = [&] { return gets[std::min(looks++, gets.size() - 1)]; };
    CHECK(r.push(gp_entry(0x2000, 1), read_get, [&] { ++waits; return true; }));
    CHECK(looks == 3);
    CHECK(waits == 2);
    CHECK(ring[1] == gp_entry(0x2000, 1).raw());
    // Never passes: wait() says stop after three tries; nothing written.
    size_t tries = 0;
    CHECK_FALSE(r.push(gp_entry(0x3000, 1), [] { return 1u; }, [&] { return ++tries < 3; }));
    CHECK(tries == 3);
    CHECK(ring[0] == gp_entry(0x1000, 1).raw());
}

}  // namespace gpfifo_test
