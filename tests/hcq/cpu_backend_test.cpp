// The CPU backend's command processor behaves like a GPU's: it refuses what a GPU's command
// processor or MMU would refuse (writes to read-only pages, packets that disagree with the
// program they launch, malformed ring packets) by faulting the device, never the process.
// Packets are forged through the engine interface the common queue code uses.
#include "base/error.hpp"
#include "drivers/cpu/cpu_device.hpp"
#include "drivers/cpu/cpu_program.hpp"
#include "drivers/hostcode/kernel_abi.h"
#include "drivers/cpu/packets.hpp"
#include "drivers/cpu/wake_word.hpp"
#include "hcq/clock.hpp"
#include "hcq/engine.hpp"
#include "tests/hcq/support.hpp"

#include <atomic>
#include <cstddef>
#include <cstring>
#include <elf.h>
#include <thread>
#include <vector>

using namespace baregpu;
using namespace baregpu::hcq;
using namespace std::chrono_literals;

namespace {

// Waits (up to 5 s) for the device to fail from the fault and returns its failure text.
std::string fault_of(Device& dev) {
    for (int i = 0; i < 5000 && !dev.failed(); ++i) std::this_thread::sleep_for(1ms);
    return dev.failed() ? dev.failure() : "(no fault)";
}

Engine& engine_of(const Queue& q) { return const_cast<Engine&>(q.engine()); }

}  // namespace

TEST_CASE("cpu: packets may read program code, and a packet that writes it faults the device") {
    auto dev = test::open_device("cpu");
    auto prg = test::load_kernel(*dev, "fill", "fill");
    GpuVirtualAddress code(static_cast<const cpu::CpuProgram&>(*prg).entry());
    Buffer out = dev->allocate(16, {.host = true});
    Signal done = dev->new_signal(0, "done");
    dev->copy_queue().copy(out.address(), code, 16).signal(done, 1).submit();  // reading code is fine
    done.wait(1, 5s);
    CHECK(std::memcmp(out.cpu(), reinterpret_cast<const void*>(code.value()), 16) == 0);

    dev->copy_queue().copy(code, out.address(), 16).submit();
    std::string fault = fault_of(*dev);
    CHECK_THAT(fault, Catch::Contains("page fault") && Catch::Contains("read-only") && Catch::Contains(code.hex()));
    // The kernel's code is intact: the packet never ran.
    auto other = test::open_device("cpu:1");
    Buffer b = other->allocate(64, {.host = true});
    Signal ok = other->new_signal(0, "ok");
    auto fill = test::load_kernel(*other, "fill", "fill");
    other->compute_queue().exec(*fill, KernelArgs(*fill, {b}, {16, 3}), {1}, {16}).signal(ok, 1).submit();
    ok.wait(1, 5s);
    CHECK(b.as<uint32_t>()[15] == 3);
}

TEST_CASE("cpu: a kernel's buffer argument that is not mapped faults the device, naming it; recover() brings it back") {
    auto dev = test::open_device("cpu");
    auto fill = test::load_kernel(*dev, "fill", "fill");
    Signal done = dev->new_signal(0, "done");
    KernelArgs args(*fill);
    args.address(0, GpuVirtualAddress(0x30000beef000)).value(0, 64).value(1, 1);
    dev->compute_queue().exec(*fill, args, {1}, {64}).signal(done, 1).submit();
    CHECK_THROWS_AS(done.wait(1, 5s), DeviceLostError);
    CHECK_THAT(dev->failure(), Catch::Contains("buffer argument 0") && Catch::Contains("0x30000beef000") &&
                                   Catch::Contains("not mapped"));
    CHECK_THROWS_AS(dev->allocate(64), DeviceLostError);
    // Freed memory is unmapped memory too.
    dev->recover();
    CHECK_FALSE(dev->failed());
    GpuVirtualAddress freed;
    {
        Buffer gone = dev->allocate(4096, {.host = true});
        freed = gone.address();
    }
    dev->synchronize();
    args.address(0, freed);
    Signal again = dev->new_signal(0, "again");
    dev->compute_queue().exec(*fill, args, {1}, {64}).signal(again, 1).submit();
    CHECK_THROWS_AS(again.wait(1, 5s), DeviceLostError);
    dev->recover();
    // The recovered device runs work again.
    Buffer b = dev->allocate(64 * 4, {.host = true});
    Signal ok = dev->new_signal(0, "ok");
    dev->compute_queue().exec(*fill, KernelArgs(*fill, {b}, {64, 7}), {1}, {64}).signal(ok, 1).submit();
    ok.wait(1, 5s);
    CHECK(b.as<uint32_t>()[63] == 7);
}

TEST_CASE("cpu: an exec packet that disagrees with its program, or whose dimensions wrap, faults") {
    SECTION("kernel arguments of another size than the program was loaded with") {
        auto dev = test::open_device("cpu");
        auto prg = test::load_kernel(*dev, "fill", "fill");
        auto q = dev->compute_queue();
        CommandBuffer cmd;
        std::vector<std::byte> args(prg->info().kernarg_size + 64);
        engine_of(q).encode_exec(cmd, *prg, args, {1}, {1});
        engine_of(q).submit(cmd.bytes());
        CHECK_THAT(fault_of(*dev), Catch::Contains("the program was loaded with"));
    }
    SECTION("block dimensions whose product wraps to 76") {
        auto dev = test::open_device("cpu");
        auto prg = test::load_kernel(*dev, "fill", "fill");
        auto q = dev->compute_queue();
        CommandBuffer cmd;
        std::vector<std::byte> args(prg->info().kernarg_size);
        engine_of(q).encode_exec(cmd, *prg, args, {1}, {1050829, 130244, 4178223247u});
        engine_of(q).submit(cmd.bytes());
        CHECK_THAT(fault_of(*dev), Catch::Contains("outside the limits"));
    }
}

TEST_CASE("cpu: a wrap packet must reach the end of the ring") {
    auto dev = test::open_device("cpu");
    Signal s = dev->new_signal(0, "after");
    auto q = dev->compute_queue();
    CommandBuffer cmd;
    auto* wrap = reinterpret_cast<cpu::PacketHeader*>(cmd.append(sizeof(cpu::PacketHeader)));
    *wrap = {cpu::Opcode::wrap, 8};  // skips 8 bytes, not to the ring's end
    engine_of(q).encode_signal(cmd, s.address(), 1);
    engine_of(q).submit(cmd.bytes());
    CHECK_THAT(fault_of(*dev), Catch::Contains("does not reach the ring's end"));
    CHECK(s.value() == 0);
}

TEST_CASE("cpu: ring sizes outside 4 KiB .. 1 GiB or not a power of two are refused by create() too") {
    cpu::CpuDevice::Config config;
    for (uint64_t ring : {uint64_t{3000}, uint64_t{6000}, uint64_t{2} << 30}) {
        config.ring_bytes = ring;
        CHECK_THROWS_WITH(cpu::CpuDevice::create("cpu", config), Catch::Contains("must be a power of two"));
    }
    config.ring_bytes = 4096;
    CHECK(cpu::CpuDevice::create("cpu", config));
}

TEST_CASE("cpu: the wake word loses no wakeup with several waiters on one word") {
    // Each waiter waits for its own counter on a word shared by all (as every signal of every
    // CPU device shares one), sleeping up to 20 s at a time: a lost wakeup shows as a stall.
    cpu::WakeWord word;
    constexpr int kWaiters = 3, kRounds = 2000;
    std::atomic<uint32_t> counters[kWaiters] = {};
    std::atomic<uint32_t> acked[kWaiters] = {};
    std::vector<std::thread> waiters;
    for (int w = 0; w < kWaiters; ++w) {
        waiters.emplace_back([&, w] {
            for (uint32_t want = 1; want <= kRounds; ++want) {
                while (counters[w].load(std::memory_order_seq_cst) < want) {
                    uint32_t seen = word.prepare();
                    if (counters[w].load(std::memory_order_seq_cst) < want) word.sleep(seen, 20'000'000'000ull);
                    word.done();
                }
                acked[w].store(want, std::memory_order_seq_cst);
            }
        });
    }
    uint64_t t0 = host_now_ns();
    for (uint32_t round = 1; round <= kRounds; ++round) {
        for (int w = 0; w < kWaiters; ++w) {
            counters[w].store(round, std::memory_order_seq_cst);
            word.notify_if_waiting();
        }
        // Let them all catch up (and go back to sleep) before the next round.
        for (int w = 0; w < kWaiters; ++w) {
            while (acked[w].load(std::memory_order_seq_cst) < round) {
                if (host_now_ns() - t0 > 15'000'000'000ull) break;
                std::this_thread::yield();
            }
        }
    }
    uint64_t elapsed = host_now_ns() - t0;
    for (int w = 0; w < kWaiters; ++w) counters[w].store(kRounds, std::memory_order_seq_cst);
    word.notify();
    for (auto& t : waiters) t.join();
    INFO("elapsed " << elapsed / 1'000'000 << " ms");
    CHECK(elapsed < 15'000'000'000ull);
    for (int w = 0; w < kWaiters; ++w) CHECK(acked[w].load() == uint32_t(kRounds));
}

TEST_CASE("cpu: a kernel that asks for more stack than the device gives is refused at load") {
    auto dev = test::open_device("cpu");
    auto object = test::kernel_object(*dev, "add_one");
    std::vector<std::byte> bytes(object.begin(), object.end());
    // The descriptor's private_bytes (drivers/hostcode/kernel_abi.h: at offset 84).
    auto* elf = reinterpret_cast<const Elf64_Ehdr*>(bytes.data());
    auto* sections = reinterpret_cast<const Elf64_Shdr*>(bytes.data() + elf->e_shoff);
    const char* names = reinterpret_cast<const char*>(bytes.data() + sections[elf->e_shstrndx].sh_offset);
    uint64_t descriptor = 0;
    for (unsigned i = 0; i < elf->e_shnum; ++i) {
        if (std::string(names + sections[i].sh_name) == BAREGPU_KERNEL_SECTION) descriptor = sections[i].sh_offset;
    }
    REQUIRE(descriptor != 0);
    static_assert(offsetof(baregpu_kernel_descriptor, private_bytes) == 84);
    uint32_t two_mib = 2u << 20;
    std::memcpy(bytes.data() + descriptor + offsetof(baregpu_kernel_descriptor, private_bytes), &two_mib, 4);
    CHECK_THROWS_WITH(dev->load_program(bytes, "add_one"), Catch::Contains("extra stack"));
    uint32_t one_kib = 1024;  // within the limit: loads
    std::memcpy(bytes.data() + descriptor + offsetof(baregpu_kernel_descriptor, private_bytes), &one_kib, 4);
    CHECK(dev->load_program(bytes, "add_one"));
}
