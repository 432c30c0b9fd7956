// The HCQ acceptance suite: signals, waits, exec, in-place updates, bind, ordering, ring
// wrap-around, many submissions in flight. Written against the public HCQ API only and run for
// every device in hcq_devices() (the behaviours of tinygrad's test/device/test_hcq.py, ported).
#include "base/error.hpp"
#include "hcq/clock.hpp"
#include "tests/hcq/support.hpp"

#include <chrono>
#include <cstring>
#include <thread>

using namespace baregpu;
using namespace baregpu::hcq;
using namespace std::chrono_literals;
using test::download;
using test::upload;

namespace {

// tinygrad's fixture: a = [0, 1], b = a + 1 via the add_one kernel.
struct AddOne {
    std::shared_ptr<Device> dev;
    std::shared_ptr<Program> prg;
    Buffer a, b;
    AddOne(std::shared_ptr<Device> d) : dev(std::move(d)) {
        prg = test::load_kernel(*dev, "add_one", "add_one");
        a = dev->allocate(2 * sizeof(float));
        b = dev->allocate(2 * sizeof(float));
        upload(*dev, a, std::vector<float>{0.f, 1.f});
        upload(*dev, b, std::vector<float>{0.f, 0.f});
    }
    KernelArgs b_from_a() const { return KernelArgs(*prg, {b, a}, {2}); }
    KernelArgs a_from_b() const { return KernelArgs(*prg, {a, b}, {2}); }
};

}  // namespace

TEST_CASE("signal: compute and copy queues set a signal the host sees") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    Signal s = dev->new_signal(0, "test signal");
    CHECK(s.value() == 0);
    dev->compute_queue().signal(s, 1).submit();
    s.wait(1, 5s);
    CHECK(s.value() == 1);
    dev->copy_queue().signal(s, 2).submit();
    s.wait(2, 5s);
    CHECK(s.value() == 2);
    // The timeline protocol.
    uint64_t v = dev->next_timeline();
    dev->compute_queue().wait(dev->timeline(), v - 1).signal(dev->timeline(), v).submit();
    dev->synchronize();
    CHECK(dev->timeline().value() == v);
}

TEST_CASE("signal: values patched in place between submissions") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    Signal s = dev->new_signal(0, "s"), other = dev->new_signal(0, "other");
    auto q = dev->compute_queue();
    q.signal(s, 1);
    CommandId id = q.last();
    q.submit();
    s.wait(1, 5s);
    q.update_signal_value(id, 5);
    q.submit();
    s.wait(5, 5s);
    CHECK(s.value() == 5);
    q.update_signal(id, other, 7);
    q.submit();
    other.wait(7, 5s);
    CHECK(other.value() == 7);
    CHECK(s.value() == 5);
    // An id of the wrong kind is refused.
    CHECK_THROWS_AS(q.update_wait_value(id, 1), std::logic_error);
    CHECK_THROWS_AS(q.update_signal_value(CommandId(99), 1), std::logic_error);
}

TEST_CASE("wait: a queue waits on a signal the host already set") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    Signal s = dev->new_signal(0, "gate");
    s.set(1);
    uint64_t v = dev->next_timeline();
    dev->compute_queue().wait(s, 1).signal(dev->timeline(), v).submit();
    dev->synchronize(5s);
    CHECK(dev->timeline().value() >= v);
}

TEST_CASE("wait: set late by the host, after a host wait timed out") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    for (bool copy : {false, true}) {
        Signal gate = dev->new_signal(0, "gate"), done = dev->new_signal(0, "done");
        if (copy) {
            dev->copy_queue().wait(gate, 1).signal(done, 1).submit();
        } else {
            dev->compute_queue().wait(gate, 1).signal(done, 1).submit();
        }
        CHECK_THROWS_AS(done.wait(1, 100ms), TimeoutError);
        CHECK(done.value() == 0);
        gate.set(1);
        done.wait(1, 5s);
        CHECK(done.value() == 1);
    }
    CHECK_FALSE(dev->failed());  // a host wait that times out is not a device hang
}

TEST_CASE("wait: signal and value patched in place") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    Signal a = dev->new_signal(0, "a"), b = dev->new_signal(0, "b"), done = dev->new_signal(0, "done");
    auto q = dev->compute_queue();
    q.wait(a, 1);
    CommandId w = q.last();
    q.signal(done, 1);
    CommandId sig = q.last();
    q.update_wait(w, b, 3);
    q.submit();
    a.set(10);  // the old signal must not release it any more
    CHECK_THROWS_AS(done.wait(1, 50ms), TimeoutError);
    b.set(3);
    done.wait(1, 5s);
    q.update_wait_value(w, 4);
    q.update_signal_value(sig, 2);
    q.submit();
    CHECK_THROWS_AS(done.wait(2, 50ms), TimeoutError);
    b.set(4);
    done.wait(2, 5s);
}

TEST_CASE("exec: one kernel computes b = a + 1") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    AddOne f(test::open_device(name));
    uint64_t v = f.dev->next_timeline();
    f.dev->compute_queue().wait(f.dev->timeline(), v - 1).exec(*f.prg, f.b_from_a(), {1}, {2}).signal(f.dev->timeline(), v).submit();
    auto b = download<float>(*f.dev, f.b, 2);
    CHECK(b[0] == 1.f);
    CHECK(b[1] == 2.f);
}

TEST_CASE("exec: two kernels recorded once, resubmitted 100 times with patched timeline values") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    AddOne f(test::open_device(name));
    Device& dev = *f.dev;
    auto q = dev.compute_queue();
    q.wait(dev.timeline(), dev.timeline_value() - 1);
    CommandId w = q.last();
    q.exec(*f.prg, f.b_from_a(), {1}, {2}).exec(*f.prg, f.a_from_b(), {1}, {2}).signal(dev.timeline(), 0);
    CommandId s = q.last();
    for (int i = 0; i < 100; ++i) {
        uint64_t v = dev.next_timeline();
        q.update_wait_value(w, v - 1);
        q.update_signal_value(s, v);
        q.submit();
    }
    auto a = download<float>(dev, f.a, 2);
    CHECK(a[0] == 200.f);
    CHECK(a[1] == 201.f);
}

TEST_CASE("exec: launch dimensions patched in place") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    AddOne f(test::open_device(name));
    Device& dev = *f.dev;
    auto q = dev.compute_queue();
    uint64_t v = dev.next_timeline();
    q.wait(dev.timeline(), v - 1).exec(*f.prg, f.b_from_a(), {2}, {1});
    CommandId e = q.last();
    q.update_exec_dims(e, {1}, {1});  // only b[0]
    q.signal(dev.timeline(), v).submit();
    auto b = download<float>(dev, f.b, 2);
    CHECK(b[0] == 1.f);
    CHECK(b[1] == 0.f);
    CHECK_THROWS_AS(q.update_exec_dims(e, {1}, {0}), std::invalid_argument);
    CHECK_THROWS_AS(q.update_exec_dims(e, {1}, {4096}), std::invalid_argument);
}

TEST_CASE("exec: block sizes patched per submission write exactly x*y*z items") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    auto prg = test::load_kernel(*dev, "count_items", "count_items");
    Buffer out = dev->allocate(27 * 4);
    auto q = dev->compute_queue();
    q.wait(dev->timeline(), 0);
    CommandId w = q.last();
    q.exec(*prg, KernelArgs(*prg, {out}, {3, 3, 1}), {1, 1, 1}, {3, 3, 3});
    CommandId e = q.last();
    q.signal(dev->timeline(), 0);
    CommandId s = q.last();
    std::mt19937 rng(7);
    for (int i = 0; i < 40; ++i) {
        uint32_t x = 1 + rng() % 3, y = 1 + rng() % 3, z = 1 + rng() % 3;
        upload(*dev, out, std::vector<uint32_t>(27, 0));
        uint64_t v = dev->next_timeline();
        q.update_wait_value(w, v - 1);
        q.update_exec_dims(e, {1, 1, 1}, {x, y, z});
        q.update_exec_value(e, 2, uint32_t(i + 1));
        q.update_signal_value(s, v);
        q.submit();
        auto got = download<uint32_t>(*dev, out, 27);
        uint32_t written = 0;
        for (uint32_t k = 0; k < 27; ++k) {
            uint32_t lx = k % 3, ly = k / 3 % 3, lz = k / 9;
            bool inside = lx < x && ly < y && lz < z;
            written += got[k] == uint32_t(i + 1);
            REQUIRE(got[k] == (inside ? uint32_t(i + 1) : 0u));
        }
        CHECK(written == x * y * z);
    }
}

TEST_CASE("exec: many workgroups run on the thread pool") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    auto prg = test::load_kernel(*dev, "add_one", "add_one");
    const uint32_t n = 100'003;
    Buffer a = dev->allocate(n * 4), b = dev->allocate(n * 4);
    std::vector<float> host(n);
    for (uint32_t i = 0; i < n; ++i) host[i] = float(i % 1000);
    upload(*dev, a, host);
    uint64_t v = dev->next_timeline();
    dev->compute_queue().wait(dev->timeline(), v - 1).exec(*prg, KernelArgs(*prg, {b, a}, {n}), {(n + 63) / 64}, {64}).signal(dev->timeline(), v).submit();
    auto got = download<float>(*dev, b, n);
    REQUIRE(test::first_difference(got, [&](size_t i) { return host[i] + 1.f; }) == "");
}

TEST_CASE("exec: arguments patched in place (buffers and values)") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    auto prg = test::load_kernel(*dev, "fill", "fill");
    Buffer x = dev->allocate(64), y = dev->allocate(64);
    upload(*dev, x, std::vector<uint32_t>(16, 0));
    upload(*dev, y, std::vector<uint32_t>(16, 0));
    auto q = dev->compute_queue();
    uint64_t v = dev->next_timeline();
    q.wait(dev->timeline(), v - 1);
    CommandId w = q.last();
    q.exec(*prg, KernelArgs(*prg, {x}, {16, 11}), {1}, {16});
    CommandId e = q.last();
    q.signal(dev->timeline(), v);
    CommandId s = q.last();
    q.submit();
    q.update_exec_buffer(e, 0, y);
    q.update_exec_value(e, 0, 8);   // n
    q.update_exec_value(e, 1, 22);  // value
    v = dev->next_timeline();
    q.update_wait_value(w, v - 1);
    q.update_signal_value(s, v);
    q.submit();
    auto gx = download<uint32_t>(*dev, x, 16), gy = download<uint32_t>(*dev, y, 16);
    CHECK(gx == std::vector<uint32_t>(16, 11));
    for (int i = 0; i < 16; ++i) CHECK(gy[i] == (i < 8 ? 22u : 0u));
    CHECK_THROWS_AS(q.update_exec_value(e, 2, 0), std::out_of_range);
    CHECK_THROWS_AS(q.update_exec_buffer(e, 1, x), std::out_of_range);
    CHECK_THROWS_AS(q.update_exec_value(s, 0, 0), std::logic_error);
}

TEST_CASE("bind: a bound queue is submitted many times with patched values") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    Signal gate = dev->new_signal(0, "gate"), done = dev->new_signal(0, "done");
    auto q = dev->compute_queue();
    q.wait(gate, 1);
    CommandId w = q.last();
    q.signal(done, 1);
    CommandId s = q.last();
    q.bind();
    CHECK(q.bound());
    CHECK_THROWS_AS(q.signal(done, 3), std::logic_error);  // no recording into a bound queue
    for (uint64_t i = 1; i <= 50; ++i) {
        q.update_wait_value(w, i);
        q.update_signal_value(s, i);
        q.submit();
        gate.set(i);
        done.wait(i, 5s);
    }
    CHECK(done.value() == 50);
    // Patching waits until the device finished the previous submission of the bound commands.
    q.update_wait_value(w, 100);
    q.update_signal_value(s, 100);
    q.submit();
    CHECK_THROWS_AS(done.wait(100, 30ms), TimeoutError);
    std::thread setter([&] {
        std::this_thread::sleep_for(50ms);
        gate.set(100);
    });
    auto t0 = std::chrono::steady_clock::now();
    q.update_signal_value(s, 101);  // blocks until the submission above ran
    auto waited = std::chrono::steady_clock::now() - t0;
    setter.join();
    CHECK(done.value() == 100);
    CHECK(waited >= 20ms);
    q.submit();
    done.wait(101, 5s);
    q.reset();
    CHECK_FALSE(q.bound());
    q.signal(done, 102).submit();
    done.wait(102, 5s);
}

TEST_CASE("copy: small, patched, long and unaligned copies on the copy queue") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    SECTION("8 bytes") {
        Buffer a = dev->allocate(8), b = dev->allocate(8);
        upload(*dev, a, std::vector<float>{0.f, 1.f});
        uint64_t v = dev->next_timeline();
        dev->copy_queue().wait(dev->timeline(), v - 1).copy(b, a, 8).signal(dev->timeline(), v).submit();
        CHECK(download<float>(*dev, b, 2)[1] == 1.f);
    }
    SECTION("64 MiB, and with patched addresses") {
        const size_t n = 64u << 20;
        Buffer a = dev->allocate(n), b = dev->allocate(n), c = dev->allocate(n);
        std::vector<uint64_t> host(n / 8);
        for (size_t i = 0; i < host.size(); ++i) host[i] = i * 0x9e3779b97f4a7c15ull;
        upload(*dev, a, host);
        auto q = dev->copy_queue();
        uint64_t v = dev->next_timeline();
        q.wait(dev->timeline(), v - 1).copy(b, a, n);
        CommandId cp = q.last();
        q.signal(dev->timeline(), v);
        CommandId s = q.last();
        q.submit();
        CHECK(download<uint64_t>(*dev, b, host.size()) == host);
        v = dev->next_timeline();
        q.update_copy(cp, c.address(), b.address(), n);
        q.update_wait_value(CommandId(0), v - 1);
        q.update_signal_value(s, v);
        q.submit();
        CHECK(download<uint64_t>(*dev, c, host.size()) == host);
    }
    SECTION("unaligned offsets and sizes") {
        Buffer a = dev->allocate(4096), b = dev->allocate(4096);
        std::vector<uint8_t> host(4096);
        for (size_t i = 0; i < host.size(); ++i) host[i] = uint8_t(i * 7 + 3);
        upload(*dev, a, host);
        upload(*dev, b, std::vector<uint8_t>(4096, 0));
        uint64_t v = dev->next_timeline();
        dev->copy_queue().wait(dev->timeline(), v - 1).copy(b.view(13, 1001), a.view(7, 1001), 1001).signal(dev->timeline(), v).submit();
        auto got = download<uint8_t>(*dev, b, 4096);
        for (size_t i = 0; i < 4096; ++i) REQUIRE(got[i] == (i >= 13 && i < 1014 ? host[i - 13 + 7] : 0));
        CHECK_THROWS_AS(dev->copy_queue().copy(b, a.view(0, 10), 11), std::out_of_range);
    }
}

TEST_CASE("copy: 256 one-byte copies land in order; copies inside one queue are ordered") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    Buffer src = dev->allocate(256, {.host = true}), mid = dev->allocate(256), dst = dev->allocate(256);
    upload(*dev, mid, std::vector<uint8_t>(256, 0));
    upload(*dev, dst, std::vector<uint8_t>(256, 0));
    auto q = dev->copy_queue();
    uint64_t v = dev->next_timeline();
    q.wait(dev->timeline(), v - 1);
    for (uint32_t i = 0; i < 256; ++i) {
        // host buffer -> device, then device -> device in the same queue: the second must see the first.
        q.copy(mid.view(i, 1), src.view(i, 1), 1).copy(dst.view(i, 1), mid.view(i, 1), 1);
    }
    q.signal(dev->timeline(), v);
    auto bytes = src.as<uint8_t>();
    for (uint32_t i = 0; i < 256; ++i) bytes[i] = uint8_t(255 - i);
    q.submit();
    auto got = download<uint8_t>(*dev, dst, 256);
    for (uint32_t i = 0; i < 256; ++i) REQUIRE(got[i] == uint8_t(255 - i));
}

TEST_CASE("timestamps: ordered, and a kernel's device time is within its host time") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    AddOne f(test::open_device(name));
    Device& dev = *f.dev;
    Signal s0 = dev.new_signal(0, "t0"), s1 = dev.new_signal(0, "t1");
    uint64_t v = dev.next_timeline();
    uint64_t h0 = host_now_ns();
    dev.compute_queue().wait(dev.timeline(), v - 1).timestamp(s0).exec(*f.prg, f.b_from_a(), {1}, {2}).timestamp(s1).signal(dev.timeline(), v).submit();
    dev.synchronize();
    uint64_t h1 = host_now_ns();
    REQUIRE(s0.timestamp() != 0);
    CHECK(s1.timestamp() >= s0.timestamp());
    double device_ns = double(s1.timestamp() - s0.timestamp()) * 1e9 / double(dev.timestamp_frequency());
    CHECK(device_ns <= double(h1 - h0));
    // A copy's duration by device timestamps is positive and within its host time.
    const size_t n = 64u << 20;
    Buffer a = dev.allocate(n), b = dev.allocate(n);
    v = dev.next_timeline();
    h0 = host_now_ns();
    dev.copy_queue().wait(dev.timeline(), v - 1).timestamp(s0).copy(b, a, n).timestamp(s1).signal(dev.timeline(), v).submit();
    dev.synchronize();
    h1 = host_now_ns();
    double copy_ns = double(s1.timestamp() - s0.timestamp()) * 1e9 / double(dev.timestamp_frequency());
    CHECK(copy_ns > 0);
    CHECK(copy_ns <= double(h1 - h0));
    // (No bandwidth threshold: speed is the benchmarks' business, and sanitizer builds are slow.)
}

TEST_CASE("memory_barrier: host writes are seen by the next kernel and the next copy") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    auto prg = test::load_kernel(*dev, "fill", "copy_words");
    Buffer host = dev->allocate(4, {.cpu_access = true}), out = dev->allocate(4), out2 = dev->allocate(4);
    auto word = host.as<uint32_t>();
    for (uint32_t i = 1; i < 256; ++i) {
        word[0] = i;
        uint64_t v = dev->next_timeline();
        dev->compute_queue().wait(dev->timeline(), v - 1).memory_barrier().exec(*prg, KernelArgs(*prg, {out, host}, {1}), {1}, {1}).signal(dev->timeline(), v).submit();
        REQUIRE(download<uint32_t>(*dev, out, 1)[0] == i);
        word[0] = i + 1000;
        v = dev->next_timeline();
        dev->compute_queue().wait(dev->timeline(), v - 1).memory_barrier().signal(dev->timeline(), v).submit();
        uint64_t v2 = dev->next_timeline();
        dev->copy_queue().wait(dev->timeline(), v2 - 1).copy(out2, host, 4).signal(dev->timeline(), v2).submit();
        REQUIRE(download<uint32_t>(*dev, out2, 1)[0] == i + 1000);
    }
}

TEST_CASE("ordering: a copy queue waits for a compute queue submitted after it") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    auto prg = test::load_kernel(*dev, "fill", "fill");
    Buffer a = dev->allocate(4096), b = dev->allocate(4096);
    Signal kernel_done = dev->new_signal(0, "kernel done"), copy_done = dev->new_signal(0, "copy done");
    for (uint32_t round = 1; round <= 20; ++round) {
        dev->copy_queue().wait(kernel_done, round).copy(b, a, 4096).signal(copy_done, round).submit();
        std::this_thread::yield();
        dev->compute_queue().exec(*prg, KernelArgs(*prg, {a}, {1024, round}), {16}, {64}).signal(kernel_done, round).submit();
        copy_done.wait(round, 5s);
        REQUIRE(download<uint32_t>(*dev, b, 1024) == std::vector<uint32_t>(1024, round));
    }
}

TEST_CASE("submission: empty queues, many submits in flight, and 1000 execs in one submission") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    auto prg = test::load_kernel(*dev, "fill", "fill");
    SECTION("an empty queue submits nothing") {
        auto q = dev->compute_queue();
        q.submit();
        auto c = dev->copy_queue();
        c.submit();
        dev->synchronize();
        CHECK_THROWS_AS(q.last(), std::logic_error);
    }
    SECTION("1000 submissions without waiting, each signalling the timeline") {
        Buffer b = dev->allocate(4);
        for (uint32_t i = 1; i <= 1000; ++i) {
            uint64_t v = dev->next_timeline();
            dev->compute_queue().wait(dev->timeline(), v - 1).exec(*prg, KernelArgs(*prg, {b}, {1, i}), {1}, {1}).signal(dev->timeline(), v).submit();
        }
        dev->synchronize();
        CHECK(download<uint32_t>(*dev, b, 1)[0] == 1000);
    }
    SECTION("1000 execs with signal -> wait between them in one submission") {
        Signal s = dev->new_signal(0, "chain");
        Buffer b = dev->allocate(4 * 1000);
        auto q = dev->compute_queue();
        for (uint32_t i = 0; i < 1000; ++i) {
            if (i) q.wait(s, i);
            Buffer slot = b.view(4 * i, 4);
            q.exec(*prg, KernelArgs(*prg, {slot}, {1, i + 1}), {1}, {1}).signal(s, i + 1);
        }
        q.submit();
        s.wait(1000, 10s);
        auto got = download<uint32_t>(*dev, b, 1000);
        for (uint32_t i = 0; i < 1000; ++i) REQUIRE(got[i] == i + 1);
    }
    SECTION("the same copy queue resubmitted 1000 times: each submission keeps the values it was submitted with") {
        // Submission i waits for gate >= i, then sets s = i. All 1000 are queued before the
        // gate moves, with the recorded commands patched in between: if a later patch reached
        // an earlier submission, s would run ahead of the gate or never get there.
        Signal gate = dev->new_signal(0, "gate"), s = dev->new_signal(0, "copy count");
        auto q = dev->copy_queue();
        q.wait(gate, 0);
        CommandId w = q.last();
        q.signal(s, 0);
        CommandId id = q.last();
        for (uint64_t i = 1; i <= 1000; ++i) {
            q.update_wait_value(w, i);
            q.update_signal_value(id, i);
            q.submit();
        }
        CHECK_FALSE(s.try_wait(1, 20ms));
        for (uint64_t i = 1; i <= 1000; ++i) {
            gate.set(i);
            s.wait(i, 5s);
            REQUIRE(s.value() == i);  // submission i + 1 still waits for the gate
        }
    }
}

TEST_CASE("ring wrap-around: a tiny ring with thousands of submissions and back-pressure") {
    auto name = HCQ_DEVICE_NAME();
    std::string small = test::with_options(name, "ring=4096");
    if (small.empty()) {
        WARN("skipped: " << name << " takes no ring option");
        return;
    }
    INFO("device " << small);
    auto dev = test::open_device(small);
    auto prg = test::load_kernel(*dev, "fill", "fill");
    Buffer b = dev->allocate(4 * 64);
    Signal gate = dev->new_signal(0, "gate");
    // Blocked behind a wait, the ring fills; submit must block (not overwrite) until it drains.
    dev->compute_queue().wait(gate, 1).submit();
    std::thread opener([&] {
        std::this_thread::sleep_for(30ms);
        gate.set(1);
    });
    const uint32_t rounds = test::long_run() ? 20000 : 3000;
    for (uint32_t i = 1; i <= rounds; ++i) {
        uint64_t v = dev->next_timeline();
        Buffer slot = b.view(4 * (i % 64), 4);
        dev->compute_queue().wait(dev->timeline(), v - 1).exec(*prg, KernelArgs(*prg, {slot}, {1, i}), {1}, {1}).signal(dev->timeline(), v).submit();
    }
    opener.join();
    dev->synchronize();
    auto got = download<uint32_t>(*dev, b, 64);
    for (uint32_t slot = 0; slot < 64; ++slot) {
        uint32_t last = rounds - ((rounds - slot) % 64);  // the last i with i % 64 == slot
        REQUIRE(got[slot] == last);
    }
    // More commands than the ring holds: refused unbound, accepted bound.
    auto big = dev->compute_queue();
    Signal s = dev->new_signal(0, "big");
    for (int i = 0; i < 400; ++i) big.signal(s, uint64_t(i + 1));
    REQUIRE(big.bytes() > 4096);
    CHECK_THROWS_AS(big.submit(), UnsupportedError);
    big.bind();
    big.submit();
    s.wait(400, 5s);
}

TEST_CASE("multi-device: a queue on one device waits on a signal another device's queue sets") {
    auto name = HCQ_DEVICE_NAME();
    std::string peer = test::peer_of(name);
    if (peer.empty()) {
        WARN("skipped: no peer device for " << name);
        return;
    }
    INFO("devices " << name << " and " << peer);
    auto d0 = test::open_device(name);
    auto d1 = test::open_device(peer);
    REQUIRE(d0.get() != d1.get());
    Signal s0 = d0->new_signal(0, "d0 signal"), s1 = d1->new_signal(0, "d1 signal");
    // d1's queue really waits: d0's signal is held back by a gate, and nothing reaches s1.
    Signal gate = d0->new_signal(0, "gate");
    d1->copy_queue().wait(s0, 1).signal(s1, 1).submit();
    d0->copy_queue().wait(gate, 1).signal(s0, 1).submit();
    CHECK_FALSE(s1.try_wait(1, 30ms));
    gate.set(1);
    s1.wait(1, 5s);
    for (uint64_t i = 2; i <= 100; ++i) {
        d1->copy_queue().wait(s0, i).signal(s1, i).submit();
        d0->copy_queue().signal(s0, i).submit();
        s1.wait(i, 5s);
    }
    // Compute queues waiting on each other's timelines; d1 cannot finish before d0 does.
    Signal gate0 = d0->new_signal(0, "gate 0");
    uint64_t v0 = d0->next_timeline();
    d0->compute_queue().wait(gate0, 1).wait(d1->timeline(), d1->timeline_value() - 1).signal(d0->timeline(), v0).submit();
    uint64_t v1 = d1->next_timeline();
    d1->compute_queue().wait(d0->timeline(), v0).signal(d1->timeline(), v1).submit();
    CHECK_FALSE(d1->timeline().try_wait(v1, 30ms));
    gate0.set(1);
    d1->synchronize();
    d0->synchronize();
    CHECK(d1->timeline().value() == v1);
}

TEST_CASE("signals are 64-bit end to end: waits and signals across 2^32 and up to 2^64-1") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    Signal s = dev->new_signal((1ull << 32) - 20, "wide"), done = dev->new_signal(0, "done");
    for (int kind = 0; kind < 2; ++kind) {
        // 40 rounds across the 32-bit boundary on each queue type (tinygrad's rollover test).
        for (uint64_t v = (1ull << 32) - 20; v < (1ull << 32) + 20; ++v) {
            if (kind == 0) {
                dev->compute_queue().wait(s, v).signal(s, v + 1).signal(done, v + 1).submit();
            } else {
                dev->copy_queue().wait(s, v).signal(s, v + 1).signal(done, v + 1).submit();
            }
            done.wait(v + 1, std::chrono::seconds(5));
        }
        s.set((1ull << 32) - 20);
    }
    // A wait for 2^32 + 1 is not satisfied by 1 (no truncation to 32 bits).
    Signal low = dev->new_signal(1, "low"), out = dev->new_signal(0, "out");
    dev->compute_queue().wait(low, (1ull << 32) + 1).signal(out, 1).submit();
    CHECK_FALSE(out.try_wait(1, 30ms));
    // As far ahead as the device's compare reaches: 2^64 - 1 for an unsigned one, 2^32 + 1 + 2^63 - 1 for a circular one.
    const uint64_t top = dev->limits().circular_waits ? (1ull << 32) + (1ull << 63) : ~0ull;
    low.set(top);
    out.wait(1, 5s);
    CHECK(low.value() == top);
}

TEST_CASE("copy: sizes across 4 GiB (BAREGPU_LONG=full)") {
    auto name = HCQ_DEVICE_NAME();
    if (!test::long_run()) {
        WARN("skipped: set BAREGPU_LONG=full");
        return;
    }
    INFO("device " << name);
    auto dev = test::open_device(name);
    const uint64_t g4 = uint64_t{4} << 30, big = g4 + 8;
    if (dev->limits().memory_bytes < 2 * big + (1ull << 30)) {
        WARN("skipped: " << name << " has too little memory for two 4 GiB buffers");
        return;
    }
    Buffer a = dev->allocate(big), b = dev->allocate(big);
    auto pa = a.bytes(), pb = b.bytes();
    for (uint64_t size : {g4 - 8, g4, g4 + 8}) {
        INFO("size " << size);
        // Marks near the ends and the 4 GiB boundary.
        for (uint64_t at : {uint64_t{0}, g4 - 9, g4 - 1, size - 1}) pa[at] = std::byte(uint8_t(at * 31 + size));
        pb[size - 1] = std::byte{0};
        if (size < big) pa[size] = ~pb[size];
        uint64_t v = dev->next_timeline();
        dev->copy_queue().wait(dev->timeline(), v - 1).copy(b, a, size).signal(dev->timeline(), v).submit();
        dev->synchronize(std::chrono::seconds(60));
        for (uint64_t at : {uint64_t{0}, g4 - 9, g4 - 1, size - 1}) {
            if (at < size) REQUIRE(pb[at] == pa[at]);
        }
        if (size < big) CHECK(pb[size] != pa[size]);  // nothing beyond the size
    }
}
