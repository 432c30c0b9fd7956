// Baseline for the tensor suite's memory-bound figures: STREAM triad (a[i] = b[i] + s * c[i])
// over every core with std::thread, in a process of its own (bench/compare.py runs it).
// Prints one JSON object: {"name": "baseline_stream_triad", "value": GB/s, "unit": "GB/s", ...}.
//
// Usage: baseline_stream [--quick]
#include "bench/peak.hpp"

#include <cstdio>
#include <cstring>
#include <thread>

int main(int argc, char** argv) {
    bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    size_t n = quick ? (size_t(1) << 21) : (size_t(1) << 25);
    double gbps = baregpu::bench::measure_stream_triad(quick ? 2 : 10, n);
    std::printf("{\"name\": \"baseline_stream_triad\", \"value\": %.4f, \"unit\": \"GB/s\", \"n\": %zu, \"threads\": %u}\n", gbps,
                n, std::thread::hardware_concurrency());
    return 0;
}
