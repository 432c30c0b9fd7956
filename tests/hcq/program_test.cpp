// Acceptance: programs — metadata from the code object, launch limits, shared memory, and a
// kernel that needs the loader's GOT, call stubs, data and bss.
#include "base/error.hpp"
#include "tests/hcq/support.hpp"

using namespace baregpu;
using namespace baregpu::hcq;
using test::download;
using test::upload;

TEST_CASE("program: metadata and kernel-argument layout come from the code object") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    auto add = test::load_kernel(*dev, "add_one", "add_one");
    CHECK(add->name() == "add_one");
    CHECK(add->info().num_buffers == 2);
    CHECK(add->info().num_values == 1);
    CHECK(add->info().kernarg_size >= 20);
    CHECK(add->info().value_offset(0) == 16);
    CHECK(add->info().static_shared_bytes == 0);
    auto rev = test::load_kernel(*dev, "reverse_shared", "reverse_shared");
    CHECK(rev->info().static_shared_bytes == 1024);
    CHECK(rev->info().max_threads_per_group == 256);
    // Two kernels from one object.
    auto copy = test::load_kernel(*dev, "fill", "copy_words");
    CHECK(copy->info().max_threads_per_group == 1);
    try {
        test::load_kernel(*dev, "fill", "no_such_kernel");
        FAIL("loaded a kernel that does not exist");
    } catch (const Error& e) {
        CHECK_THAT(std::string(e.what()), Catch::Contains("no_such_kernel") && Catch::Contains("fill") && Catch::Contains("copy_words"));
    }
}

TEST_CASE("program: launches outside the kernel's or the device's limits are refused when recorded") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    auto copy = test::load_kernel(*dev, "fill", "copy_words");
    auto add = test::load_kernel(*dev, "add_one", "add_one");
    Buffer a = dev->allocate(64), b = dev->allocate(64);
    auto q = dev->compute_queue();
    CHECK_THROWS_AS(q.exec(*copy, KernelArgs(*copy, {a, b}, {1}), {1}, {2}), std::invalid_argument);  // max_threads 1
    CHECK_THROWS_AS(q.exec(*add, KernelArgs(*add, {a, b}, {1}), {1}, {0, 1, 1}), std::invalid_argument);
    CHECK_THROWS_AS(q.exec(*add, KernelArgs(*add, {a, b}, {1}), {0}, {1}), std::invalid_argument);
    // Dimensions whose product wraps around 2^64 to 76 threads: every dimension is checked.
    CHECK_THROWS_AS(q.exec(*add, KernelArgs(*add, {a, b}, {1}), {1}, {1050829, 130244, 4178223247u}), std::invalid_argument);
    CHECK_THROWS_AS(q.exec(*add, KernelArgs(*add, {a, b}, {1}), {0xffffffffu, 0xffffffffu, 0xffffffffu}, {1}), std::invalid_argument);
    CHECK_THROWS_AS(q.exec(*add, KernelArgs(*copy, {a, b}, {1}), {1}, {1}), std::invalid_argument);  // args for another kernel
    CHECK_THROWS_AS(KernelArgs(*add, {a}, {1}), std::invalid_argument);                           // wrong count
    CHECK(q.size() == 0);
    std::string peer = test::peer_of(name);
    if (!peer.empty()) {
        auto other = test::open_device(peer);
        auto foreign = test::load_kernel(*other, "add_one", "add_one");
        CHECK_THROWS_AS(q.exec(*foreign, KernelArgs(*foreign, {a, b}, {1}), {1}, {1}), std::invalid_argument);
    }
}

TEST_CASE("program: workgroup-shared memory, many groups at once") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    auto rev = test::load_kernel(*dev, "reverse_shared", "reverse_shared");
    const uint32_t groups = 512, block = 256, n = groups * block;
    Buffer src = dev->allocate(n * 4), dst = dev->allocate(n * 4);
    std::vector<uint32_t> host(n);
    for (uint32_t i = 0; i < n; ++i) host[i] = i * 2654435761u;
    upload(*dev, src, host);
    uint64_t v = dev->next_timeline();
    dev->compute_queue().wait(dev->timeline(), v - 1).exec(*rev, KernelArgs(*rev, {dst, src}), {groups}, {block}).signal(dev->timeline(), v).submit();
    auto got = download<uint32_t>(*dev, dst, n);
    for (uint32_t g = 0; g < groups; ++g) {
        for (uint32_t i = 0; i < block; ++i) REQUIRE(got[g * block + i] == host[g * block + block - 1 - i]);
    }
}

TEST_CASE("program: global data, read-only tables, bss and library calls are relocated") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    auto prg = test::load_kernel(*dev, "globals", "globals");
    Buffer out = dev->allocate(64 * 4);
    const uint32_t table[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
    for (int round = 0; round < 3; ++round) {
        uint64_t v = dev->next_timeline();
        dev->compute_queue().wait(dev->timeline(), v - 1).exec(*prg, KernelArgs(*prg, {out}, {64}), {1}, {1}).signal(dev->timeline(), v).submit();
        auto got = download<uint32_t>(*dev, out, 64);
        for (uint32_t i = 0; i < 64; ++i) REQUIRE(got[i] == table[i % 16] + 1000 * (i % 4 + 1));
    }
}

TEST_CASE("program: a dropped program's code stays until the work using it finished") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    Buffer b = dev->allocate(4);
    Signal gate = dev->new_signal(0, "gate");
    {
        auto prg = test::load_kernel(*dev, "fill", "fill");
        uint64_t v = dev->next_timeline();
        dev->compute_queue().wait(gate, 1).wait(dev->timeline(), v - 1).exec(*prg, KernelArgs(*prg, {b}, {1, 99}), {1}, {1}).signal(dev->timeline(), v).submit();
    }
    // Loading (and dropping) more programs meanwhile must not recycle the first one's slot or code.
    for (int i = 0; i < 5; ++i) test::load_kernel(*dev, "add_one", "add_one");
    gate.set(1);
    dev->synchronize();
    CHECK(download<uint32_t>(*dev, b, 1)[0] == 99);
    CHECK_FALSE(dev->failed());
}
