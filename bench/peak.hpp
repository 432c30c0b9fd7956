// Machine peaks the tensor suite's ratios are taken against, measured in the same run:
//   peak_fma_gflops  fp32 FMA throughput of every core (AVX-512 or AVX2+FMA loop, chosen by cpuid)
//   stream_triad     GB/s of a[i] = b[i] + s * c[i] over every core (std::thread, first touch per
//                    thread), counting 3 * 4 bytes per element like STREAM
// bench/baseline_stream runs the same triad in a process of its own.
#pragma once

#include <cstddef>
#include <string>

namespace baregpu::bench {

struct PeakFma {
    double gflops = 0;
    std::string isa;  // "avx512f", "avx2+fma" or "scalar"
};

// Best of `repeats` runs of `iterations` FMA rounds per thread on `threads` threads (0: all cores).
PeakFma measure_peak_fma(int repeats, long iterations, unsigned threads = 0);
// Best GB/s of `repeats` triads over arrays of `n` floats on `threads` threads (0: all cores).
double measure_stream_triad(int repeats, size_t n, unsigned threads = 0);

}  // namespace baregpu::bench
