// A small program run under BAREGPU_PROFILE by check_trace.py: kernels, copies, waits (one on a
// signal whose name needs escaping), a transfer, graph replays, on two devices, one of them with a tick counter that runs 2000 ppm
// fast and starts 5 s ahead (so the trace is right only if offset and drift are corrected).
#include "hcq/graph.hpp"
#include "hcq/profiler.hpp"
#include "tests/hcq/support.hpp"

#include <cstdio>
#include <thread>

using namespace baregpu;
using namespace baregpu::hcq;
using namespace std::chrono_literals;

// argv[1]: extra device options, e.g. "profile_log=0" (timestamp packets instead of the CPU
// engines' own log).
int main(int argc, char** argv) {
    try {
        std::string extra = argc > 1 ? argv[1] : "";
        auto d0 = test::open_device(extra.empty() ? "cpu" : "cpu?" + extra);
        auto d1 = test::open_device("cpu:1?clock_skew_ppm=2000&clock_offset=5000000000" + (extra.empty() ? "" : "&" + extra));
        auto add0 = test::load_kernel(*d0, "add_one", "add_one");
        auto add1 = test::load_kernel(*d1, "add_one", "add_one");
        const uint32_t n = 1 << 20;
        Buffer a = d0->allocate(n * 4), b = d0->allocate(n * 4), c = d1->allocate(n * 4), e = d1->allocate(n * 4);
        std::vector<float> host(n, 1.f);
        d0->copy_in(a, std::as_bytes(std::span(host)));
        for (int i = 0; i < 3; ++i) {
            uint64_t v = d0->next_timeline();
            d0->compute_queue().wait(d0->timeline(), v - 1).exec(*add0, KernelArgs(*add0, {b, a}, {n}), {n / 256}, {256}).signal(d0->timeline(), v).submit();
        }
        d0->synchronize();
        Device::transfer(c, b, n * 4);
        d1->synchronize();
        // A device wait of up to 30 ms: the host sets the gate 30 ms after submitting, and the
        // engine thread may start waiting late on a loaded machine (check_trace.py wants >= 10 ms).
        Signal gate = d0->new_signal(0, "gate");
        d0->compute_queue().wait(gate, 1).submit();
        std::this_thread::sleep_for(30ms);
        gate.set(1);
        // A name the trace must escape: quotes, a backslash, a tab and a byte that is not UTF-8.
        Signal odd = d0->new_signal(1, "odd \"q\"\t\\ \xff");
        d0->compute_queue().wait(odd, 1).submit();
        Graph g;
        g.exec(*add1, {e, c}, {n}, {n / 256}, {256});
        g.finalize();
        for (int i = 0; i < 3; ++i) g.replay();
        g.wait();
        // Let the skewed clock drift away from the host's: 300 ms at 2000 ppm is 600 us.
        std::this_thread::sleep_for(300ms);
        for (int i = 0; i < 5; ++i) {
            ProfileHostSpan span("bracket");
            Signal done = d1->new_signal(0, "bracket done");
            d1->compute_queue().exec(*add1, KernelArgs(*add1, {e, c}, {1024}), {4}, {256}).signal(done, 1).submit();
            done.wait(1);
        }
        // And away again before the closing clock sample: only a fitted drift puts the
        // brackets right (one offset from either end would be off by ~600 us).
        std::this_thread::sleep_for(300ms);
        std::vector<float> back(n);
        d1->copy_out(std::as_writable_bytes(std::span(back)), e);
        if (back[0] != 3.f) {
            std::fprintf(stderr, "profile_demo: wrong result %f\n", double(back[0]));
            return 1;
        }
    } catch (const std::exception& ex) {
        std::fprintf(stderr, "profile_demo: %s\n", ex.what());
        return 1;
    }
    return 0;
}
