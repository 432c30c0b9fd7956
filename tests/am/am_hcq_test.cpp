// drivers/am's HCQ backend on a simulated chip (Navi31 or Navi48): faults the simulated chip raises
// (an unmapped access from a kernel, a copy from unmapped memory, a dispatch that never ends)
// put the device in its error state within the caller's timeout, naming the queue and the
// address; Device::recover() brings the same device back and work runs again. Also: VRAM for
// large buffers is mapped with 2 MiB leaves, and the rings wrap without overrunning.
#include "base/error.hpp"
#include "drivers/am/compute_queue.hpp"
#include "drivers/am/copy_queue.hpp"
#include "drivers/am/hcq_device.hpp"
#include "drivers/registry.hpp"
#include "hcq/clock.hpp"
#include "hcq/graph.hpp"
#include "tests/hcq/support.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <string>
#include <thread>

namespace am_hcq_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::hcq;
using namespace std::chrono_literals;

namespace {

// The chip under test: $BAREGPU_TEST_DEVICES's first entry (meson runs this file once per
// simulated chip), sim-am:navi31 when it is unset.
std::string device_name() {
    const char* env = std::getenv("BAREGPU_TEST_DEVICES");
    std::string list = env != nullptr ? env : "";
    std::string first = list.substr(0, list.find(','));
    return first.empty() ? "sim-am:navi31" : first;
}
const std::string kDevice = device_name();
// Inside VMID 0's range (PAGE_TABLE_START .. END) and never mapped by the backend's VA window.
constexpr uint64_t kUnmapped = 0x3000'0bee'f000ull;

// A little of everything the acceptance suite does: a kernel, copies both ways, a wait on a
// host-set signal across both queues, a graph replay. Checks the data.
void run_workload(Device& dev) {
    auto fill = test::load_kernel(dev, "fill", "fill");
    const uint32_t n = 4096;
    Buffer a = dev.allocate(4 * n), b = dev.allocate(4 * n);
    Signal gate = dev.new_signal(0, "gate"), done = dev.new_signal(0, "done");
    dev.compute_queue().wait(gate, 1).exec(*fill, KernelArgs(*fill, {a}, {n, 7}), {n / 64}, {64}).signal(done, 1).submit();
    dev.copy_queue().wait(done, 1).copy(b, a, 4 * n).signal(done, 2).submit();
    CHECK_FALSE(done.try_wait(1, 10ms));
    gate.set(1);
    done.wait(2, 5s);
    std::vector<uint32_t> got = test::download<uint32_t>(dev, b, n);
    CHECK(std::count(got.begin(), got.end(), 7u) == n);

    std::vector<uint32_t> in(n);
    std::iota(in.begin(), in.end(), 1u);
    test::upload(dev, a, in);
    got = test::download<uint32_t>(dev, a, n);
    CHECK(got == in);
}

}  // namespace

TEST_CASE("am: a kernel's unmapped access fails the device at once, naming the queue and the address; recover() brings it back") {
    auto dev = test::open_device(kDevice);
    run_workload(*dev);
    auto fill = test::load_kernel(*dev, "fill", "fill");
    Signal done = dev->new_signal(0, "done");
    KernelArgs args(*fill);
    args.address(0, GpuVirtualAddress(kUnmapped)).value(0, 16).value(1, 1);
    const uint64_t t0 = host_now_ns();
    dev->compute_queue().exec(*fill, args, {1}, {16}).signal(done, 1).submit();
    CHECK_THROWS_AS(done.wait(1, 5s), DeviceLostError);
    CHECK(host_now_ns() - t0 < 1'000'000'000);  // well inside the caller's 5 s
    REQUIRE(dev->failed());
    const std::string why = dev->failure();
    INFO(why);
    CHECK_THAT(why, Catch::Contains("page fault at GPU VA 0x30000beef000"));
    CHECK_THAT(why, Catch::Contains("compute (MEC1 pipe 0 queue 0"));
    CHECK_THAT(why, Catch::Contains("GC hub"));
    CHECK_THROWS_AS(dev->compute_queue(), DeviceLostError);

    dev->recover();
    CHECK_FALSE(dev->failed());
    run_workload(*dev);
    // Twice in a row, as tinygrad's fault-recovery test loops.
    Signal again = dev->new_signal(0, "again");
    dev->compute_queue().exec(*fill, args, {1}, {16}).signal(again, 1).submit();
    CHECK_THROWS_AS(again.wait(1, 5s), DeviceLostError);
    dev->recover();
    run_workload(*dev);
}

TEST_CASE("am: a copy from unmapped memory fails the device naming the address; recover() brings it back") {
    auto dev = test::open_device(kDevice);
    Buffer dst = dev->allocate(4096);
    Signal done = dev->new_signal(0, "done");
    dev->copy_queue().copy(dst.address(), GpuVirtualAddress(kUnmapped), 4096).signal(done, 1).submit();
    CHECK_THROWS_AS(done.wait(1, 5s), DeviceLostError);
    INFO(dev->failure());
    CHECK_THAT(dev->failure(), Catch::Contains("0x30000beef000"));
    CHECK_THAT(dev->failure(), Catch::Contains("copy (SDMA0 queue 0"));
    dev->recover();
    run_workload(*dev);
}

TEST_CASE("am: a dispatch that never ends is a hang within the caller's timeout; recover() dequeues it and the device works") {
    auto dev = test::open_device(kDevice);
    REQUIRE(registry::inject_dispatch_hang(*dev, true));
    auto fill = test::load_kernel(*dev, "fill", "fill");
    Buffer b = dev->allocate(64);
    const uint64_t v = dev->next_timeline();
    dev->compute_queue()
        .wait(dev->timeline(), v - 1)
        .exec(*fill, KernelArgs(*fill, {b}, {16, 3}), {1}, {16})
        .signal(dev->timeline(), v)
        .submit();
    const uint64_t t0 = host_now_ns();
    CHECK_THROWS_AS(dev->synchronize(300ms), TimeoutError);
    const uint64_t elapsed = host_now_ns() - t0;
    CHECK(elapsed >= 300'000'000);
    CHECK(elapsed < 1'000'000'000);
    REQUIRE(dev->failed());
    INFO(dev->failure());
    CHECK_THAT(dev->failure(), Catch::Contains("hang"));
    CHECK_THAT(dev->failure(), Catch::Contains("compute (MEC1 pipe 0 queue 0"));
    CHECK_THAT(dev->failure(), Catch::Contains("executing a dispatch"));
    CHECK_THAT(dev->failure(), Catch::Contains("ring 0x"));

    REQUIRE(registry::inject_dispatch_hang(*dev, false));
    dev->recover();
    run_workload(*dev);
}

TEST_CASE("am: a device dropped in its error state opens again and works (the next open recovers)") {
    {
        auto dev = test::open_device(kDevice);
        auto fill = test::load_kernel(*dev, "fill", "fill");
        Signal done = dev->new_signal(0, "done");
        KernelArgs args(*fill);
        args.address(0, GpuVirtualAddress(kUnmapped)).value(0, 16).value(1, 1);
        dev->compute_queue().exec(*fill, args, {1}, {16}).signal(done, 1).submit();
        CHECK_THROWS_AS(done.wait(1, 5s), DeviceLostError);
    }
    auto dev = test::open_device(kDevice);
    CHECK_FALSE(dev->failed());
    run_workload(*dev);
}

TEST_CASE("am: recover() on a device that is not failed keeps it working; the cpu backend has no dispatch hang to inject") {
    auto dev = test::open_device(kDevice);
    dev->recover();
    run_workload(*dev);
    auto cpu = test::open_device("cpu");
    CHECK_FALSE(registry::inject_dispatch_hang(*cpu, true));
}

TEST_CASE("am: a device removed under us is in its error state; no address is handed out twice") {
    for (bool gone : {false, true}) {
        INFO((gone ? "gone (the backend knows)" : "surprise removal (all-ones)"));
        auto dev = test::open_device(kDevice);
        Buffer before = dev->allocate(4096);
        REQUIRE(registry::inject_bus_removal(*dev, gone));
        CHECK_THROWS_AS(dev->allocate(4096), DeviceLostError);
        CHECK(dev->failed());
        // Every later call says the device was lost (never "VA ... is already mapped").
        CHECK_THROWS_AS(dev->allocate(4096), DeviceLostError);
        CHECK_THROWS_AS(dev->allocate(1 << 20), DeviceLostError);
        CHECK_THROWS_AS(dev->synchronize(), DeviceLostError);
    }
    // The chip comes back for the next owner.
    auto dev = test::open_device(kDevice);
    run_workload(*dev);
}

TEST_CASE("am: VRAM buffers of 2 MiB and more are mapped with 2 MiB leaves; small ones with 4 KiB pages") {
    auto dev = test::open_device(kDevice);
    auto* am = dynamic_cast<am::AmHcqDevice*>(dev.get());
    REQUIRE(am != nullptr);
    const auto before = am->memory_stats();
    Buffer big = dev->allocate(8ull << 20);
    const auto after_big = am->memory_stats();
    CHECK(after_big.leaves_2m - before.leaves_2m == 4);
    CHECK(after_big.leaves_4k == before.leaves_4k);
    Buffer small = dev->allocate(12 << 10);
    CHECK(am->memory_stats().leaves_4k - after_big.leaves_4k == 3);
    // And the memory works: a kernel fills the big one, the copy engine reads it back.
    auto fill = test::load_kernel(*dev, "fill", "fill");
    const uint32_t n = (8u << 20) / 4;
    dev->compute_queue().exec(*fill, KernelArgs(*fill, {big}, {n, 0x5a5a5a5a}), {n / 256}, {256}).submit();
    std::vector<uint32_t> got = test::download<uint32_t>(*dev, big, n);
    CHECK(std::count(got.begin(), got.end(), 0x5a5a5a5au) == n);
}

TEST_CASE("am: kernels read and write host memory (system pages) and cpu-visible VRAM") {
    auto dev = test::open_device(kDevice);
    auto fill = test::load_kernel(*dev, "fill", "fill");
    const uint32_t n = 3000;  // crosses 4 KiB pages
    for (BufferOptions options : {BufferOptions{.host = true}, BufferOptions{.cpu_access = true}}) {
        Buffer b = dev->allocate(4 * n, options);
        REQUIRE(b.cpu() != nullptr);
        std::fill(b.as<uint32_t>().begin(), b.as<uint32_t>().end(), 0u);
        Signal done = dev->new_signal(0, "done");
        dev->compute_queue().memory_barrier().exec(*fill, KernelArgs(*fill, {b}, {n - 1, 42}), {n / 100}, {100}).signal(done, 1).submit();
        done.wait(1, 5s);
        auto words = b.as<uint32_t>();
        CHECK(std::count(words.begin(), words.end(), 42u) == n - 1);
        CHECK(words[n - 1] == 0);  // the kernel stops at n - 1: nothing beyond what it was asked
    }
}

TEST_CASE("am: more work than the rings hold wraps around them with no overrun") {
    auto dev = test::open_device(kDevice + "?ring=4096");
    auto* am = dynamic_cast<am::AmHcqDevice*>(dev.get());
    REQUIRE(am != nullptr);
    Signal s = dev->new_signal(0, "count");
    Buffer a = dev->allocate(4096), b = dev->allocate(4096);
    // 2000 submissions of ~100 bytes each through 4 KiB rings: ~50 wraps each, and every
    // submission must see the previous one's value (an overrun would lose or repeat one).
    for (uint64_t i = 0; i < 2000; ++i) {
        dev->compute_queue().wait(s, 2 * i).signal(s, 2 * i + 1).submit();
        dev->copy_queue().wait(s, 2 * i + 1).copy(b, a, 64).signal(s, 2 * i + 2).submit();
    }
    s.wait(4000, 10s);
    // The signal is not the last thing on the rings: each submission ends with its ticket fence,
    // which the engines may still be executing when the signal lands (slow under ASan). Both rings
    // must drain to idle, with nothing left pending, within a bounded time.
    auto idle = [&] {
        return dev->compute_queue().engine().describe().find("idle") != std::string::npos &&
               dev->copy_queue().engine().describe().find("idle") != std::string::npos;
    };
    for (auto deadline = std::chrono::steady_clock::now() + 10s; !idle() && std::chrono::steady_clock::now() < deadline;) {
        std::this_thread::sleep_for(1ms);
    }
    INFO(dev->queue_state());
    CHECK(dynamic_cast<const am::ComputeQueueEngine&>(dev->compute_queue().engine()).wraps() >= 10);
    CHECK(dynamic_cast<const am::CopyQueueEngine&>(dev->copy_queue().engine()).wraps() >= 10);
    CHECK(dev->compute_queue().engine().describe().find("idle") != std::string::npos);
    CHECK(dev->copy_queue().engine().describe().find("idle") != std::string::npos);
    CHECK_FALSE(dev->failed());
}

TEST_CASE("am: two compute queues are two HQDs that run side by side and wait on each other") {
    auto dev = test::open_device(std::string(kDevice) + "?compute_queues=2");
    REQUIRE(dev->compute_engines() == 2);
    CHECK_THAT(dev->compute_queue(1).engine().describe(), Catch::Contains("MEC1 pipe 0 queue 1, doorbell 4"));
    auto fill = test::load_kernel(*dev, "fill", "fill");
    Buffer a = dev->allocate(4 * 256), b = dev->allocate(4 * 256);
    Signal s = dev->new_signal(0, "ping-pong");
    // Queue 1 waits for queue 0 and the other way round, 50 times: each needs the other running.
    for (uint64_t i = 0; i < 50; ++i) {
        dev->compute_queue(0).wait(s, 2 * i).exec(*fill, KernelArgs(*fill, {a}, {256, uint32_t(i)}), {4}, {64}).signal(s, 2 * i + 1).submit();
        dev->compute_queue(1).wait(s, 2 * i + 1).exec(*fill, KernelArgs(*fill, {b}, {256, uint32_t(i)}), {4}, {64}).signal(s, 2 * i + 2).submit();
    }
    s.wait(100, 10s);
    CHECK(test::download<uint32_t>(*dev, a, 256) == std::vector<uint32_t>(256, 49));
    CHECK(test::download<uint32_t>(*dev, b, 256) == std::vector<uint32_t>(256, 49));
    CHECK_THROWS_AS(test::open_device(std::string(kDevice) + "?compute_queues=9"), Error);
}

}  // namespace am_hcq_test
