// Baseline for matmul_1024 / matmul_2048: Debian's OpenBLAS cblas_sgemm (row major, n x n by
// n x n, float32), in a process of its own (bench/compare.py runs it with OMP_WAIT_POLICY=passive).
// Prints one JSON object per size: {"name": "baseline_sgemm_<n>", "value": GFLOP/s, "unit": "GFLOP/s",
// "min", "max", "runs", "kernel", "threads"}: the median of the timed calls after one warm-up call,
// and the kernel OpenBLAS chose for this CPU (openblas_get_corename).
//
// A baseline runs at its best: OPENBLAS_CORETYPE forces a kernel (Haswell's AVX2 on an AVX-512
// machine halves sgemm) and OPENBLAS_L2_SIZE overrides the cache blocking. OpenBLAS reads both when
// the library loads, before main, so when either is set the program runs itself again without them.
//
// Usage: baseline_sgemm [--quick] [SIZES...]   (default sizes: 1024 2048)
#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <unistd.h>
#include <vector>

namespace {

constexpr const char* kHandicaps[] = {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"};

void run_without_handicaps(char** argv) {
    bool set = false;
    for (const char* name : kHandicaps) set = set || std::getenv(name) != nullptr;
    if (!set) return;
    for (const char* name : kHandicaps) ::unsetenv(name);
    ::execv("/proc/self/exe", argv);
    std::perror("baseline_sgemm: exec without OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE");
    std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
    run_without_handicaps(argv);
    bool quick = false;
    std::vector<int> sizes;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--quick") == 0) {
            quick = true;
        } else {
            sizes.push_back(std::atoi(argv[i]));
        }
    }
    if (sizes.empty()) sizes = {1024, 2048};
    const int repeats = quick ? 2 : 7;
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(0.0f, 1.0f);
    for (int n : sizes) {
        if (n <= 0) return 2;
        std::vector<float> a(size_t(n) * n), b(size_t(n) * n), c(size_t(n) * n);
        for (float& v : a) v = dist(rng);
        for (float& v : b) v = dist(rng);
        std::vector<double> gflops;
        for (int r = 0; r < repeats + 1; ++r) {
            auto t0 = std::chrono::steady_clock::now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
            double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (r > 0) gflops.push_back(2.0 * n * double(n) * n / dt / 1e9);
        }
        std::sort(gflops.begin(), gflops.end());
        size_t m = gflops.size();
        double med = m % 2 ? gflops[m / 2] : (gflops[m / 2 - 1] + gflops[m / 2]) / 2;
        std::printf("{\"name\": \"baseline_sgemm_%d\", \"value\": %.4f, \"unit\": \"GFLOP/s\", \"min\": %.4f, \"max\": %.4f, \"runs\": %zu, "
                    "\"kernel\": \"%s\", \"threads\": %d}\n",
                    n, med, gflops.front(), gflops.back(), m, openblas_get_corename(), openblas_get_num_threads());
    }
    return 0;
}
