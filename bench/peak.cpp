#include "bench/peak.hpp"

#include <algorithm>
#include <chrono>
#include <immintrin.h>
#include <memory>
#include <thread>
#include <vector>

namespace baregpu::bench {

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

unsigned thread_count(unsigned threads) {
    if (threads) return threads;
    unsigned n = std::thread::hardware_concurrency();
    return n ? n : 1;
}

// 12 independent accumulators: enough to cover FMA latency (4 cycles) on two ports.
constexpr int kAcc = 12;

__attribute__((target("avx512f"))) float fma_loop_avx512(long iterations, float seed) {
    __m512 acc[kAcc];
#pragma GCC unroll 16
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(seed + float(i));
    const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
    for (long it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
        for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
    }
    __m512 s = acc[0];
    for (int i = 1; i < kAcc; ++i) s = _mm512_add_ps(s, acc[i]);
    alignas(64) float out[16];
    _mm512_store_ps(out, s);
    float r = 0;
    for (float v : out) r += v;
    return r;
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(long iterations, float seed) {
    __m256 acc[kAcc];
#pragma GCC unroll 16
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_set1_ps(seed + float(i));
    const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
        for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
    }
    __m256 s = acc[0];
    for (int i = 1; i < kAcc; ++i) s = _mm256_add_ps(s, acc[i]);
    alignas(32) float out[8];
    _mm256_store_ps(out, s);
    float r = 0;
    for (float v : out) r += v;
    return r;
}

float fma_loop_scalar(long iterations, float seed) {
    float acc[kAcc];
    for (int i = 0; i < kAcc; ++i) acc[i] = seed + float(i);
    for (long it = 0; it < iterations; ++it) {
        for (float& v : acc) v = v * 0.999999f + 1e-7f;
    }
    float r = 0;
    for (float v : acc) r += v;
    return r;
}

}  // namespace

PeakFma measure_peak_fma(int repeats, long iterations, unsigned threads) {
    threads = thread_count(threads);
    __builtin_cpu_init();
    PeakFma result;
    int lanes = 1;
    float (*loop)(long, float) = fma_loop_scalar;
    result.isa = "scalar";
    if (__builtin_cpu_supports("avx512f")) {
        loop = fma_loop_avx512, lanes = 16, result.isa = "avx512f";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        loop = fma_loop_avx2, lanes = 8, result.isa = "avx2+fma";
    }
    volatile float sink = 0;
    for (int r = 0; r < repeats; ++r) {
        std::vector<float> sums(threads);
        std::vector<std::thread> pool;
        double t0 = now_s();
        for (unsigned t = 0; t < threads; ++t) pool.emplace_back([&, t] { sums[t] = loop(iterations, float(t)); });
        for (auto& th : pool) th.join();
        double dt = now_s() - t0;
        for (float s : sums) sink = sink + s;
        double flops = 2.0 * kAcc * lanes * double(iterations) * threads;
        result.gflops = std::max(result.gflops, flops / dt / 1e9);
    }
    return result;
}

double measure_stream_triad(int repeats, size_t n, unsigned threads) {
    threads = thread_count(threads);
    std::unique_ptr<float[]> a(new float[n]), b(new float[n]), c(new float[n]);
    auto chunk = [&](unsigned t) { return std::pair<size_t, size_t>{n * t / threads, n * (t + 1) / threads}; };
    auto parallel = [&](auto&& body) {
        std::vector<std::thread> pool;
        for (unsigned t = 0; t < threads; ++t) pool.emplace_back([&, t] { auto [lo, hi] = chunk(t); body(lo, hi); });
        for (auto& th : pool) th.join();
    };
    // First touch by the thread that later works on the chunk.
    parallel([&](size_t lo, size_t hi) {
        for (size_t i = lo; i < hi; ++i) a[i] = 0, b[i] = 1.0f, c[i] = 2.0f;
    });
    const float s = 3.0f;
    double best = 0;
    for (int r = 0; r < repeats + 1; ++r) {  // +1: the first run warms up
        double t0 = now_s();
        parallel([&](size_t lo, size_t hi) {
            float* __restrict pa = a.get();
            const float* __restrict pb = b.get();
            const float* __restrict pc = c.get();
            for (size_t i = lo; i < hi; ++i) pa[i] = pb[i] + s * pc[i];
        });
        double dt = now_s() - t0;
        if (r > 0) best = std::max(best, 3.0 * 4.0 * double(n) / dt / 1e9);
    }
    return best;
}

}  // namespace baregpu::bench
