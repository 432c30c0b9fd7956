// The simulated AD102's PBDMA and copy engine executing GPFIFO channels built with drivers/nv
// (GpFifoRing, PushBuffer, page tables). Memory is mapped by drivers/nv's PageTable and
// reached by the engines only through the sim MMU.
#include "channel_rig.hpp"
#include "drivers/nv/ce_methods.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

namespace pbdma_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::test;

namespace {
// clc7b5.h method offsets and LAUNCH_DMA fields, re-typed for the test.
constexpr uint32_t CE_SET_SEMAPHORE_A = 0x240, CE_LAUNCH_DMA = 0x300, CE_OFFSET_IN_UPPER = 0x400,
                   CE_LINE_LENGTH_IN = 0x418;
constexpr uint32_t LAUNCH_NON_PIPELINED = 2u << 0, LAUNCH_FLUSH = 1u << 2, LAUNCH_SEM_ONE_WORD = 1u << 3,
                   LAUNCH_SRC_PITCH = 1u << 7, LAUNCH_DST_PITCH = 1u << 8, LAUNCH_BLOCKLINEAR_SRC = 0;

}  // namespace

TEST_CASE("PBDMA executes a semaphore release with timestamp and advances GPGet", "[nv][sim][pbdma]") {
    auto version = GENERATE(MmuVersion::v2, MmuVersion::v3);
    Rig rig(16, version);
    uint64_t sem = rig.map(4096);
    rig.port.spend_ns(12345);
    auto mem = buffer(64);
    PushBuffer pb(mem);
    pb.sem_release(sem, 0x1122334455667788ull).non_stall_interrupt();
    REQUIRE(rig.submit(pb));
    REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
    CHECK_FALSE(rig.engines.fault(kToken));
    CHECK(rig.read64(sem) == 0x1122334455667788ull);
    CHECK(rig.read64(sem + 8) == 12345);  // RELEASE_TIMESTAMP: the GPU time at +8
    CHECK(rig.userd_gp_get() == 1);
    CHECK(rig.engines.gp_get(kToken) == 1);
    CHECK(rig.engines.nonstall_interrupts(kToken) == 1);
}

TEST_CASE("PBDMA semaphore acquire blocks until the host releases it", "[nv][sim][pbdma]") {
    Rig rig;
    uint64_t sems = rig.map(4096);
    uint64_t wait_sem = sems, done_sem = sems + 64;
    auto mem = buffer(64);
    PushBuffer pb(mem);
    pb.sem_acquire_geq(wait_sem, 5).sem_release(done_sem, 9, false);
    REQUIRE(rig.submit(pb));
    REQUIRE(rig.engines.wait_status(kToken, nvsim::ChannelStatus::acquire_pending, kTimeout));
    CHECK(rig.read64(done_sem) == 0);
    CHECK(rig.userd_gp_get() == 0);  // the entry has not executed
    rig.write64(wait_sem, 4);        // not yet >= 5
    CHECK_FALSE(rig.engines.wait_idle(kToken, 50ms));
    CHECK(rig.read64(done_sem) == 0);
    rig.write64(wait_sem, 5);  // the host releases it; no doorbell: the PBDMA re-polls
    REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
    CHECK(rig.read64(done_sem) == 9);
    CHECK(rig.userd_gp_get() == 1);
    CHECK_FALSE(rig.engines.fault(kToken));
}

TEST_CASE("copy engine copies more than 1 MiB across 2 MiB pages and releases its semaphore", "[nv][sim][ce]") {
    auto version = GENERATE(MmuVersion::v2, MmuVersion::v3);
    Rig rig(16, version);
    uint64_t src = rig.map(6 * MiB), dst = rig.map(6 * MiB), sem = rig.map(4096);
    CHECK(rig.pt.lookup(GpuVirtualAddress(src))->page_size == 2 * MiB);
    const uint64_t src_off = 0x1f0000, dst_off = 0x3000, length = 3 * MiB + 0x1230;
    for (uint64_t i = 0; i < length; i += 4) {
        uint32_t v = static_cast<uint32_t>(i * 2654435761u);
        std::memcpy(rig.host(src + src_off + i), &v, 4);
    }
    auto mem = buffer(64);
    PushBuffer pb(mem);
    uint64_t in = src + src_off, out = dst + dst_off;
    pb.incr(4, 0x0000, {0xc7b5})  // SET_OBJECT AMPERE_DMA_COPY_B
        .incr(4, CE_OFFSET_IN_UPPER, {static_cast<uint32_t>(in >> 32), static_cast<uint32_t>(in),
                                      static_cast<uint32_t>(out >> 32), static_cast<uint32_t>(out)})
        .incr(4, CE_LINE_LENGTH_IN, {static_cast<uint32_t>(length)})
        .incr(4, CE_SET_SEMAPHORE_A, {static_cast<uint32_t>(sem >> 32), static_cast<uint32_t>(sem), 77u})
        .incr(4, CE_LAUNCH_DMA, {LAUNCH_NON_PIPELINED | LAUNCH_FLUSH | LAUNCH_SEM_ONE_WORD | LAUNCH_SRC_PITCH |
                                 LAUNCH_DST_PITCH});
    REQUIRE(rig.submit(pb));
    REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
    auto f = rig.engines.fault(kToken);
    REQUIRE_FALSE(f);
    for (uint64_t i = 0; i < length; i += 4) {
        uint32_t v;
        std::memcpy(&v, rig.host(dst + dst_off + i), 4);
        if (v != static_cast<uint32_t>(i * 2654435761u)) FAIL("copy differs at byte " << i);
    }
    uint32_t after;
    std::memcpy(&after, rig.host(dst + dst_off + length), 4);
    CHECK(after == 0);  // nothing past LINE_LENGTH_IN
    CHECK(rig.read64(sem) == 77);
}

TEST_CASE("copy engine refuses what it does not model", "[nv][sim][ce]") {
    Rig rig;
    auto mem = buffer(64);
    PushBuffer pb(mem);
    pb.incr(2, 0x0000, {0xc7b5}).incr(2, CE_LAUNCH_DMA, {LAUNCH_NON_PIPELINED | LAUNCH_BLOCKLINEAR_SRC | LAUNCH_DST_PITCH});
    REQUIRE(rig.submit(pb));
    REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
    auto f = rig.engines.fault(kToken);
    REQUIRE(f);
    CHECK(f->kind == nvsim::EngineFault::Kind::bad_method);
    CHECK(f->method == CE_LAUNCH_DMA);
    CHECK(f->what.find("BLOCKLINEAR") != std::string::npos);
}

TEST_CASE("GpFifoRing never overwrites an entry the PBDMA has not executed", "[nv][sim][pbdma]") {
    Rig rig(4);  // at most 3 entries outstanding
    uint64_t sems = rig.map(4096);
    auto mem = buffer(64);
    PushBuffer block(mem);
    block.sem_acquire_geq(sems, 1);
    REQUIRE(rig.submit(block));
    REQUIRE(rig.engines.wait_status(kToken, nvsim::ChannelStatus::acquire_pending, kTimeout));
    for (uint64_t i = 1; i <= 2; ++i) {
        PushBuffer pb(mem);
        pb.sem_release(sems + 8 * (i + 1), i, false);
        REQUIRE(rig.submit(pb));
    }
    // GPGet (USERD) is still 0: the ring is full and the fourth entry is refused.
    CHECK(rig.userd_gp_get() == 0);
    PushBuffer last(mem);
    last.sem_release(sems + 64, 99, false);
    CHECK_FALSE(rig.submit(last));
    rig.write64(sems, 1);
    // push() rereads GPGet from USERD and waits (bounded) until the PBDMA frees a slot.
    REQUIRE(rig.submit(last, /*wait_for_space=*/true));
    REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
    CHECK(rig.read64(sems + 16) == 1);
    CHECK(rig.read64(sems + 24) == 2);
    CHECK(rig.read64(sems + 64) == 99);
    CHECK(rig.ring.put() == 0);
    CHECK(rig.userd_gp_get() == 0);  // 4 entries executed on a 4-entry ring
    CHECK(rig.engines.gp_get(kToken) == 0);
}

TEST_CASE("a bad host method stops the channel with a fault naming the method and channel", "[nv][sim][pbdma]") {
    Rig rig;
    uint64_t sem = rig.map(4096);
    auto mem = buffer(64);
    PushBuffer pb(mem);
    pb.incr(0, 0x0044, {0xdead}).sem_release(sem, 1, false);
    REQUIRE(rig.submit(pb));
    REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
    auto f = rig.engines.fault(kToken);
    REQUIRE(f);
    CHECK(f->kind == nvsim::EngineFault::Kind::bad_method);
    CHECK(f->method == 0x44);
    CHECK(f->data == 0xdead);
    CHECK(f->token == kToken);
    CHECK(f->what.find("channel 7") != std::string::npos);
    CHECK(f->what.find("0x0044") != std::string::npos);
    CHECK(rig.engines.status(kToken) == nvsim::ChannelStatus::faulted);
    CHECK(rig.read64(sem) == 0);        // nothing after the bad method ran
    CHECK(rig.userd_gp_get() == 0);     // GPGet did not pass the entry
}

TEST_CASE("bad classes, headers and unbound subchannels fault", "[nv][sim][pbdma]") {
    SECTION("unknown class") {
        Rig rig;
        auto mem = buffer(16);
        PushBuffer pb(mem);
        pb.incr(1, 0x0000, {0xc5c0});  // TURING_COMPUTE_A: not this chip's
        REQUIRE(rig.submit(pb));
        REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
        auto f = rig.engines.fault(kToken);
        REQUIRE(f);
        CHECK(f->kind == nvsim::EngineFault::Kind::bad_class);
        CHECK(f->data == 0xc5c0);
    }
    SECTION("method on a subchannel without an object") {
        Rig rig;
        auto mem = buffer(16);
        PushBuffer pb(mem);
        pb.incr(3, 0x0300, {0});
        REQUIRE(rig.submit(pb));
        REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
        auto f = rig.engines.fault(kToken);
        REQUIRE(f);
        CHECK(f->subchannel == 3);
        CHECK(f->method == 0x300);
    }
    SECTION("SEC_OP 0") {
        Rig rig;
        std::vector<uint32_t> words{0x00000000u};
        std::memcpy(rig.host(rig.pb_va), words.data(), 4);
        REQUIRE(rig.ring.try_push(gp_entry(rig.pb_va, 1), 0));
        uint32_t put = rig.ring.put();
        std::memcpy(rig.host(rig.userd_va + 0x8c), &put, 4);
        rig.engines.doorbell(kToken);
        REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
        auto f = rig.engines.fault(kToken);
        REQUIRE(f);
        CHECK(f->what.find("SEC_OP 0") != std::string::npos);
    }
}

TEST_CASE("an MMU fault stops the channel with the faulting VA", "[nv][sim][pbdma]") {
    Rig rig;
    const uint64_t unmapped = 0x7700001000;
    auto mem = buffer(64);
    PushBuffer pb(mem);
    pb.sem_release(unmapped, 1, false);
    REQUIRE(rig.submit(pb));
    REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
    auto f = rig.engines.fault(kToken);
    REQUIRE(f);
    CHECK(f->kind == nvsim::EngineFault::Kind::mmu);
    CHECK(f->address == unmapped);
    CHECK(f->what.find("write of VA 0x7700001000") != std::string::npos);
    CHECK(f->what.find("semaphore release") != std::string::npos);
    CHECK_FALSE(rig.engines.doorbell(99));  // an unknown token does nothing
}

TEST_CASE("drivers/nv ce_copy from system memory, pushbuffer in system memory, four-word release", "[nv][sim][ce]") {
    Rig rig;
    // The first 1 MiB of the bus's host memory at a system-coherent VA (as a driver maps host buffers).
    const uint64_t sys_va = 0x3000000000;
    rig.pt.map(GpuVirtualAddress(sys_va), rig.port.sys_base(), 1 << 20, {Aperture::sys_coherent, true, false, 0});
    uint64_t dst = rig.map(2 * MiB), sem = rig.map(4096);
    auto sys = rig.port.sys();
    for (size_t i = 0; i < 0x40000; ++i) sys[0x80000 + i] = std::byte(i * 13 + 1);
    rig.port.spend_ns(5000);
    std::vector<uint32_t> mem(64);
    PushBuffer pb(mem);
    ce_set_object(pb, 4);
    ce_copy(pb, 4, sys_va + 0x80000, dst + 0x100, 0x40000, CeRelease{sem, 0x123456789a, true, true, true});
    // The pushbuffer lives in system memory too: the PBDMA fetches it through the MMU's SYS aperture.
    std::memcpy(sys.data(), pb.dwords().data(), pb.size_dwords() * 4);
    REQUIRE(rig.ring.try_push(gp_entry(sys_va, static_cast<uint32_t>(pb.size_dwords())), rig.userd_gp_get()));
    uint32_t put = rig.ring.put();
    std::memcpy(rig.host(rig.userd_va + 0x8c), &put, 4);
    REQUIRE(rig.engines.doorbell(kToken));
    REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
    auto f = rig.engines.fault(kToken);
    if (f) FAIL(f->what);
    CHECK(std::memcmp(rig.host(dst + 0x100), sys.data() + 0x80000, 0x40000) == 0);
    CHECK(rig.read64(sem) == 0x123456789a);
    CHECK(rig.read64(sem + 8) >= 5000);  // timestamp
    CHECK(rig.engines.nonstall_interrupts(kToken) == 1);
}

TEST_CASE("PBDMA decodes non-incrementing, increment-once and immediate headers, and runs across segments", "[nv][sim][pbdma]") {
    Rig rig;
    uint64_t sems = rig.map(4096);
    // clc56f.h: SEM_ADDR_LO 0x5c, SEM_ADDR_HI 0x60, SEM_PAYLOAD_LO 0x64, SEM_PAYLOAD_HI 0x68, SEM_EXECUTE 0x6c;
    // SEM_EXECUTE = 1 is RELEASE with a 32-bit payload (fits the 13-bit immediate).
    const uint32_t lo = static_cast<uint32_t>(sems), hi = static_cast<uint32_t>(sems >> 32);
    std::vector<uint32_t> words{
        method_one_incr(0, 0x5c, 3), lo, 0xdead, hi,        // ADDR_LO = lo, then ADDR_HI twice (last wins)
        method_nonincr(0, 0x64, 3), 1, 2, 0x2222,           // PAYLOAD_LO three times: 0x2222
        method_immediate(0, 0x6c, 1),                       // SEM_EXECUTE RELEASE (32-bit)
        // An incrementing run of five (ADDR_LO .. EXECUTE) whose data continues in the next GP entry.
        method_incr(0, 0x5c, 5), lo + 8, hi,
    };
    std::vector<uint32_t> second{0x3333, 0, 1};
    std::memcpy(rig.host(rig.pb_va), words.data(), words.size() * 4);
    std::memcpy(rig.host(rig.pb_va + 0x1000), second.data(), second.size() * 4);
    REQUIRE(rig.ring.try_push(gp_entry(rig.pb_va, static_cast<uint32_t>(words.size())), 0));
    REQUIRE(rig.ring.try_push(gp_entry(rig.pb_va + 0x1000, static_cast<uint32_t>(second.size())), 0));
    uint32_t put = rig.ring.put();
    std::memcpy(rig.host(rig.userd_va + 0x8c), &put, 4);
    REQUIRE(rig.engines.doorbell(kToken));
    REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
    auto f = rig.engines.fault(kToken);
    if (f) FAIL(f->what);
    CHECK(rig.read64(sems) == 0x2222);
    CHECK(rig.read64(sems + 8) == 0x3333);
    CHECK(rig.userd_gp_get() == 2);
}

TEST_CASE("HOPPER_CHANNEL_GPFIFO_A waits with ACQ_CIRC_GEQ; ACQ_STRICT_GEQ is not one of its operations", "[nv][sim][pbdma]") {
    // clc86f.h SEM_EXECUTE_OPERATION: ACQUIRE 0, RELEASE 1, ACQ_CIRC_GEQ 3 (uvm_hopper_host.c waits with CIRC_GEQ).
    for (SemOperation op : {SemOperation::acq_circ_geq, SemOperation::acq_strict_geq}) {
        Rig rig(16, MmuVersion::v2, 0xc86f);
        uint64_t sem = rig.map(4096), out = rig.map(4096);
        rig.write64(sem, 5);
        auto mem = buffer(64);
        PushBuffer pb(mem, HostClass::hopper_c86f);
        pb.semaphore(sem, 5, SemExecute{.operation = op, .payload_64bit = true}).sem_release(out, 1, false);
        REQUIRE(rig.submit(pb));
        REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
        auto f = rig.engines.fault(kToken);
        if (op == SemOperation::acq_circ_geq) {
            CHECK_FALSE(f);
            CHECK(rig.read64(out) == 1);
        } else {
            REQUIRE(f);
            CHECK(f->kind == nvsim::EngineFault::Kind::bad_method);
            CHECK(f->what.find("clc86f.h") != std::string::npos);
            CHECK(rig.read64(out) == 0);
        }
    }
}

}  // namespace pbdma_test
