#include "tools/baregpu/bench_command.hpp"

#include "bench/hcq_bench.hpp"
#ifdef BAREGPU_DIST
#include "bench/dist_bench.hpp"
#endif
#include "bench/roofline.hpp"
#include "bench/tensor_bench.hpp"
#include "hcq/profiler.hpp"
#include "drivers/registry.hpp"
#include "hcq/registry.hpp"
#include "tools/baregpu/json_writer.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <exception>
#include <fmt/format.h>
#include <optional>
#include <string>

namespace baregpu::tools {

namespace {

constexpr const char* kUsage =
    "usage: baregpu bench [--suite hcq|tensor|dist|all] [--device NAME] [--json] [--quick] [--full] [--repeats N]\n"
    "                     [--only NAMES] [--profile FILE]\n"
    "  --suite    which benchmarks (default: all: hcq and tensor; dist: allreduce across MPI ranks against\n"
    "             MPI_Allreduce, under mpirun -np N, printed by rank 0)\n"
    "  --device   device name, e.g. cpu or am:0000:03:00.0 (default: $BAREGPU_DEVICE, else the first GPU that opens,\n"
    "             else cpu; the choice and why each GPU was passed over go to stderr)\n"
    "  --json     print {\"device\": ..., \"isa\": ..., [\"board\": {...},] \"results\": [{\"name\", \"value\", \"unit\", ...}]}\n"
    "  --quick    fewer, smaller runs (a smoke test, not a measurement)\n"
    "  --full     the tensor suite's full sizes even on a chip that interprets its machine code (minutes)\n"
    "  --repeats  runs per figure; the median is reported (default 15; tensor: a third, at least 3)\n"
    "  --only     only results whose names start with these (comma-separated), e.g. hcq_submit\n"
    "  --profile  write the profiler's Chrome trace of the whole run (every kernel, copy and wait) to FILE\n";

int usage(const std::string& problem) {
    std::fprintf(stderr, "baregpu bench: %s\n%s", problem.c_str(), kUsage);
    return 2;
}

// {"device": ..., "isa": ..., "results": [{"name", "value", "unit", <extra numbers and flags>}]}: the
// same shape for every suite; names, once published, stay. "isa" is the kind of code the device ran
// ("x86-64" for host code, "gfx1100" / "gfx1201" for a GPU's own).
std::string isa_name(const std::string& arch) { return arch == "x86_64" ? "x86-64" : arch; }

// "board": the GPU board a GPU device's of_peak is against (bench/roofline.hpp), and whether the
// time compared is the model's or measured.
std::string to_json(const std::string& device, const std::string& isa, const std::optional<bench::Board>& board, bool modelled,
                    const std::vector<bench::Result>& results) {
    JsonWriter w;
    w.begin_object();
    w.key("device");
    w.value(device);
    w.key("isa");
    w.value(isa);
    if (board) {
        w.key("board");
        w.begin_object();
        w.key("name");
        w.value(board->name);
        w.key("fp32_gflops");
        w.value(board->fp32_gflops);
        w.key("mem_gbps");
        w.value(board->mem_gbps);
        w.key("time");
        w.value(modelled ? "modelled" : "measured");
        w.key("source");
        w.value(board->source);
        w.end_object();
    }
    w.key("results");
    w.begin_array();
    for (const bench::Result& r : results) {
        w.begin_object();
        w.key("name");
        w.value(r.name);
        w.key("value");
        w.value(r.value);
        w.key("unit");
        w.value(r.unit);
        for (const auto& [k, v] : r.numbers) {
            w.key(k);
            w.value(v);
        }
        for (const auto& [k, v] : r.flags) {
            w.key(k);
            w.value(v);
        }
        w.end_object();
    }
    w.end_array();
    w.end_object();
    return w.text();
}

// One line per result, for people.
std::string to_text(const std::string& device, const std::optional<bench::Board>& board, bool modelled,
                    const std::vector<bench::Result>& results) {
    std::string out = fmt::format("device {}\n", device);
    if (board)
        out += fmt::format("of_peak against {} ({:.1f} TFLOPS fp32, {:.0f} GB/s; {}), {} time\n", board->name, board->fp32_gflops / 1000,
                           board->mem_gbps, board->source, modelled ? "modelled" : "measured");
    for (const bench::Result& r : results) {
        out += fmt::format("  {:<22} {:>12.3f} {:<5}", r.name, r.value, r.unit);
        for (const auto& [k, v] : r.numbers) out += fmt::format(" {}={:.4g}", k, v);
        for (const auto& [k, v] : r.flags) out += fmt::format(" {}={}", k, v);
        out += "\n";
    }
    return out;
}

}  // namespace

int bench_command(std::span<const std::string_view> args) {
    std::string suite = "all", device, profile;
    bool json = false, full = false;
    bench::Options options;
    for (size_t i = 0; i < args.size(); ++i) {
        std::string_view a = args[i];
        // The option's argument ("" when it is missing).
        auto value = [&]() -> std::string_view { return i + 1 < args.size() ? args[++i] : std::string_view(); };
        if (a == "--suite") {
            suite = std::string(value());
            if (suite.empty()) return usage("--suite needs a name");
        } else if (a == "--device") {
            device = std::string(value());
            if (device.empty()) return usage("--device needs a name");
        } else if (a == "--profile") {
            profile = std::string(value());
            if (profile.empty()) return usage("--profile needs a file name");
        } else if (a == "--json") {
            json = true;
        } else if (a == "--only") {
            std::string list(value());
            if (list.empty()) return usage("--only needs result names");
            size_t start = 0;
            for (;;) {
                size_t comma = list.find(',', start);
                options.only.push_back(list.substr(start, comma - start));
                // An empty name would match every result.
                if (options.only.back().empty()) return usage("--only '" + list + "' has an empty name");
                if (comma == std::string::npos) break;
                start = comma + 1;
            }
        } else if (a == "--quick") {
            options.quick = true;
        } else if (a == "--full") {
            full = true;
        } else if (a == "--repeats") {
            std::string_view v = value();
            int n = 0;
            auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
            if (ec != std::errc() || end != v.data() + v.size() || n < 3 || n > 1000) return usage("--repeats needs a number from 3 to 1000");
            options.repeats = n;
        } else if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        } else {
            return usage("unknown argument '" + std::string(a) + "'");
        }
    }
    if (suite != "hcq" && suite != "tensor" && suite != "dist" && suite != "all")
        return usage("unknown suite '" + suite + "' (suites: hcq, tensor, dist)");
#ifndef BAREGPU_DIST
    if (suite == "dist") {
        std::fprintf(stderr, "baregpu bench: this build has no dist suite: Meson found no MPI (Debian: libopenmpi-dev, then reconfigure)\n");
        return 1;
    }
#endif
    try {
        // Started before the device opens, so its clock is synchronised from the first command.
        // The figures then include the profiler's cost (BENCHMARKS.md: hcq_submit_profiled).
        if (!profile.empty()) {
            hcq::Profiler::check_writable(profile, "--profile");  // before the run, not after it
            hcq::Profiler::start();
        }
        std::shared_ptr<hcq::Device> dev;
        if (device.empty()) {
            // The default device: $BAREGPU_DEVICE, else the first real GPU that opens, else cpu. Say
            // which, and why each GPU before it was passed over (stderr: stdout is the results).
            hcq::DefaultChoice choice;
            dev = hcq::open_default_device(&choice);
            std::fprintf(stderr, "baregpu bench: %s\n", choice.describe().c_str());
        } else {
            dev = hcq::open_device(device);
        }
        // A simulated chip that interprets its own machine code counts what each kernel did. It runs a
        // few million wave instructions a second (BENCHMARKS.md): the tensor suite's full sizes would
        // take hours (the hcq suite's kernels are empty: it keeps its sizes).
        if (registry::sim_shader_counters(*dev)) options.shader_counters = [dev] { return *registry::sim_shader_counters(*dev); };
        bench::Options tensor_options = options;
        if (options.shader_counters) {
            if (!options.quick && suite != "hcq" && !full) {
                tensor_options.quick = true;
                std::fprintf(stderr, "baregpu bench: %s runs its %s code in the model's interpreter: the tensor suite at --quick sizes "
                             "(--full runs the full ones, for minutes; ?isa=host runs host code)\n", dev->name().c_str(), dev->arch().c_str());
            } else if (full) {
                tensor_options.kernel_wait = std::chrono::minutes(10);  // one interpreted matmul_2048 takes about a minute
            }
        }
        std::vector<bench::Result> results;
#ifdef BAREGPU_DIST
        if (suite == "dist") {
            // Every rank measures; rank 0 prints.
            bench::DistRun run = bench::run_dist_suite(dev, options);
            if (run.rank != 0) return 0;
            results = std::move(run.results);
        }
#endif
        if (suite == "hcq" || suite == "all") results = bench::run_hcq_suite(*dev, options);
        if (suite == "tensor" || suite == "all") {
            auto tensor_results = bench::run_tensor_suite(dev, tensor_options, /*include_copies*/ suite == "tensor");
            // The hcq suite's copies get the tensor suite's ratio against STREAM triad.
            for (const bench::Result& t : tensor_results) {
                if (t.name != "stream_triad" || t.value <= 0) continue;
                for (bench::Result& r : results) {
                    if (r.name.rfind("copy_", 0) == 0) r.numbers["of_peak"] = r.value / t.value, r.numbers["compile_ms"] = 0;
                }
            }
            results.insert(results.end(), tensor_results.begin(), tensor_results.end());
        }
        for (const std::string& name : options.only) {
            bool matched = std::any_of(results.begin(), results.end(), [&](const bench::Result& r) { return r.name.rfind(name, 0) == 0; });
            if (!matched) {
                std::fprintf(stderr, "baregpu bench: --only %s matched no result of the %s suite%s (run without --only for the names)\n",
                             name.c_str(), suite.c_str(), suite == "all" ? "s" : "");
                return 2;
            }
        }
        // The results first: a trace that cannot be written (a full disk) does not lose them.
        const std::optional<bench::Board> board = suite == "hcq" || suite == "dist" ? std::nullopt : bench::board_for(dev->arch());
        const bool modelled = bool(options.shader_counters);
        std::string text = json ? to_json(dev->name(), isa_name(dev->arch()), board, modelled, results)
                                : to_text(dev->name(), board, modelled, results);
        std::fputs(text.c_str(), stdout);
        std::fflush(stdout);
        if (!profile.empty()) {
            hcq::Profiler::stop();
            hcq::Profiler::write_chrome_trace(profile);
            std::fprintf(stderr, "baregpu bench: profiler trace written to %s\n", profile.c_str());
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "baregpu bench: %s\n", e.what());
        return 1;
    }
}

}  // namespace baregpu::tools
