// The tensor suite (`baregpu bench --suite tensor`): the lazy Tensor API on a device, end to end
// (schedule, compile, launch), with the machine's peaks measured in the same run.
//
//   peak_fma_gflops  GFLOP/s   fp32 FMA loop on every core (bench/peak.hpp)
//   stream_triad     GB/s      STREAM triad on every core (bench/peak.hpp)
//   matmul_512/1024/2048 GFLOP/s  (n x n) @ (n x n), 2n^3 flops
//   ew_fused_16M     GB/s      a * b + c on 16M float32 (one fused kernel), 4 * 4 bytes per element
//   reduce_sum_16M   GB/s      sum of 16M float32, 4 bytes per element
//   softmax_4096     ms        softmax over the last axis of 4096 x 4096 (gbps: 2 * 4 bytes/elt)
//   mlp_forward      ms        batch 64, 784-512-512-10, relu between layers
//   conv2d_3x3       ms        batch 8, 64 -> 64 channels, 56 x 56, padding 1
//   copy_h2d/copy_d2h GB/s     hcq copy_in/copy_out (bench/hcq_bench.hpp)
//   launch_overhead  us        per launch of a 16-element x + 1 through tensor, back to back
//
// Every tensor result carries compile_ms (code generation of its first call, the disk cache
// pointed at a fresh temporary directory) and of_peak. On a device whose code is a GPU's own
// (bench/roofline.hpp: gfx1100, gfx1201, sm_89, sm_90) of_peak is the board's roofline time for
// the result's least work (fp32 flops, bytes each input read and the output written once),
// roofline_us, over the kernel's time: the model's (shader_modelled_ns) on a chip that interprets
// its code, else the measured one. Elsewhere it is GFLOP/s over peak_fma_gflops, or GB/s over
// stream_triad. --quick shrinks sizes (the names stay; `n` says the size used).
#pragma once

#include "bench/hcq_bench.hpp"

#include <memory>

namespace baregpu::bench {

// include_copies: also run copy_h2d/copy_d2h (false when the hcq suite already did).
std::vector<Result> run_tensor_suite(const std::shared_ptr<hcq::Device>& device, const Options& options,
                                     bool include_copies);

}  // namespace baregpu::bench
