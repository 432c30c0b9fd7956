// The dist suite (`mpirun -np N baregpu bench --suite dist`): allreduce across the ranks on device
// buffers (baregpu::dist, every rank on its own device) against MPI_Allreduce on host buffers of
// the same size in the same run, for 1 MiB to 256 MiB of float32.
//
//   allreduce_<size>   bus bandwidth in GB/s: 2 (N-1)/N * bytes / time, the time the slowest rank
//                      took (median of the runs); baseline: MPI_Allreduce's, ratio: ours / it;
//                      target 0.8 of it from 64 MiB up (pass). On a device whose memory is not the
//                      host's, sequential: copy_out + MPI_Allreduce + copy_in one after the other,
//                      and pipelining_gain: ours / that
//
// Every rank returns the results; the caller prints them on rank 0 only (rank()).
#pragma once

#include "bench/hcq_bench.hpp"
#include "hcq/device.hpp"

#include <memory>
#include <vector>

namespace baregpu::bench {

struct DistRun {
    int rank = 0;
    int ranks = 1;
    std::vector<Result> results;
};

DistRun run_dist_suite(const std::shared_ptr<hcq::Device>& device, const Options& options);

}  // namespace baregpu::bench
