// sim-nv:ad102 as an HCQ device: the whole stack — GSP boot, RM over GSP RPC, GPFIFO
// channels the RM model announced to the engines — seen from the HCQ API: a channel's MMU fault
// comes back from GSP-RM and fails the device naming the queue, the channel and the address; a full
// GPFIFO makes submit() wait for GPGet instead of overwriting an entry the GPU has not fetched.
// sim-nvrm:ad102, the same stack over nvidia.ko's ioctls: a fault comes back through the channel's error
// notifier and nvidia.ko's Xid line (the VA), and a freed buffer is unmapped by RM.
#include "base/error.hpp"
#include "drivers/registry.hpp"
#include "hcq/device.hpp"
#include "hcq/queue.hpp"
#include "hcq/registry.hpp"
#include "hcq/signal.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <fmt/format.h>
#include <chrono>
#include <mutex>
#include <thread>

namespace hcq_nv_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

std::shared_ptr<hcq::Device> open(const std::string& name) {
    static std::once_flag once;
    std::call_once(once, [] { registry::register_backends(hcq::registry()); });
    return hcq::open_device(name);
}

}  // namespace

TEST_CASE("sim-nv: a copy from an unmapped VA is an MMU fault GSP-RM reports; the device error names queue, channel and VA") {
    auto dev = open("sim-nv:ad102");
    hcq::Buffer b = dev->allocate(4096);
    hcq::Signal done = dev->new_signal(0, "done");
    const GpuVirtualAddress bad(0x1f00000000);  // inside the HCQ VA window, never mapped
    dev->copy_queue().copy(b.address(), bad, 256).signal(done, 1).submit();
    try {
        done.wait(1, 5s);
        FAIL("the faulting copy signalled");
    } catch (const DeviceLostError& e) {
        const std::string text = e.what();
        CHECK_THAT(text, Contains("0x1f00000000") && Contains("page fault") && Contains("copy:0") && Contains("channel 2") &&
                             Contains("Xid 31"));
    }
    CHECK(dev->failed());
}

TEST_CASE("sim-nv: a full GPFIFO makes submit wait for GPGet and never overwrites an unfetched entry") {
    auto dev = open("sim-nv:ad102?gpfifo_entries=4");
    hcq::Signal gate = dev->new_signal(0, "gate");
    constexpr int kSubmissions = 8;
    std::vector<hcq::Signal> marks;
    for (int i = 0; i < kSubmissions; ++i) marks.push_back(dev->new_signal(0, "mark"));
    // The first submission blocks the channel on the gate: its GP entry stays unfetched past.
    dev->compute_queue().wait(gate, 1).signal(marks[0], 1).submit();
    std::atomic<int> submitted{1};
    std::thread submitter([&] {
        for (int i = 1; i < kSubmissions; ++i) {
            dev->compute_queue().signal(marks[i], 1).submit();
            submitted = i + 1;
        }
    });
    // 4 entries: at most 3 outstanding (put == GPGet is empty), so submit number 4 waits. The
    // submitter gets there in its own time (bounded: a loaded machine), and stays there.
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (submitted.load() < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(200ms);
    CHECK(submitted.load() == 3);
    for (auto& m : marks) CHECK(m.value() == 0);
    gate.set(1);
    submitter.join();
    CHECK(submitted.load() == kSubmissions);
    for (int i = 0; i < kSubmissions; ++i) {
        INFO("submission " << i);
        CHECK(marks[i].try_wait(1, 5s));  // every submission ran: none was overwritten
    }
    CHECK_FALSE(dev->failed());
}

TEST_CASE("sim-nvrm: a copy from an unmapped VA faults; nvidia.ko's error notifier and Xid line fail the device naming the VA") {
    auto dev = open("sim-nvrm:ad102");
    hcq::Buffer b = dev->allocate(4096);
    hcq::Signal done = dev->new_signal(0, "done");
    const GpuVirtualAddress bad(0x1f00000000);  // inside the HCQ VA window, never mapped by RM
    dev->copy_queue().copy(b.address(), bad, 256).signal(done, 1).submit();
    try {
        done.wait(1, 5s);
        FAIL("the faulting copy signalled");
    } catch (const DeviceLostError& e) {
        const std::string text = e.what();
        CHECK_THAT(text, Contains("nvidia.ko") && Contains("error notifier: Xid 31") && Contains("copy:0") &&
                             Contains("NVRM: Xid") && Contains("0x1f00000000") && Contains("page fault"));
    }
    CHECK(dev->failed());
}

TEST_CASE("sim-nvrm: freeing a buffer has RM unmap it — a later access faults at its address") {
    auto dev = open("sim-nvrm:ad102");
    hcq::Buffer keep = dev->allocate(4096, {.cpu_access = true});
    GpuVirtualAddress gone;
    {
        hcq::Buffer b = dev->allocate(0x10000, {.cpu_access = true});
        std::memset(b.cpu(), 0x5a, 0x10000);
        gone = b.address();
        hcq::Signal ok = dev->new_signal(0, "ok");
        dev->copy_queue().copy(keep.address(), gone, 256).signal(ok, 1).submit();
        REQUIRE(ok.try_wait(1, 5s));
        CHECK(std::to_integer<int>(keep.cpu()[255]) == 0x5a);  // the engines read what the CPU wrote
    }
    hcq::Signal done = dev->new_signal(0, "done");
    dev->copy_queue().copy(keep.address(), gone, 256).signal(done, 1).submit();
    CHECK_THROWS_WITH(done.wait(1, 5s), Contains(fmt::format("{:#x}", gone.value())) && Contains("Xid 31"));
}

TEST_CASE("sim-nvrm:h100: Hopper's classes over nvidia.ko 580, its shared memory, and waits that compare circularly") {
    auto dev = open("sim-nvrm:h100?vram=256M");
    // CUDA C++ Programming Guide, compute capability 9.0: 227 KiB of shared memory per block.
    CHECK(dev->limits().max_shared_bytes == 227u * 1024);
    CHECK(dev->limits().circular_waits);
    CHECK(open("sim-nvrm:ad102?vram=256M")->limits().max_shared_bytes == 99u * 1024);
}

}  // namespace hcq_nv_test
