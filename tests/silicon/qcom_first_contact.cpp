// The first minute on a phone (Adreno through /dev/kgsl-3d0): what the simulated KGSL assumes and
// only a real kernel and CP can confirm. Each step prints what it found; nothing is reset or
// reconfigured, every wait is bounded. Exit 0 when every finding matches what drivers/qcom relies
// on, 1 when one does not (the line says which), 77 when this machine has no /dev/kgsl-3d0.
//
//   open      QcomDevice opens: the SVM window lies inside a range KGSL takes (which one)
//   retired   READTIMESTAMP RETIRED (2) and QUEUED (3) differ while an IB waits on a gate
//   cond-exec CP_COND_EXEC with *TIMESTAMP_ADDR equal to, below and above ACTIVE_TIMESTAMP: does the
//             equal case execute (mesa 32be52a4's reading, which the 64-bit wait needs)?
//   wait64    the driver's own 64-bit wait holds while the signal is below the value with the same
//             high word, and releases when it gets there
//   signal    the driver's signal (flush event, CP_WAIT_MEM_WRITES, two CP_MEM_WRITEs) reaches the
//             host, the flush event's scratch write first; and the always-on counter runs at 19.2 MHz
#include "base/error.hpp"
#include "drivers/qcom/a6xx_registers.hpp"
#include "drivers/qcom/kgsl_syscalls.hpp"
#include "drivers/qcom/pm4.hpp"
#include "drivers/qcom/qcom_device.hpp"
#include "hcq/clock.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <thread>

using namespace baregpu;
using namespace baregpu::qcom;
using namespace std::chrono_literals;

namespace {

int failures = 0;

void report(const char* step, bool ok, const std::string& what) {
    std::printf("%-10s %s  %s\n", step, ok ? "ok  " : "FAIL", what.c_str());
    std::fflush(stdout);
    if (!ok) ++failures;
}

uint32_t load(const hcq::Buffer& b, size_t dword) {
    return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(b.cpu() + 4 * dword)).load(std::memory_order_acquire);
}
void store(const hcq::Buffer& b, size_t dword, uint32_t v) {
    std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(b.cpu() + 4 * dword)).store(v, std::memory_order_release);
}

// A raw context of its own, so the device's engines keep their own timestamps.
struct Raw {
    QcomDevice& dev;
    uint32_t ctx;
    hcq::Buffer ib;
    explicit Raw(QcomDevice& d)
        : dev(d),
          ctx(d.kgsl().drawctxt_create(kgsl::KGSL_CONTEXT_PREAMBLE | kgsl::KGSL_CONTEXT_NO_GMEM_ALLOC | kgsl::KGSL_CONTEXT_NO_FAULT_TOLERANCE |
                                       8u << kgsl::KGSL_CONTEXT_PRIORITY_SHIFT)),
          ib(d.allocate(4096, {.host = true, .uncached = true})) {}
    ~Raw() { dev.kgsl().drawctxt_destroy(ctx); }
    uint32_t submit(std::initializer_list<uint32_t> words) {
        std::memcpy(ib.cpu(), words.begin(), words.size() * 4);
        return dev.kgsl().gpu_command(ctx, ib.address().value(), words.size() * 4);
    }
    int wait(uint32_t ts, uint32_t ms) { return dev.kgsl().wait_timestamp(ctx, ts, ms); }
};

void step_retired(QcomDevice& dev, const hcq::Buffer& data) {
    Raw raw(dev);
    uint64_t gate = data.address().value();
    store(data, 0, 0);
    uint32_t ts = raw.submit({pm4::type7(pm4::CP_WAIT_REG_MEM, 6), pm4::kWriteGe | pm4::kPollMemory << 4, uint32_t(gate), uint32_t(gate >> 32), 1,
                              0xffffffffu, 32});
    std::this_thread::sleep_for(50ms);
    uint32_t retired = 0, queued = 0;
    int e1 = dev.kgsl().read_timestamp(raw.ctx, kgsl::KGSL_TIMESTAMP_RETIRED, retired);
    int e2 = dev.kgsl().read_timestamp(raw.ctx, kgsl::KGSL_TIMESTAMP_QUEUED, queued);
    report("retired", e1 == 0 && e2 == 0 && queued == ts && retired != ts,
           fmt::format("IB {} held by a gate: RETIRED(2) = {}, QUEUED(3) = {} (errnos {} {})", ts, retired, queued, e1, e2));
    store(data, 0, 1);
    int rc = raw.wait(ts, 2000);
    e1 = dev.kgsl().read_timestamp(raw.ctx, kgsl::KGSL_TIMESTAMP_RETIRED, retired);
    report("retired", rc == 0 && e1 == 0 && retired == ts, fmt::format("gate opened: wait {} , RETIRED(2) = {}", rc, retired));
}

void step_cond_exec(QcomDevice& dev, const hcq::Buffer& data) {
    // dword 1: BOOL (1), dword 2: the "timestamp", dword 3: the marker the conditional write sets.
    const uint64_t base = data.address().value(), flag = base + 4, stamp = base + 8, marker = base + 12;
    constexpr uint32_t kActive = 5;
    bool equal_runs = false;
    for (uint32_t at : {kActive - 1, kActive, kActive + 1}) {
        Raw raw(dev);
        store(data, 1, 1);
        store(data, 2, at);
        store(data, 3, 0);
        uint32_t ts = raw.submit({pm4::type7(pm4::CP_COND_EXEC, 6), uint32_t(flag), uint32_t(flag >> 32), uint32_t(stamp), uint32_t(stamp >> 32),
                                  kActive, 4, pm4::type7(pm4::CP_MEM_WRITE, 3), uint32_t(marker), uint32_t(marker >> 32), 0x600d});
        int rc = raw.wait(ts, 2000);
        bool ran = load(data, 3) == 0x600d;
        if (at == kActive) equal_runs = ran;
        std::printf("cond-exec       *TIMESTAMP_ADDR = %u, ACTIVE_TIMESTAMP = %u: %s (wait %d)\n", at, kActive, ran ? "executed" : "skipped", rc);
    }
    report("cond-exec", equal_runs,
           equal_runs ? "equal executes: the 64-bit wait's low-word poll runs while the high word is H (mesa 32be52a4)"
                      : "equal SKIPS: the older reading ('less than', tinygrad's adreno_pm4.xml) holds; every 64-bit wait below 2^32 "
                        "passes at once (audit A10): use CP_WAIT_TIMESTAMP or compare with an offset");
}

void step_wait64(QcomDevice& dev) {
    hcq::Signal gate = dev.new_signal(3, "gate"), done = dev.new_signal(0, "done");
    dev.compute_queue().wait(gate, 7).signal(done, 1).submit();
    bool held = !done.try_wait(1, 100ms);
    gate.set(7);
    bool released = done.try_wait(1, 2s);
    report("wait64", held && released, fmt::format("wait(gate >= 7) with gate = 3: {}; after gate = 7: {}", held ? "held" : "PASSED EARLY",
                                                   released ? "released" : "still waiting"));
}

void step_signal(QcomDevice& dev) {
    hcq::Signal s = dev.new_signal(0, "s");
    hcq::Signal t = dev.new_signal(0, "t");
    uint64_t t0 = hcq::host_now_ns();
    dev.compute_queue().timestamp(t).signal(s, 0x1'0000'0002ull).submit();
    bool seen = s.try_wait(0x1'0000'0002ull, 2s);
    report("signal", seen, fmt::format("64-bit signal after the flush event seen by the host: value 0x{:x}", s.value()));
    hcq::Signal t2 = dev.new_signal(0, "t2");
    std::this_thread::sleep_for(100ms);
    dev.compute_queue().timestamp(t2).signal(t2, 1).submit();
    t2.wait(1, 2s);
    uint64_t host_ns = hcq::host_now_ns() - t0;
    double hz = double(t2.timestamp() - t.timestamp()) / (double(host_ns) / 1e9);
    report("signal", hz > 10e6 && hz < 30e6, fmt::format("always-on counter: {:.1f} MHz against the host clock (19.2 expected)", hz / 1e6));
}

}  // namespace

int main() {
    struct stat st {};
    if (::stat("/dev/kgsl-3d0", &st) != 0) {
        std::printf("qcom-first-contact: no /dev/kgsl-3d0 on this machine (not an Adreno phone with KGSL): nothing to probe\n");
        return 77;
    }
    try {
        QcomOptions o;
        o.name = "qcom:0";
        o.isa = KernelIsa::adreno;
        auto dev = QcomDevice::create(libc_syscalls(), o);
        const SvmWindow& w = dev->svm_window();
        report("open", true,
               fmt::format("{} (chip_id 0x{:08x}); SVM window 0x{:x}+0x{:x} in {}", dev->chip(), dev->device_info().chip_id,
                           reinterpret_cast<uint64_t>(w.base()), w.size(), w.range()));
        hcq::Buffer data = dev->allocate(4096, {.host = true, .uncached = true});
        step_retired(*dev, data);
        step_cond_exec(*dev, data);
        step_wait64(*dev);
        step_signal(*dev);
    } catch (const std::exception& e) {
        report("error", false, e.what());
    }
    std::printf("qcom-first-contact: %s\n", failures == 0 ? "every finding matches what drivers/qcom relies on" : "see FAIL lines above");
    return failures == 0 ? 0 : 1;
}
