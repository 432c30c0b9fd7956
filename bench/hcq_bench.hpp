// The HCQ benchmark suite (`baregpu bench --suite hcq`): what the HCQ layer costs on a device.
//
//   hcq_submit          host ns per launch to record (wait, exec, signal) and submit it
//   hcq_submit_profiled the same with the profiler on (overhead_pct: median over paired runs
//                       of the overhead against hcq_submit; overhead_pct_of_best: best against best)
//   hcq_graph_replay    ns per kernel of a 256-kernel graph replayed back to back, until done
//   hcq_signal_latency  us from submit() of a signal command to the host seeing the value
//   copy_h2d / copy_d2h GB/s of Device::copy_in / copy_out of 64 MiB (baseline: host memcpy)
//
// Every figure is the median of repeated runs; min, max and the run count come with it.
#pragma once

#include "hcq/device.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace baregpu::bench {

struct Result {
    std::string name;
    double value = 0;
    std::string unit;
    // Extra fields of the JSON object: min, max, runs, target, baseline, ratio, ...
    std::map<std::string, double> numbers;
    std::map<std::string, bool> flags;  // pass: the figure meets its target
};

struct Options {
    int repeats = 15;    // runs per figure (the median is reported)
    bool quick = false;  // fewer and smaller runs (tests)
    // Run only results whose name starts with one of these (empty: all).
    std::vector<std::string> only;
    // Cumulative counters of the device's shader work, where something counts it (a simulated
    // chip's interpreter: drivers/registry.hpp sim_shader_counters). When set, every tensor result
    // gets each counter's per-run change as "shader_<name>" (counts, bytes; "shader_modelled_ns").
    std::function<std::map<std::string, double>()> shader_counters;
    // How long the tensor suite waits for its kernels (0: the default, BAREGPU_TIMEOUT_MS or 10 s):
    // longer for the full sizes on an interpreting chip, where one matmul_2048 takes a minute.
    std::chrono::milliseconds kernel_wait{0};
    bool wants(const std::string& name) const {
        if (only.empty()) return true;
        for (const auto& o : only) {
            if (name.rfind(o, 0) == 0) return true;
        }
        return false;
    }
};

std::vector<Result> run_hcq_suite(hcq::Device& device, const Options& options);

}  // namespace baregpu::bench
