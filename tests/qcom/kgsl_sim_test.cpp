// The simulated KGSL device driven through drivers/qcom's KgslDevice (the ioctls a process makes):
// a good IB retires and writes memory; a bad packet header, an unknown opcode and a write to a
// protected register each invalidate the context, fail its waits with EDEADLK, and are named in
// the kernel log; waits have finite timeouts and can be made to fail with an errno.
#include "base/error.hpp"
#include "drivers/qcom/kgsl_device.hpp"
#include "drivers/qcom/pm4.hpp"
#include "drivers/qcom/qcom_device.hpp"
#include "drivers/sim/kgsl/sim_kgsl.hpp"
#include "hcq/program.hpp"
#include "tests/hcq/support.hpp"

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <sys/mman.h>
#include <vector>

using namespace baregpu;
using namespace baregpu::qcom;
using namespace std::chrono_literals;

namespace {

class Adapter final : public KgslSyscalls {
public:
    explicit Adapter(std::shared_ptr<sim::kgsl::SimKgsl> s) : sim(std::move(s)) {}
    int open(const char* path, int flags, int& err) override { return sim->open(path, flags, err); }
    int close(int fd) override { return sim->close(fd); }
    int ioctl(int fd, unsigned long request, void* arg, int& err) override { return sim->ioctl(fd, request, arg, err); }
    void* mmap(void* addr, uint64_t length, int prot, int flags, int fd, uint64_t offset, int& err) override {
        return sim->mmap(addr, length, prot, flags, fd, offset, err);
    }
    int munmap(void* addr, uint64_t length) override { return sim->munmap(addr, length); }
    std::string kernel_log(uint32_t context_id) override { return sim->kernel_log(context_id); }
    std::shared_ptr<sim::kgsl::SimKgsl> sim;
};

// A KGSL device on the model with one context and one 64 KiB GPU object (SVM) for IBs and data.
struct Rig {
    Rig() = default;
    explicit Rig(std::shared_ptr<sim::kgsl::SimKgsl> model) : sim(std::move(model)) {}
    std::shared_ptr<sim::kgsl::SimKgsl> sim = std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{});
    KgslDevice kgsl{std::make_shared<Adapter>(sim), "/dev/kgsl-3d0", "sim-kgsl-test"};
    uint32_t ctx = kgsl.drawctxt_create(0);
    void* at = ::mmap(nullptr, 1 << 16, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    uint32_t object = kgsl.gpuobj_alloc_at(at, 1 << 16, false);
    uint32_t* words = static_cast<uint32_t*>(at);
    ~Rig() {
        kgsl.drawctxt_destroy(ctx);
        kgsl.gpuobj_free(object, at, 1 << 16);
    }
    uint64_t va(size_t dword) const { return reinterpret_cast<uint64_t>(at) + 4 * dword; }
    // Submit dwords [0, n) as one IB; returns the timestamp.
    uint32_t submit(std::initializer_list<uint32_t> ib) {
        std::copy(ib.begin(), ib.end(), words);
        return kgsl.gpu_command(ctx, va(0), 4 * ib.size());
    }
    int wait(uint32_t ts, uint32_t ms = 2000) { return kgsl.wait_timestamp(ctx, ts, ms); }
};

}  // namespace

TEST_CASE("sim kgsl: device info, and a good IB retires and writes memory (CP_MEM_WRITE)") {
    Rig r;
    kgsl::kgsl_devinfo info = r.kgsl.device_info();
    CHECK(info.chip_id == 0x06030000u);
    CHECK(adreno_name(info.chip_id) == "a630");
    uint64_t dst = r.va(1024);
    uint32_t ts = r.submit({pm4::type7(pm4::CP_MEM_WRITE, 4), uint32_t(dst), uint32_t(dst >> 32), 0x11223344u, 0x55667788u});
    CHECK(r.wait(ts) == 0);
    CHECK(r.words[1024] == 0x11223344u);
    CHECK(r.words[1025] == 0x55667788u);
    uint32_t retired = 0;
    CHECK(r.kgsl.read_retired(r.ctx, retired) == 0);
    CHECK(retired == ts);
    CHECK(r.sim->faults() == 0);
}

TEST_CASE("sim kgsl: a flipped parity bit invalidates the context; waits fail with EDEADLK and the log names the header") {
    Rig r;
    uint64_t dst = r.va(1024);
    uint32_t bad = pm4::type7(pm4::CP_MEM_WRITE, 4) ^ (1u << 23);
    uint32_t ts = r.submit({bad, uint32_t(dst), uint32_t(dst >> 32), 1, 2});
    CHECK(r.wait(ts) == EDEADLK);
    CHECK(r.words[1024] == 0);  // nothing after the bad header ran
    CHECK_THAT(r.sim->kernel_log(r.ctx), Catch::Contains("opcode parity"));
    // Later submissions on the invalidated context are refused like KGSL refuses them.
    CHECK_THROWS_WITH(r.submit({pm4::type7(pm4::CP_NOP, 1), 0}), Catch::Contains("EDEADLK"));
}

TEST_CASE("sim kgsl: an unknown opcode faults the context") {
    Rig r;
    uint32_t ts = r.submit({pm4::type7(0x7e, 1), 0});
    CHECK(r.wait(ts) == EDEADLK);
    CHECK_THAT(r.sim->kernel_log(r.ctx), Catch::Contains("unknown opcode 0x7e"));
}

TEST_CASE("sim kgsl: a type-4 write to a protected register faults the context and the log names the register") {
    Rig r;
    uint32_t ts = r.submit({pm4::type4(0x0850, 1), 0xffffffffu});  // inside the CP_PROTECT_REG block
    CHECK(r.wait(ts) == EDEADLK);
    std::string log = r.sim->kernel_log(r.ctx);
    CHECK_THAT(log, Catch::Contains("protected register 0x00850"));
    CHECK(r.sim->faults() == 1);
}

TEST_CASE("sim kgsl: waits take finite timeouts: a hung context times out, and waits can fail with an errno") {
    Rig r;
    r.sim->hang_context(r.ctx, true);
    uint32_t ts = r.submit({pm4::type7(pm4::CP_NOP, 1), 0});
    auto t0 = std::chrono::steady_clock::now();
    CHECK(r.wait(ts, 50) == ETIMEDOUT);
    auto waited = std::chrono::steady_clock::now() - t0;
    CHECK(waited >= 50ms);
    CHECK(waited < 1s);
    r.sim->fail_waits(EIO);
    CHECK(r.wait(ts, 50) == EIO);
    r.sim->fail_waits(0);
    r.sim->hang_context(r.ctx, false);
    CHECK(r.wait(ts) == 0);
}

TEST_CASE("sim-qcom: a protected register write in the device's own context is a device error naming the register") {
    auto sim = std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{});
    QcomOptions o;
    o.name = "sim-qcom:a630";
    o.isa = KernelIsa::host;
    auto dev = QcomDevice::create(std::make_shared<Adapter>(sim), o);
    hcq::Buffer ib = dev->allocate(4096, {.host = true});
    const uint32_t words[2] = {pm4::type4(0x0850, 1), 0xffffffffu};
    std::memcpy(ib.cpu(), words, sizeof words);
    // A raw IB in the compute context, then HCQ work behind it.
    dev->kgsl().gpu_command(dev->compute_context(), ib.address().value(), sizeof words);
    hcq::Signal s = dev->new_signal(0, "after");
    std::string text;
    try {
        dev->compute_queue().signal(s, 1).submit();
        s.wait(1, 2s);
        FAIL("the faulted context completed work");
    } catch (const DeviceLostError& e) {
        text = e.what();
    }
    CHECK_THAT(text, Catch::Contains("protected register 0x00850"));
    CHECK_THAT(text, Catch::Contains("KGSL context " + std::to_string(dev->compute_context())));
    CHECK(dev->failed());
    CHECK_THROWS_AS(dev->synchronize(), DeviceLostError);
}

TEST_CASE("qcom with the Adreno ISA: programs need the vendor OpenCL format (UnsupportedError), and there is no copy queue") {
    auto sim = std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{});
    QcomOptions o;
    o.name = "qcom-adreno-on-model";
    o.isa = KernelIsa::adreno;
    auto dev = QcomDevice::create(std::make_shared<Adapter>(sim), o);
    CHECK(dev->arch() == "adreno");
    const std::byte junk[16] = {};
    CHECK_THROWS_AS(dev->load_program(junk, "k"), UnsupportedError);
    CHECK_THROWS_WITH(dev->load_program(junk, "k"), Catch::Contains("OpenCL"));
    CHECK_THROWS_AS(dev->copy_queue(), UnsupportedError);
    // Compute-queue synchronization still works on the model.
    hcq::Signal s = dev->new_signal(0, "s");
    dev->compute_queue().signal(s, 7).submit();
    s.wait(7, 2s);
    hcq::Signal t = dev->new_signal(0, "t");
    dev->compute_queue().timestamp(t).signal(t, 1).submit();
    t.wait(1, 2s);
    CHECK(t.timestamp() != 0);
}

TEST_CASE("sim kgsl: a chip other than Adreno 6xx / 7xx is refused at open") {
    auto sim = std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{0x05040000});
    QcomOptions o;
    o.name = "a540-model";
    o.isa = KernelIsa::host;
    CHECK_THROWS_WITH(QcomDevice::create(std::make_shared<Adapter>(sim), o), Catch::Contains("a540") && Catch::Contains("6xx and 7xx"));
}

TEST_CASE("sim kgsl a730: A6xx-style packets fault on the A7xx model; the A7xx forms run") {
    Rig r{std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{0x07030001})};
    uint64_t dst = r.va(1024);
    SECTION("A6XX CP_EVENT_WRITE(CACHE_FLUSH_TS) with a write: WRITE_ENABLED is clear on A7XX") {
        uint32_t ts = r.submit({pm4::type7(pm4::CP_EVENT_WRITE, 4), pm4::CACHE_FLUSH_TS, uint32_t(dst), uint32_t(dst >> 32), 7});
        CHECK(r.wait(ts) == EDEADLK);
        CHECK_THAT(r.sim->kernel_log(r.ctx), Catch::Contains("WRITE_ENABLED"));
        CHECK(r.words[1024] == 0);
    }
    SECTION("CP_EVENT_WRITE7(CACHE_FLUSH_TS, WRITE_ENABLED, EV_WRITE_USER_32B) writes its payload") {
        uint32_t ts = r.submit({pm4::type7(pm4::CP_EVENT_WRITE, 4), pm4::event_write7_0(pm4::CACHE_FLUSH_TS, true), uint32_t(dst),
                                uint32_t(dst >> 32), 7});
        CHECK(r.wait(ts) == 0);
        CHECK(r.words[1024] == 7);
    }
    SECTION("and the A7xx form is refused by the A630 model") {
        Rig a6;
        uint64_t d6 = a6.va(1024);
        uint32_t ts = a6.submit({pm4::type7(pm4::CP_EVENT_WRITE, 4), pm4::event_write7_0(pm4::CACHE_FLUSH_TS, true), uint32_t(d6),
                                 uint32_t(d6 >> 32), 7});
        CHECK(a6.wait(ts) == EDEADLK);
        CHECK_THAT(a6.sim->kernel_log(a6.ctx), Catch::Contains("A6XX does not define"));
    }
}

TEST_CASE("sim-qcom: a correct driver run (exec, copies, waits, timestamps, barriers, bound queue) leaves the model without faults") {
    for (uint32_t chip : {0x06030000u, 0x07030001u}) {
        auto sim = std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{chip});
        QcomOptions o;
        o.name = adreno_name(chip);
        o.isa = KernelIsa::host;
        auto dev = QcomDevice::create(std::make_shared<Adapter>(sim), o);
        INFO(dev->chip());
        auto fill = test::load_kernel(*dev, "fill", "fill");
        hcq::Buffer a = dev->allocate(4096), b = dev->allocate(4096);
        hcq::Signal t = dev->new_signal(0, "t");
        uint64_t v = dev->next_timeline();
        dev->compute_queue()
            .wait(dev->timeline(), v - 1)
            .memory_barrier()
            .timestamp(t)
            .exec(*fill, hcq::KernelArgs(*fill, {a}, {1024, 0x5a5a}), {16}, {64})
            .signal(dev->timeline(), v)
            .submit();
        uint64_t w = dev->next_timeline();
        auto bound = dev->copy_queue();
        bound.wait(dev->timeline(), v).copy(b, a, 4096).timestamp(t).signal(dev->timeline(), w);
        bound.bind();
        bound.submit();
        dev->synchronize(5s);
        std::vector<uint32_t> got(1024);
        dev->copy_out(std::as_writable_bytes(std::span(got)), b);
        for (uint32_t x : got) REQUIRE(x == 0x5a5a);
        CHECK(t.timestamp() != 0);
        CHECK(sim->faults() == 0);
        for (uint32_t ctx : sim->contexts()) CHECK(sim->kernel_log(ctx).empty());
    }
}
