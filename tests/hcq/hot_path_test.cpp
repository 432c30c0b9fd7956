// The hot paths (recording a queue, submitting it, replaying a graph) neither allocate nor
// throw in the normal case: counted here with a replaced global operator new.
#include "hcq/graph.hpp"
#include "tests/hcq/support.hpp"

#include <atomic>

// tests/hcq/alloc_counter.cpp replaces the global operator new.
namespace baregpu::test {
extern thread_local bool counting_allocations;  // this thread's allocations only
extern std::atomic<uint64_t> allocations;
}  // namespace baregpu::test
using baregpu::test::allocations;

using namespace baregpu;
using namespace baregpu::hcq;

TEST_CASE("hot path: re-recording and submitting a queue, and replaying a graph, do not allocate") {
    auto name = HCQ_DEVICE_NAME();
    INFO("device " << name);
    auto dev = test::open_device(name);
    auto prg = test::load_kernel(*dev, "fill", "fill");
    Buffer b = dev->allocate(4096);
    Signal s = dev->new_signal(0, "hot");
    auto q = dev->compute_queue();
    auto c = dev->copy_queue();
    Buffer other = dev->allocate(4096);
    auto launch = [&](uint32_t i) {
        uint64_t v = dev->next_timeline();
        q.reset();
        q.wait(dev->timeline(), v - 1).exec(*prg, KernelArgs(*prg, {b}, {1024, i}), {16}, {64}).signal(dev->timeline(), v).submit();
        c.reset();
        c.wait(s, 0).copy(other, b, 4096).signal(s, i).submit();
    };
    Graph g;
    g.exec(*prg, {b}, {1024u, GraphValue::variable(0)}, {16}, {64});
    g.copy(other, b, 4096);
    g.finalize();
    for (uint32_t i = 1; i <= 64; ++i) launch(i);  // warm: buffers reach their sizes
    for (uint32_t i = 0; i < 4; ++i) {
        uint32_t var[] = {i};
        g.replay({}, var);
    }
    g.wait();
    dev->synchronize();

    allocations = 0;
    test::counting_allocations = true;
    for (uint32_t i = 65; i <= 1064; ++i) launch(i);
    for (uint32_t i = 0; i < 200; ++i) {
        uint32_t var[] = {i};
        g.replay({}, var);
    }
    test::counting_allocations = false;
    uint64_t counted = allocations.load();
    g.wait();
    dev->synchronize();
    INFO("allocations in 1000 launches + 200 replays: " << counted);
    CHECK(counted == 0);
}
