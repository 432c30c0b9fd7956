// The simulated AD102's compute class: QMD V03 launches built with drivers/nv/qmd, running the
// tests/hcq `fill` host-code kernel through the PBDMA, with QMD release semaphores and a dependent
// QMD. Negative: a QMD that is not V03, a kernel buffer that is not mapped.
#include "channel_rig.hpp"
#include "drivers/hostcode/host_program.h"
#include "drivers/nv/compute_methods.hpp"
#include "drivers/nv/cubin.hpp"
#include "drivers/nv/qmd.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <string_view>
#include <thread>

namespace baregpu::nv_test_kernels {
std::span<const std::byte> find_object(std::string_view name);
}

namespace compute_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::test;

namespace {
// clc6c0.h: SEND_PCAS_A 0x02b4 (QMD address >> 8), SEND_SIGNALING_PCAS2_B 0x02c0 (PCAS_ACTION 2 = SCHEDULE).
constexpr uint32_t SEND_PCAS_A = 0x02b4, SEND_SIGNALING_PCAS2_B = 0x02c0, PCAS_ACTION_SCHEDULE = 2;
constexpr unsigned kSubchCompute = 1;

struct ComputeRig : Rig {
    uint64_t image_va = 0, program_va = 0;
    explicit ComputeRig(const char* object = "nv_fill.o", const char* kernel = "fill", uint32_t kernarg_size = 16,
                        uint32_t host_class = 0)
        : Rig(16, MmuVersion::v2, host_class) {
        auto image = nv_test_kernels::find_object(object);
        REQUIRE(!image.empty());
        image_va = map(image.size(), true);
        std::memcpy(host(image_va), image.data(), image.size());
        program_va = map(4096, true);
        baregpu_host_program prog{};
        prog.magic = BAREGPU_HOST_PROGRAM_MAGIC;
        prog.version = BAREGPU_HOST_PROGRAM_VERSION;
        prog.image_va = image_va;
        prog.image_size = image.size();
        prog.image_hash = baregpu_host_program_hash(image.data(), image.size());
        std::strncpy(prog.kernel, kernel, sizeof prog.kernel - 1);
        prog.kernarg_size = kernarg_size;  // fill: 1 buffer, 2 values
        std::memcpy(host(program_va), &prog, sizeof prog);
    }
    // A fill(dst, n, value) QMD at qmd_va with its kernargs at cb_va.
    Qmd fill_qmd(uint64_t cb_va, uint64_t dst, uint32_t n, uint32_t value, uint32_t block = 64,
                 QmdVersion version = QmdVersion::v03_00) {
        struct {
            uint64_t dst;
            uint32_t n, value;
        } args{dst, n, value};
        std::memcpy(host(cb_va), &args, sizeof args);
        Qmd q(version);
        q.set_grid((n + block - 1) / block, 1, 1);
        q.set_block(block, 1, 1);
        q.set_program_address(program_va);
        q.set_constant_buffer(0, cb_va, 16);
        q.invalidate_caches();
        return q;
    }
    void put_qmd(uint64_t va, const Qmd& q) { std::memcpy(host(va), q.words().data(), q.size_bytes()); }
    // Hand-written methods (clc6c0.h), independent of drivers/nv's compute_methods.
    // windows: SET_SHADER_SHARED_MEMORY_WINDOW_A/B (0x02a0) and SET_SHADER_LOCAL_MEMORY_WINDOW_A/B (0x07b0) after the
    // SET_OBJECT (clc7c0.h), as a cubin's launch needs.
    PushBuffer& launch(PushBuffer& pb, uint64_t qmd_va, uint32_t cls = 0xc9c0, bool windows = false) {
        pb.incr(kSubchCompute, 0x0000, {cls});  // SET_OBJECT ADA_COMPUTE_A (or the class given)
        if (windows) pb.incr(kSubchCompute, 0x02a0, {0u, 0xfe000000u}).incr(kSubchCompute, 0x07b0, {0u, 0xff000000u});
        return pb.incr(kSubchCompute, SEND_PCAS_A, {static_cast<uint32_t>(qmd_va >> 8)})
            .incr(kSubchCompute, SEND_SIGNALING_PCAS2_B, {PCAS_ACTION_SCHEDULE});
    }
};
}  // namespace

TEST_CASE("a QMD V03 launches a host-code kernel that writes a buffer, then releases its semaphores", "[nv][sim][compute]") {
    ComputeRig rig;
    const uint32_t n = 1000;
    uint64_t dst = rig.map(4096, true), cb = rig.map(4096), qmd_va = rig.map(4096), sems = rig.map(4096);
    Qmd q = rig.fill_qmd(cb, dst, n, 0xabcd1234);
    q.set_release_semaphore(0, sems, 5);                                      // four words: payload, timestamp
    q.set_release_semaphore(1, sems + 32, 6, false, SemaphoreSize::one_word);  // 32-bit payload only
    rig.put_qmd(qmd_va, q);
    rig.port.spend_ns(777);
    auto mem = buffer(64);
    PushBuffer pb(mem);
    rig.launch(pb, qmd_va).sem_release(sems + 64, 7, false);
    REQUIRE(rig.submit(pb));
    REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
    auto f = rig.engines.fault(kToken);
    if (f) FAIL(f->what);
    CHECK(rig.engines.kernels_launched(kToken) == 1);
    std::vector<uint32_t> out(n + 1);
    std::memcpy(out.data(), rig.host(dst), (n + 1) * 4);
    for (uint32_t i = 0; i < n; ++i)
        if (out[i] != 0xabcd1234) FAIL("dst[" << i << "] = " << out[i]);
    CHECK(out[n] == 0);
    CHECK(rig.read64(sems) == 5);
    CHECK(rig.read64(sems + 8) >= 777);  // timestamp
    CHECK(rig.read64(sems + 32) == 6);
    CHECK(rig.read64(sems + 64) == 7);
}

TEST_CASE("drivers/nv compute_launch runs a QMD on the model", "[nv][sim][compute]") {
    ComputeRig rig;
    uint64_t dst = rig.map(4096, true), cb = rig.map(4096), qmd_va = rig.map(4096);
    rig.put_qmd(qmd_va, rig.fill_qmd(cb, dst, 256, 3, 32));
    auto mem = buffer(64);
    PushBuffer pb(mem);
    compute_set_object(pb, 2);
    compute_launch(pb, 2, qmd_va);
    REQUIRE(rig.submit(pb));
    REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
    auto f = rig.engines.fault(kToken);
    if (f) FAIL(f->what);
    uint32_t last;
    std::memcpy(&last, rig.host(dst + 255 * 4), 4);
    CHECK(last == 3);
}

TEST_CASE("a dependent QMD runs after its parent", "[nv][sim][compute]") {
    ComputeRig rig;
    uint64_t a = rig.map(4096, true), b = rig.map(4096, true), cbs = rig.map(4096), qmds = rig.map(4096),
             sems = rig.map(4096);
    Qmd second = rig.fill_qmd(cbs + 256, b, 100, 2);
    second.set_release_semaphore(0, sems, 22);
    rig.put_qmd(qmds + 256, second);
    Qmd first = rig.fill_qmd(cbs, a, 100, 1);
    first.set_dependent_qmd0(qmds + 256);
    rig.put_qmd(qmds, first);
    auto mem = buffer(64);
    PushBuffer pb(mem);
    rig.launch(pb, qmds);
    REQUIRE(rig.submit(pb));
    REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
    auto f = rig.engines.fault(kToken);
    if (f) FAIL(f->what);
    CHECK(rig.engines.kernels_launched(kToken) == 2);
    uint32_t va, vb;
    std::memcpy(&va, rig.host(a + 99 * 4), 4);
    std::memcpy(&vb, rig.host(b + 99 * 4), 4);
    CHECK(va == 1);
    CHECK(vb == 2);
    CHECK(rig.read64(sems) == 22);
}

TEST_CASE("compute launch faults: wrong QMD version, unmapped kernel buffer", "[nv][sim][compute]") {
    SECTION("a V04 QMD on an Ada compute class") {
        ComputeRig rig;
        uint64_t qmd_va = rig.map(4096);
        Qmd q(QmdVersion::v04_00);
        std::memcpy(rig.host(qmd_va), q.words().data(), 256);
        auto mem = buffer(64);
        PushBuffer pb(mem);
        rig.launch(pb, qmd_va);
        REQUIRE(rig.submit(pb));
        REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
        auto f = rig.engines.fault(kToken);
        REQUIRE(f);
        CHECK(f->kind == nvsim::EngineFault::Kind::bad_launch);
        CHECK(f->address == qmd_va);
        CHECK(f->what.find("V03_00") != std::string::npos);
        CHECK(rig.engines.kernels_launched(kToken) == 0);
    }
    SECTION("a kernel buffer that is not mapped") {
        ComputeRig rig;
        uint64_t cb = rig.map(4096), qmd_va = rig.map(4096), sems = rig.map(4096);
        const uint64_t unmapped = 0x6600000000;
        Qmd q = rig.fill_qmd(cb, unmapped, 10, 1);
        q.set_release_semaphore(0, sems, 5);
        rig.put_qmd(qmd_va, q);
        auto mem = buffer(64);
        PushBuffer pb(mem);
        rig.launch(pb, qmd_va);
        REQUIRE(rig.submit(pb));
        REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
        auto f = rig.engines.fault(kToken);
        REQUIRE(f);
        CHECK(f->kind == nvsim::EngineFault::Kind::mmu);
        CHECK(f->address == unmapped);
        CHECK(f->what.find("kernel buffer 0") != std::string::npos);
        CHECK(rig.read64(sems) == 0);  // no release for a grid that did not run
    }
}

TEST_CASE("while a kernel runs, queries keep their timeouts and the doorbell does not wait", "[nv][sim][compute]") {
    ComputeRig rig("nv_wait_flag.o", "wait_flag", 8);
    uint64_t state = rig.map(4096, true), cb = rig.map(4096), qmd_va = rig.map(4096), sems = rig.map(4096);
    std::memcpy(rig.host(cb), &state, 8);
    Qmd q(QmdVersion::v03_00);
    q.set_grid(1, 1, 1);
    q.set_block(1, 1, 1);
    q.set_program_address(rig.program_va);
    q.set_constant_buffer(0, cb, 16);
    q.set_release_semaphore(0, sems, 1);
    rig.put_qmd(qmd_va, q);
    auto mem = buffer(64);
    PushBuffer pb(mem);
    rig.launch(pb, qmd_va);
    REQUIRE(rig.submit(pb));
    auto* flags = reinterpret_cast<volatile uint32_t*>(rig.host(state));
    auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (flags[1] == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    REQUIRE(flags[1] == 1);  // the kernel is running now
    auto before = std::chrono::steady_clock::now();
    CHECK_FALSE(rig.engines.wait_idle(kToken, 20ms));  // returns at its timeout, not when the kernel ends
    CHECK(rig.engines.status(kToken) == nvsim::ChannelStatus::running);
    CHECK(rig.engines.doorbell(kToken));
    CHECK(std::chrono::steady_clock::now() - before < 5s);
    CHECK(rig.read64(sems) == 0);
    flags[0] = 1;
    REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
    CHECK(flags[2] == 2);
    CHECK(rig.read64(sems) == 1);
    CHECK_FALSE(rig.engines.fault(kToken));
}

TEST_CASE("HOPPER_COMPUTE_A reads QMD V04_00 (384 bytes, constant buffer address >> 6) and refuses V03", "[nv][sim][compute]") {
    // clcbc0qmd.h NVCBC0_QMDV04_00_*; Mesa NVK (nak qmd.rs) uses V04 from HOPPER_COMPUTE_A on.
    constexpr uint32_t kHopperCompute = 0xcbc0, kHopperHost = 0xc86f;
    SECTION("V04: the kernel runs and the release semaphore lands") {
        ComputeRig rig("nv_fill.o", "fill", 16, kHopperHost);
        uint64_t cb = rig.map(4096), qmd_va = rig.map(4096), sems = rig.map(4096), dst = rig.map(4096);
        Qmd q = rig.fill_qmd(cb, dst, 100, 0x5eed, 64, QmdVersion::v04_00);
        q.set_release_semaphore(0, sems, 9);
        REQUIRE(q.size_bytes() == 384);
        rig.put_qmd(qmd_va, q);
        auto mem = buffer(64);
        PushBuffer pb(mem, HostClass::hopper_c86f);
        rig.launch(pb, qmd_va, kHopperCompute);
        REQUIRE(rig.submit(pb));
        REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
        REQUIRE_FALSE(rig.engines.fault(kToken));
        uint32_t first = 0, last = 0;
        std::memcpy(&first, rig.host(dst), 4);
        std::memcpy(&last, rig.host(dst) + 99 * 4, 4);
        CHECK(first == 0x5eed);
        CHECK(last == 0x5eed);
        CHECK(rig.read64(sems) == 9);
    }
    SECTION("V03 on the Hopper class is refused") {
        ComputeRig rig("nv_fill.o", "fill", 16, kHopperHost);
        uint64_t cb = rig.map(4096), qmd_va = rig.map(4096), dst = rig.map(4096);
        rig.put_qmd(qmd_va, rig.fill_qmd(cb, dst, 10, 1));
        auto mem = buffer(64);
        PushBuffer pb(mem, HostClass::hopper_c86f);
        rig.launch(pb, qmd_va, kHopperCompute);
        REQUIRE(rig.submit(pb));
        REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
        auto f = rig.engines.fault(kToken);
        REQUIRE(f);
        CHECK(f->kind == nvsim::EngineFault::Kind::bad_launch);
        CHECK(f->what.find("V04_00") != std::string::npos);
    }
    SECTION("a Hopper channel binds no Ada compute class") {
        ComputeRig rig("nv_fill.o", "fill", 16, kHopperHost);
        auto mem = buffer(64);
        PushBuffer pb(mem, HostClass::hopper_c86f);
        pb.incr(kSubchCompute, 0x0000, {0xc9c0});
        REQUIRE(rig.submit(pb));
        REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
        auto f = rig.engines.fault(kToken);
        REQUIRE(f);
        CHECK(f->kind == nvsim::EngineFault::Kind::bad_class);
    }
}

TEST_CASE("a cubin's kernel at PROGRAM_ADDRESS: the model checks the launch against the cubin it was given", "[nv][sim][compute]") {
    // tests/nv/data/axpy_fill_sm90.cubin (nvcc 13.0, sm_90): axpy uses 18 registers, one barrier, 0x500 bytes of shared
    // memory, its 24 bytes of parameters at +0x210 of bank 0.
    std::ifstream file(std::string(BAREGPU_TEST_DATA_DIR) + "/axpy_fill_sm90.cubin", std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    std::vector<std::byte> elf(raw.size());
    std::memcpy(elf.data(), raw.data(), raw.size());
    const Cubin cubin = Cubin::parse(elf);
    const CubinKernel& k = cubin.kernel("axpy");
    CHECK(k.registers == 18);
    CHECK(k.barriers == 1);
    CHECK(k.shared_bytes == 0x500);
    CHECK(k.param_offset == 0x210);
    CHECK(k.param_size == 24);
    constexpr uint32_t kHopperCompute = 0xcbc0, kHopperHost = 0xc86f;
    struct Case {
        const char* what;
        uint32_t registers, barriers, shared, cb_bytes;
        uint32_t cls;
        const char* refusal;  // nullptr: accepted
        bool windows = true;
    };
    for (const Case& t : {Case{"as .nv.info says", 18, 1, 0x500, 0x230, kHopperCompute, nullptr},
                          Case{"REGISTER_COUNT 0", 0, 1, 0x500, 0x230, kHopperCompute, "REGISTER_COUNT"},
                          Case{"no barrier", 18, 0, 0x500, 0x230, kHopperCompute, "BARRIER_COUNT"},
                          Case{"too little shared memory", 18, 1, 0x400, 0x230, kHopperCompute, "SHARED_MEMORY_SIZE"},
                          Case{"parameters outside bank 0", 18, 1, 0x500, 0x100, kHopperCompute, "EIATTR_PARAM_CBANK"},
                          Case{"memory windows never set", 18, 1, 0x500, 0x230, kHopperCompute, "WINDOW", false}}) {
        INFO(t.what);
        ComputeRig rig("nv_fill.o", "fill", 16, kHopperHost);
        rig.engines.add_cubin(elf);
        const uint64_t image = rig.map(cubin.image_size(), true), cb = rig.map(4096), qmd_va = rig.map(4096);
        const std::vector<std::byte> linked = cubin.link(image);
        std::memcpy(rig.host(image), linked.data(), linked.size());
        Qmd q(QmdVersion::v04_00);
        q.set_grid(1, 1, 1);
        q.set_block(64, 1, 1);
        q.set_program_address(image + k.text_offset);
        q.set_constant_buffer(0, cb, t.cb_bytes);
        q.set_register_count(t.registers);
        q.set_barrier_count(t.barriers);
        q.set_shared_memory_size(t.shared);
        rig.put_qmd(qmd_va, q);
        auto mem = buffer(64);
        PushBuffer pb(mem, HostClass::hopper_c86f);
        rig.launch(pb, qmd_va, t.cls, t.windows);
        REQUIRE(rig.submit(pb));
        REQUIRE(rig.engines.wait_idle(kToken, kTimeout));
        auto f = rig.engines.fault(kToken);
        if (t.refusal == nullptr) {
            CHECK_FALSE(f);
            CHECK(rig.engines.cubin_launches() == 1);
        } else {
            REQUIRE(f);
            CHECK(f->kind == nvsim::EngineFault::Kind::bad_launch);
            CHECK(f->what.find(t.refusal) != std::string::npos);
        }
    }
}

}  // namespace compute_test
