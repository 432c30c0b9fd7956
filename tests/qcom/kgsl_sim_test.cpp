// The simulated KGSL device driven through drivers/qcom's KgslDevice (the ioctls a process makes):
// a good IB retires and writes memory; a bad packet header, an unknown opcode and a write to a
// protected register each invalidate the context, fail its waits with EDEADLK, and are named in
// the kernel log; waits have finite timeouts and can be made to fail with an errno.
#include "base/error.hpp"
#include "drivers/qcom/kgsl_device.hpp"
#include "drivers/qcom/pm4.hpp"
#include "drivers/qcom/qcom_device.hpp"
#include "drivers/sim/kgsl/sim_kgsl.hpp"
#include "hcq/command_buffer.hpp"
#include "hcq/program.hpp"
#include "tests/hcq/support.hpp"

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <sys/mman.h>
#include <thread>
#include <vector>

namespace kgsl_sim_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

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

// The SVM ranges the model enforces, for the driver (KGSL's own ranges; a sanitizer build's model
// moves them, see drivers/sim/kgsl/sim_kgsl.hpp).
std::vector<SvmRange> model_ranges() {
    auto r64 = sim::kgsl::kgsl_svm_range(false), legacy = sim::kgsl::kgsl_svm_range(true);
    return {{r64.begin, r64.end, "the model's 64-bit SVM range"}, {legacy.begin, legacy.end, "the model's older SVM range"}};
}

// What every context needs: adreno_drawctxt.c adreno_drawctxt_create refuses a context without
// KGSL_CONTEXT_PREAMBLE and KGSL_CONTEXT_NO_GMEM_ALLOC.
constexpr uint32_t kContextFlags = kgsl::KGSL_CONTEXT_PREAMBLE | kgsl::KGSL_CONTEXT_NO_GMEM_ALLOC;

// A KGSL device on the model with one context and one 64 KiB GPU object (SVM) for IBs and data.
struct Rig {
    Rig() = default;
    explicit Rig(std::shared_ptr<sim::kgsl::SimKgsl> model) : sim(std::move(model)) {}
    std::shared_ptr<sim::kgsl::SimKgsl> sim = std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{});
    KgslDevice kgsl{std::make_shared<Adapter>(sim), "/dev/kgsl-3d0", "sim-kgsl-test"};
    uint32_t ctx = kgsl.drawctxt_create(kContextFlags);
    SvmWindow window = SvmWindow::reserve(kgsl, 2 << 20, 2 << 20, 2 << 20, model_ranges(), "sim-kgsl-test");
    void* at = window.base();
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
    o.svm_ranges = model_ranges();
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
    o.svm_ranges = model_ranges();
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
    o.svm_ranges = model_ranges();
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
    SECTION("CP_EVENT_WRITE7(CACHE_CLEAN, WRITE_ENABLED, EV_WRITE_USER_32B), KGSL gen7's timestamp write, writes its payload") {
        uint32_t ts = r.submit({pm4::type7(pm4::CP_EVENT_WRITE, 4), pm4::event_write7_0(pm4::CACHE_CLEAN, true), uint32_t(dst),
                                uint32_t(dst >> 32), 7});
        CHECK(r.wait(ts) == 0);
        CHECK(r.words[1024] == 7);
    }
    SECTION("CP_EVENT_WRITE7(CACHE_FLUSH_TS): neither KGSL gen7 nor mesa clean with it on A7XX; the model refuses it") {
        uint32_t ts = r.submit({pm4::type7(pm4::CP_EVENT_WRITE, 4), pm4::event_write7_0(pm4::CACHE_FLUSH_TS, true), uint32_t(dst),
                                uint32_t(dst >> 32), 7});
        CHECK(r.wait(ts) == EDEADLK);
        CHECK_THAT(r.sim->kernel_log(r.ctx), Catch::Contains("CACHE_CLEAN (0x31)"));
        CHECK(r.words[1024] == 0);
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
        o.svm_ranges = model_ranges();
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

// ---- the SVM range (kgsl_iommu.c kgsl_iommu_set_svm_region) ----

TEST_CASE("sim kgsl: an SVM object mapped outside KGSL's SVM range is refused with ENOMEM; without MAP_FIXED KGSL places it inside") {
    auto model = std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{});
    KgslDevice kgsl{std::make_shared<Adapter>(model), "/dev/kgsl-3d0", "svm-test"};
    const sim::kgsl::SvmRange r = model->svm();
    if (sim::kgsl::kSanitizerSvmShift == 0) {
        // The driver's and the model's copies of kgsl_iommu.h agree.
        CHECK(r.begin == kKgslSvmBase64);
        CHECK(r.end == kKgslSvmEnd64);
    }
    // Where the old driver put its window: wherever mmap(NULL) lands (near the top of the address space).
    void* anywhere = ::mmap(nullptr, 1 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    REQUIRE(anywhere != MAP_FAILED);
    CHECK_THROWS_WITH(kgsl.gpuobj_alloc_at(anywhere, 4096, false), Catch::Contains("ENOMEM"));
    ::munmap(anywhere, 1 << 20);
    // Straddling the range's end is refused as well (the whole object must be inside; the model
    // checks before it maps anything).
    CHECK_THROWS_WITH(kgsl.gpuobj_alloc_at(reinterpret_cast<void*>(r.end - 4096), 8192, false), Catch::Contains("ENOMEM"));
    SvmWindow w = SvmWindow::reserve(kgsl, 2 << 20, 2 << 20, 2 << 20, model_ranges(), "svm-test");
    CHECK(reinterpret_cast<uint64_t>(w.base()) >= r.begin);
    CHECK(reinterpret_cast<uint64_t>(w.base()) + w.size() <= r.end);
    // Without MAP_FIXED, KGSL picks the address: inside the range.
    kgsl::kgsl_gpuobj_alloc a{};
    a.size = 4096;
    a.flags = kgsl::KGSL_MEMFLAGS_USE_CPU_MAP;
    int err = 0;
    int fd = model->open("/dev/kgsl-3d0", 0, err);
    REQUIRE(model->ioctl(fd, kgsl::IOCTL_KGSL_GPUOBJ_ALLOC, &a, err) == 0);
    void* placed = model->mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, uint64_t(a.id) * kgsl::kMmapPage, err);
    REQUIRE(placed != MAP_FAILED);
    CHECK(reinterpret_cast<uint64_t>(placed) >= r.begin);
    CHECK(reinterpret_cast<uint64_t>(placed) + 4096 <= r.end);
    kgsl::kgsl_gpuobj_free f{};
    f.id = a.id;
    model->munmap(placed, 4096);
    CHECK(model->ioctl(fd, kgsl::IOCTL_KGSL_GPUOBJ_FREE, &f, err) == 0);
    model->close(fd);
}

TEST_CASE("qcom: the SVM window lies inside KGSL's range; on an older kernel's 4 GiB range it shrinks to fit; a range KGSL refuses is named") {
    SECTION("KGSL's 64-bit range") {
        auto model = std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{});
        QcomOptions o;
        o.name = "svm-64";
        o.isa = KernelIsa::host;
        o.svm_ranges = model_ranges();
        auto dev = QcomDevice::create(std::make_shared<Adapter>(model), o);
        uint64_t base = reinterpret_cast<uint64_t>(dev->svm_window().base());
        CHECK(base >= model->svm().begin);
        CHECK(base + dev->svm_window().size() <= model->svm().end);
        CHECK(dev->svm_window().size() == o.va_bytes);  // 16 GiB fits
        hcq::Signal s = dev->new_signal(0, "s");
        dev->compute_queue().signal(s, 1).submit();
        s.wait(1, 2s);
    }
    SECTION("an older kernel: the 64-bit range is refused, the 4 GiB one is used and the window fits it") {
        auto model = std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{0x06030000, sim::kgsl::kgsl_svm_range(true)});
        QcomOptions o;
        o.name = "svm-legacy";
        o.isa = KernelIsa::host;
        o.svm_ranges = model_ranges();
        auto dev = QcomDevice::create(std::make_shared<Adapter>(model), o);
        uint64_t base = reinterpret_cast<uint64_t>(dev->svm_window().base());
        CHECK(base >= model->svm().begin);
        CHECK(base + dev->svm_window().size() <= model->svm().end);
        CHECK(dev->svm_window().size() <= (4ull << 30));
        CHECK(dev->limits().memory_bytes < (4ull << 30));
        hcq::Buffer b = dev->allocate(1 << 20);
        CHECK(b.address().value() >= model->svm().begin);
        CHECK(b.address().value() + b.size() <= model->svm().end);
        hcq::Signal s = dev->new_signal(0, "s");
        dev->compute_queue().signal(s, 1).submit();
        s.wait(1, 2s);
        CHECK(model->faults() == 0);
    }
    SECTION("only a range this kernel does not take: the open fails naming the range and KGSL's ENOMEM") {
        auto model = std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{0x06030000, sim::kgsl::kgsl_svm_range(true)});
        QcomOptions o;
        o.name = "svm-refused";
        o.isa = KernelIsa::host;
        o.svm_ranges = {model_ranges()[0]};
        CHECK_THROWS_WITH(QcomDevice::create(std::make_shared<Adapter>(model), o),
                          Catch::Contains("cannot place the SVM window") && Catch::Contains("64-bit SVM range") && Catch::Contains("ENOMEM"));
    }
}

// ---- timestamp types (msm_kgsl.h enum kgsl_timestamp_type; adreno.c adreno_readtimestamp) ----

TEST_CASE("sim kgsl: QUEUED, CONSUMED and RETIRED are different timestamps; the driver reads RETIRED (2), not QUEUED (3)") {
    Rig r;
    r.sim->hang_context(r.ctx, true);  // the CP takes nothing: two queued, none started, none retired
    uint32_t t1 = r.submit({pm4::type7(pm4::CP_NOP, 1), 0});
    uint32_t t2 = r.submit({pm4::type7(pm4::CP_NOP, 1), 0});
    REQUIRE(t2 == t1 + 1);
    auto read = [&](uint32_t type) {
        kgsl::kgsl_cmdstream_readtimestamp_ctxtid q{r.ctx, type, 0xdeadu};
        int err = 0;
        int fd = r.sim->open("/dev/kgsl-3d0", 0, err);
        int rc = r.sim->ioctl(fd, kgsl::IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID, &q, err);
        r.sim->close(fd);
        return rc == 0 ? int64_t(q.timestamp) : -int64_t(err);
    };
    CHECK(read(3) == t2);  // QUEUED: handed to KGSL
    CHECK(read(1) == 0);   // CONSUMED: nothing started
    CHECK(read(2) == 0);   // RETIRED: nothing done
    CHECK(read(4) == -EINVAL);
    // The driver's read_retired must not report the queued work as done: with RETIRED = 3 it would
    // read QUEUED and reuse ring bytes the GPU has yet to read.
    CHECK(kgsl::KGSL_TIMESTAMP_RETIRED == 2u);
    uint32_t retired = 0xdead;
    CHECK(r.kgsl.read_retired(r.ctx, retired) == 0);
    CHECK(retired == 0);
    r.sim->hang_context(r.ctx, false);
    CHECK(r.wait(t2) == 0);
    CHECK(read(2) == t2);
    CHECK(read(1) == t2);
    CHECK(r.kgsl.read_retired(r.ctx, retired) == 0);
    CHECK(retired == t2);
}

// ---- the per-context drawqueue (adreno_dispatch.c _wait_for_room_in_context_queue) ----

TEST_CASE("sim kgsl: a context holds 49 unstarted submissions; the 50th sleeps context_queue_wait, then fails with ETIMEDOUT") {
    Rig r{std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{.queue_wait_ms = 20})};
    r.sim->hang_context(r.ctx, true);
    const uint32_t nop[2] = {pm4::type7(pm4::CP_NOP, 1), 0};
    std::memcpy(r.words, nop, sizeof nop);
    uint32_t ts = 0;
    for (int i = 0; i < 49; ++i) REQUIRE(r.kgsl.try_gpu_command(r.ctx, r.va(0), 8, ts) == 0);
    CHECK(ts == 49);
    CHECK(r.sim->drawqueue_waits() == 0);
    auto t0 = std::chrono::steady_clock::now();
    CHECK(r.kgsl.try_gpu_command(r.ctx, r.va(0), 8, ts) == ETIMEDOUT);
    CHECK(std::chrono::steady_clock::now() - t0 >= 20ms);
    CHECK(r.sim->drawqueue_waits() == 1);
    CHECK(ts == 49);  // nothing was queued
    // Once the CP starts work there is room again, and timestamps go on from where they were.
    r.sim->hang_context(r.ctx, false);
    REQUIRE(r.wait(49) == 0);
    CHECK(r.kgsl.try_gpu_command(r.ctx, r.va(0), 8, ts) == 0);
    CHECK(ts == 50);
}

namespace {
std::shared_ptr<QcomDevice> device_on(std::shared_ptr<sim::kgsl::SimKgsl> model, const char* name) {
    QcomOptions o;
    o.name = name;
    o.isa = KernelIsa::host;
    o.svm_ranges = model_ranges();
    return QcomDevice::create(std::make_shared<Adapter>(std::move(model)), o);
}
}  // namespace

TEST_CASE("qcom: more submissions than KGSL's drawqueue holds behind a gate: submit neither blocks nor fails, the rest follow the gate") {
    // A short context_queue_wait, so a driver that did block in GPU_COMMAND fails in 200 ms, not 10 s.
    auto model = std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{.queue_wait_ms = 200});
    auto dev = device_on(model, "drawqueue");
    hcq::Signal gate = dev->new_signal(0, "gate"), s = dev->new_signal(0, "count");
    dev->compute_queue().wait(gate, 1).signal(s, 1).submit();
    for (uint64_t i = 2; i <= 200; ++i) dev->compute_queue().signal(s, i).submit();
    CHECK(model->drawqueue_waits() == 0);  // the driver never made KGSL sleep
    CHECK_THAT(dev->queue_state(), Catch::Contains("held back (KGSL's drawqueue holds 49)"));
    CHECK_FALSE(s.try_wait(1, 10ms));
    gate.set(1);
    s.wait(200, 5s);
    dev->synchronize(5s);
    CHECK_FALSE(dev->failed());
    CHECK(model->faults() == 0);
}

TEST_CASE("qcom: ETIMEDOUT from GPU_COMMAND (a lowered context_drawqueue_size) is back-pressure: the driver holds the rest back, nothing is lost") {
    auto model = std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{.drawqueue_size = 9, .queue_wait_ms = 20});
    auto dev = device_on(model, "drawqueue-9");
    hcq::Signal gate = dev->new_signal(0, "gate"), s = dev->new_signal(0, "count");
    // The first IB is started by the CP and blocks in its wait; eight more fill the drawqueue.
    dev->compute_queue().wait(gate, 1).signal(s, 1).submit();
    for (uint64_t i = 2; i <= 40; ++i) dev->compute_queue().signal(s, i).submit();
    CHECK(model->drawqueue_waits() >= 1);  // KGSL said ETIMEDOUT at least once
    CHECK_FALSE(dev->failed());
    CHECK_THAT(dev->queue_state(), Catch::Contains("held back"));
    gate.set(1);
    s.wait(40, 5s);
    dev->synchronize(5s);
    CHECK(s.value() == 40);
    CHECK_FALSE(dev->failed());
}

// ---- context detach (adreno_drawctxt.c adreno_drawctxt_detach / wait_for_timestamp_rb) ----

TEST_CASE("sim kgsl: destroying a context whose started IB never retires costs KGSL's 30 s detach wait and a GPU reset (counted, not slept)") {
    Rig r;
    uint64_t gate = r.va(2048);
    // A CP_WAIT_REG_MEM on a dword nobody writes: the CP starts the IB and never finishes it.
    uint32_t ts = r.submit({pm4::type7(pm4::CP_WAIT_REG_MEM, 6), pm4::kWriteGe | pm4::kPollMemory << 4, uint32_t(gate), uint32_t(gate >> 32), 1,
                            0xffffffffu, 32});
    CHECK(r.wait(ts, 20) == ETIMEDOUT);
    // An idle context detaches at once.
    uint32_t idle = r.kgsl.drawctxt_create(kContextFlags);
    r.kgsl.drawctxt_destroy(idle);
    CHECK(r.sim->gpu_resets() == 0);
    CHECK(r.sim->detach_stall_ms() == 0);
    auto t0 = std::chrono::steady_clock::now();
    r.kgsl.drawctxt_destroy(r.ctx);
    CHECK(std::chrono::steady_clock::now() - t0 < 5s);  // modelled, not slept
    CHECK(r.sim->gpu_resets() == 1);
    CHECK(r.sim->detach_stall_ms() == 30'000);
    // Destroyed: waits on it fail, a new context works.
    CHECK(r.wait(ts, 10) != 0);
    r.ctx = r.kgsl.drawctxt_create(kContextFlags);
    CHECK(r.wait(r.submit({pm4::type7(pm4::CP_NOP, 1), 0})) == 0);
}

TEST_CASE("qcom: recover() of a queue stuck in a wait replaces its context; on KGSL that is a 30 s detach and a GPU reset per stuck context") {
    auto model = std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{});
    auto dev = device_on(model, "detach");
    hcq::Signal gate = dev->new_signal(0, "gate"), s = dev->new_signal(0, "s");
    uint64_t v = dev->next_timeline();
    dev->compute_queue().wait(gate, 1).signal(s, 1).signal(dev->timeline(), v).submit();
    CHECK_THROWS_AS(dev->synchronize(50ms), TimeoutError);
    dev->recover();
    CHECK(model->gpu_resets() == 1);  // the compute context; the idle copy context detached at once
    CHECK(model->detach_stall_ms() == 30'000);
    dev->compute_queue().signal(s, 2).submit();
    s.wait(2, 5s);
    CHECK(model->faults() == 0);
}

// ---- what KGSL refuses or treats differently (A11) ----

TEST_CASE("sim kgsl: KGSL's rules for contexts and waits: legacy contexts refused, unqueued timestamps refused, timeout 0 waits without bound") {
    Rig r;
    // adreno_drawctxt_create: PREAMBLE and NO_GMEM_ALLOC are required.
    CHECK_THROWS_WITH(r.kgsl.drawctxt_create(0), Catch::Contains("EINVAL"));
    CHECK_THROWS_WITH(r.kgsl.drawctxt_create(kgsl::KGSL_CONTEXT_PREAMBLE), Catch::Contains("EINVAL"));
    // kgsl_add_event: a timestamp past QUEUED is EINVAL, not a wait.
    uint32_t ts = r.submit({pm4::type7(pm4::CP_NOP, 1), 0});
    CHECK(r.wait(ts + 1, 10) == EINVAL);
    CHECK(r.wait(ts) == 0);
    // adreno_drawctxt_wait: timeout 0 is "forever": it returns once the work retires, however long.
    r.sim->hang_context(r.ctx, true);
    uint32_t held = r.submit({pm4::type7(pm4::CP_NOP, 1), 0});
    std::thread release([&] {
        std::this_thread::sleep_for(30ms);
        r.sim->hang_context(r.ctx, false);
    });
    auto t0 = std::chrono::steady_clock::now();
    CHECK(r.wait(held, 0) == 0);
    CHECK(std::chrono::steady_clock::now() - t0 >= 25ms);
    release.join();
}

// ---- the compute program state a real SP needs (mesa computerator a6xx.cc cs_program_emit) ----

namespace {
struct Packet {
    size_t at, dwords;  // header position, header + payload
    bool type4;
    uint32_t reg, count, opcode;
};
std::vector<Packet> packets(const uint32_t* w, size_t n) {
    std::vector<Packet> out;
    for (size_t i = 0; i < n;) {
        Packet p{i, 1, (w[i] & 0xf0000000u) == pm4::kType4, 0, 0, 0};
        if (p.type4) {
            p.count = w[i] & 0x7f;
            p.reg = (w[i] >> 8) & 0x3ffff;
        } else {
            p.count = w[i] & 0x3fff;
            p.opcode = (w[i] >> 16) & 0x7f;
        }
        p.dwords = 1 + p.count;
        out.push_back(p);
        i += p.dwords;
    }
    return out;
}
}  // namespace

TEST_CASE("sim kgsl: a dispatch without each piece of the SP's program state is refused, naming what is missing; the driver's whole dispatch runs") {
    for (uint32_t chip : {0x06030000u, 0x07030001u}) {
        auto model = std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{chip});
        auto dev = device_on(model, chip == 0x06030000u ? "a630" : "a730");
        INFO(dev->chip());
        auto fill = test::load_kernel(*dev, "fill", "fill");
        hcq::Buffer out = dev->allocate(4 * 64);
        hcq::KernelArgs args(*fill, {out}, {64, 0x77});
        // The driver's own encoding of one dispatch, then a raw IB per variant in a fresh context
        // (register state lives as long as the context).
        auto q = dev->compute_queue();
        hcq::CommandBuffer cb;
        const_cast<hcq::Engine&>(q.engine()).encode_exec(cb, *fill, args.bytes(), {1, 1, 1}, {64, 1, 1});
        const size_t n = cb.size() / 4;
        const auto* words = reinterpret_cast<const uint32_t*>(cb.data());
        hcq::Buffer ib = dev->allocate(cb.size(), {.host = true});
        KgslDevice raw{std::make_shared<Adapter>(model), "/dev/kgsl-3d0", "raw"};
        auto run = [&](const std::vector<uint32_t>& dwords) {
            std::memcpy(ib.cpu(), dwords.data(), dwords.size() * 4);
            uint32_t ctx = raw.drawctxt_create(kContextFlags);
            uint32_t ts = raw.gpu_command(ctx, ib.address().value(), dwords.size() * 4);
            int rc = raw.wait_timestamp(ctx, ts, 5000);
            std::string log = model->kernel_log(ctx);
            raw.drawctxt_destroy(ctx);
            return std::pair{rc, log};
        };
        const std::vector<std::pair<uint32_t, const char*>> needed = chip == 0x06030000u ? std::vector<std::pair<uint32_t, const char*>>{
            {0xab00, "SP_MODE_CNTL"}, {0xbb08, "SP_UPDATE_CNTL"}, {0xb987, "SP_CS_CONST_CONFIG"}, {0xa9b0, "SP_CS_CNTL_0"},
            {0xa9b4, "SP_CS_PVT_MEM_PARAM"}, {0xa9bb, "SP_CS_CONFIG"}, {0xb997, "SP_CS_CONST_CONFIG_0"}}
            : std::vector<std::pair<uint32_t, const char*>>{
            {0xab00, "SP_MODE_CNTL"}, {0xab1f, "SP_UPDATE_CNTL"}, {0xa9cd, "SP_CS_CONST_CONFIG"}, {0xa9b0, "SP_CS_CNTL_0"},
            {0xa9b4, "SP_CS_PVT_MEM_PARAM"}, {0xa9bb, "SP_CS_CONFIG"}, {0xa9c6, "SP_PS_WAVE_CNTL"}, {0xa9c8, "SP_REG_PROG_ID_0"},
            {0xa9c2, "SP_CS_WIE_CNTL_0"}, {0xa9db, "SP_CS_WGE_CNTL"}, {0xa9df, "SP_CS_NDRANGE_7"}};
        size_t refused = 0;
        bool shader_load_seen = false;
        for (const Packet& p : packets(words, n)) {
            std::string expect;
            if (p.type4) {
                for (const auto& [reg, name] : needed) {
                    if (reg == p.reg) expect = name;
                }
            } else if (p.opcode == pm4::CP_LOAD_STATE6_FRAG && ((words[p.at + 1] >> 14) & 3) == pm4::kSt6Shader) {
                expect = "no CP_LOAD_STATE6_FRAG(ST6_SHADER, SS6_INDIRECT) loaded the program";
                shader_load_seen = true;
            }
            if (expect.empty()) continue;
            // The same IB with this packet turned into a CP_NOP of the same length.
            std::vector<uint32_t> without(words, words + n);
            without[p.at] = pm4::type7(pm4::CP_NOP, p.count);
            INFO("without the packet at dword " << p.at << ", expecting " << expect);
            auto [rc, log] = run(without);
            CHECK(rc == EDEADLK);
            CHECK_THAT(log, Catch::Contains("CP_EXEC_CS") && Catch::Contains(expect));
            ++refused;
        }
        CHECK(shader_load_seen);
        CHECK(refused == needed.size() + 1);
        // CONSTLEN too small for the arguments: the shader would not see them.
        {
            std::vector<uint32_t> small(words, words + n);
            for (const Packet& p : packets(words, n)) {
                if (p.type4 && (p.reg == 0xb987 || p.reg == 0xa9cd)) small[p.at + 1] = 0x100;  // ENABLED, CONSTLEN 0
            }
            auto [rc, log] = run(small);
            CHECK(rc == EDEADLK);
            CHECK_THAT(log, Catch::Contains("CONSTLEN = 0 vec4 hides kernel arguments"));
        }
        // The whole dispatch runs and computes.
        auto [rc, log] = run(std::vector<uint32_t>(words, words + n));
        CHECK(rc == 0);
        CHECK(log.empty());
        std::vector<uint32_t> got(64);
        dev->copy_out(std::as_writable_bytes(std::span(got)), out);
        for (uint32_t x : got) REQUIRE(x == 0x77);
    }
}

}  // namespace kgsl_sim_test
