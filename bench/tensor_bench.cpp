#include "bench/tensor_bench.hpp"

#include "bench/peak.hpp"
#include "bench/roofline.hpp"
#include "tensor/tensor.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <functional>
#include <optional>
#include <random>
#include <stdexcept>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace baregpu::bench {

namespace {

using tensor::Runtime;
using tensor::Tensor;

double wall_seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// $TMPDIR (else /tmp), said by name when it is not a directory.
std::filesystem::path temp_directory() {
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
    if (ec) {
        const char* env = std::getenv("TMPDIR");
        throw std::runtime_error(fmt::format("TMPDIR={} is not a directory ({}); set it to one or unset it", env ? env : "",
                                             ec.message()));
    }
    return dir;
}

// Cache directories of earlier runs that were killed before they could remove theirs
// ("baregpu-bench-<pid>-XXXXXX" of this user whose process is gone).
void remove_abandoned(const std::filesystem::path& tmp) {
    std::error_code ec;
    for (std::filesystem::directory_iterator it(tmp, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (!name.starts_with("baregpu-bench-")) continue;
        long pid = std::strtol(name.c_str() + 14, nullptr, 10);
        struct stat st {};
        if (pid <= 0 || ::lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
        if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // still running (or not ours to judge)
        std::error_code rm;
        std::filesystem::remove_all(it->path(), rm);
    }
}

// A fresh, empty directory for the compiler's disk cache, removed with this object.
struct TempCacheDir {
    std::filesystem::path path;
    std::string previous;
    bool had_previous = false;
    TempCacheDir() {
        const std::filesystem::path tmp = temp_directory();
        remove_abandoned(tmp);
        std::string tmpl = (tmp / fmt::format("baregpu-bench-{}-XXXXXX", ::getpid())).string();
        if (!mkdtemp(tmpl.data())) {
            throw std::runtime_error(fmt::format("cannot create a temporary cache directory {}: {}", tmpl, std::strerror(errno)));
        }
        path = tmpl;
        if (const char* p = std::getenv("BAREGPU_CACHE_DIR")) previous = p, had_previous = true;
        setenv("BAREGPU_CACHE_DIR", path.c_str(), 1);
    }
    ~TempCacheDir() {
        if (had_previous) {
            setenv("BAREGPU_CACHE_DIR", previous.c_str(), 1);
        } else {
            unsetenv("BAREGPU_CACHE_DIR");
        }
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

struct Suite {
    Runtime& rt;
    std::shared_ptr<Runtime> rt_ptr;
    const Options& options;
    int repeats;
    std::vector<Result> results;
    double peak_gflops = 0, stream_gbps = 0;
    // On a GPU device: its board, and whether the time compared with the board's roofline is the
    // model's (a chip that interprets its code) or the measured one.
    std::optional<Board> board;
    bool modelled = false;

    void progress(const Result& r) {
        std::fprintf(stderr, "bench: %-20s %12.3f %s\n", r.name.c_str(), r.value, r.unit.c_str());
    }

    // Times `run` (which must leave the device idle): one first call (its compile_ms is
    // recorded) then `repeats` timed calls. Returns the seconds of every timed call.
    std::vector<double> time(const std::function<void()>& run, double& compile_ms) {
        double c0 = rt.compile_ms();
        const uint64_t k0 = rt.kernels_loaded();
        run();
        compile_ms = rt.compile_ms() - c0;
        kernels_per_run = rt.kernels_loaded() - k0;
        const auto before = options.shader_counters ? options.shader_counters() : std::map<std::string, double>{};
        std::vector<double> s;
        for (int i = 0; i < repeats; ++i) {
            double t0 = wall_seconds();
            run();
            s.push_back(wall_seconds() - t0);
        }
        shader_per_run.clear();
        if (options.shader_counters)
            for (const auto& [k, v] : options.shader_counters()) shader_per_run["shader_" + k] = (v - before.at(k)) / repeats;
        return s;
    }
    std::map<std::string, double> shader_per_run;  // the last time()'s shader counters per run
    uint64_t kernels_per_run = 0;  // kernels the last time()'s first call compiled or took from the disk cache

    // The least a result's computation must do: fp32 flops (an FMA is two) and bytes to and
    // from memory (each input read once, the output written once).
    struct Cost {
        double flops = 0, bytes = 0;
    };

    // A result from per-run seconds: value = work / median seconds (rate) or median ms. of_peak:
    // on a GPU device the board's roofline time for `cost` over the kernel's time (modelled or
    // measured); elsewhere the rate over ratio_base (the host's FMA peak or STREAM triad).
    void add(const std::string& name, const std::string& unit, const std::vector<double>& secs, double compile_ms,
             double work, bool rate, double ratio_base, double n, Cost cost, double extra_rate_work = 0) {
        Result r;
        r.name = name;
        r.unit = unit;
        double med = median(secs);
        auto [lo, hi] = std::minmax_element(secs.begin(), secs.end());
        if (rate) {
            r.value = work / med / 1e9;
            r.numbers["min"] = work / *hi / 1e9;
            r.numbers["max"] = work / *lo / 1e9;
        } else {
            r.value = med * 1e3;
            r.numbers["min"] = *lo * 1e3;
            r.numbers["max"] = *hi * 1e3;
        }
        double achieved = rate ? r.value : extra_rate_work / med / 1e9;
        if (board) {
            double t = med;
            if (modelled) {
                auto it = shader_per_run.find("shader_modelled_ns");
                t = it != shader_per_run.end() ? it->second / 1e9 : 0;
            }
            const double best = board->seconds(cost.flops, cost.bytes);
            r.numbers["roofline_us"] = best * 1e6;
            if (t > 0) r.numbers["of_peak"] = best / t;
        } else if (ratio_base > 0 && achieved > 0) {
            r.numbers["of_peak"] = achieved / ratio_base;
        }
        if (!rate && extra_rate_work > 0) r.numbers[ratio_base == stream_gbps ? "gbps" : "gflops"] = achieved;
        r.numbers["compile_ms"] = compile_ms;
        // What one kernel's compile costs (the figure's target is per kernel): mlp_forward is three.
        r.numbers["kernels"] = double(kernels_per_run);
        if (kernels_per_run) r.numbers["compile_ms_per_kernel"] = compile_ms / double(kernels_per_run);
        r.numbers["runs"] = double(secs.size());
        r.numbers["n"] = n;
        r.numbers.insert(shader_per_run.begin(), shader_per_run.end());
        shader_per_run.clear();
        progress(r);
        results.push_back(std::move(r));
    }

    void sync() {
        if (options.kernel_wait.count() > 0) {
            rt.device().synchronize(options.kernel_wait);
        } else {
            rt.device().synchronize();
        }
    }

    void matmul(const std::string& name, int64_t n) {
        if (!options.wants(name)) return;
        Tensor a = Tensor::rand({n, n}, 1, rt_ptr), b = Tensor::rand({n, n}, 2, rt_ptr);
        a.realize(), b.realize(), sync();
        double cms = 0;
        auto secs = time([&] { a.matmul(b).realize(); sync(); }, cms);
        const double flops = 2.0 * double(n) * double(n) * double(n);
        add(name, "GFLOP/s", secs, cms, flops, true, peak_gflops, double(n), {flops, 12.0 * double(n) * double(n)});
    }
};

}  // namespace

std::vector<Result> run_tensor_suite(const std::shared_ptr<hcq::Device>& device, const Options& options,
                                     bool include_copies) {
    const bool q = options.quick;
    TempCacheDir cache;  // before the Runtime: its compiler reads $BAREGPU_CACHE_DIR
    auto rt = std::make_shared<Runtime>(device);
    Suite s{*rt, rt, options, q ? 2 : std::max(3, options.repeats / 3), {}, 0, 0, board_for(device->arch()), bool(options.shader_counters), {}};

    // Peaks first, in the same run.
    PeakFma fma = measure_peak_fma(q ? 2 : 5, q ? 2'000'000 : 20'000'000);
    s.peak_gflops = fma.gflops;
    s.stream_gbps = measure_stream_triad(q ? 2 : 5, q ? (size_t(1) << 21) : (size_t(1) << 25));
    {
        Result r{"peak_fma_gflops", fma.gflops, "GFLOP/s", {{"threads", double(std::thread::hardware_concurrency())}},
                 {{"avx512", fma.isa == "avx512f"}}};
        s.progress(r);
        if (options.wants(r.name)) s.results.push_back(r);
        Result t{"stream_triad", s.stream_gbps, "GB/s", {{"n", double(q ? (1 << 21) : (1 << 25))}}, {}};
        s.progress(t);
        if (options.wants(t.name)) s.results.push_back(t);
    }

    s.matmul("matmul_512", q ? 64 : 512);
    s.matmul("matmul_1024", q ? 128 : 1024);
    s.matmul("matmul_2048", q ? 256 : 2048);

    const int64_t big = q ? (int64_t(1) << 20) : (int64_t(1) << 24);
    if (options.wants("ew_fused_16M")) {
        Tensor a = Tensor::rand({big}, 1, rt), b = Tensor::rand({big}, 2, rt), c = Tensor::rand({big}, 3, rt);
        a.realize(), b.realize(), c.realize(), s.sync();
        double cms = 0;
        auto secs = s.time([&] { a.mul(b).add(c).realize(); s.sync(); }, cms);
        s.add("ew_fused_16M", "GB/s", secs, cms, 16.0 * double(big), true, s.stream_gbps, double(big), {2.0 * double(big), 16.0 * double(big)});
    }
    if (options.wants("reduce_sum_16M")) {
        Tensor a = Tensor::rand({big}, 4, rt);
        a.realize(), s.sync();
        double cms = 0;
        auto secs = s.time([&] { a.sum().realize(); s.sync(); }, cms);
        s.add("reduce_sum_16M", "GB/s", secs, cms, 4.0 * double(big), true, s.stream_gbps, double(big), {double(big), 4.0 * double(big)});
    }
    if (options.wants("softmax_4096")) {
        const int64_t n = q ? 512 : 4096;
        Tensor a = Tensor::rand({n, n}, 5, rt);
        a.realize(), s.sync();
        double cms = 0;
        auto secs = s.time([&] { a.softmax().realize(); s.sync(); }, cms);
        // max, subtract, exp, sum, scale: five operations an element
        s.add("softmax_4096", "ms", secs, cms, 0, false, s.stream_gbps, double(n), {5.0 * double(n) * double(n), 8.0 * double(n) * double(n)},
              8.0 * double(n) * double(n));
    }
    if (options.wants("mlp_forward")) {
        const int64_t batch = 64, in = 784, hid = q ? 128 : 512, out = 10;
        Tensor x = Tensor::rand({batch, in}, 6, rt);
        Tensor w1 = Tensor::rand({in, hid}, 7, rt), w2 = Tensor::rand({hid, hid}, 8, rt), w3 = Tensor::rand({hid, out}, 9, rt);
        Tensor b1 = Tensor::rand({hid}, 10, rt), b2 = Tensor::rand({hid}, 11, rt), b3 = Tensor::rand({out}, 12, rt);
        for (Tensor* t : {&x, &w1, &w2, &w3, &b1, &b2, &b3}) t->realize();
        s.sync();
        double cms = 0;
        auto secs = s.time([&] { x.matmul(w1).add(b1).relu().matmul(w2).add(b2).relu().matmul(w3).add(b3).realize(); s.sync(); }, cms);
        double flops = 2.0 * batch * (in * hid + hid * hid + hid * out);
        const double bytes = 4.0 * double(batch * in + in * hid + hid * hid + hid * out + 2 * hid + out + batch * out);
        s.add("mlp_forward", "ms", secs, cms, 0, false, s.peak_gflops, double(hid), {flops, bytes}, flops);
    }
    if (options.wants("conv2d_3x3")) {
        const int64_t n = q ? 1 : 8, c = q ? 16 : 64, hw = q ? 16 : 56;
        Tensor x = Tensor::rand({n, c, hw, hw}, 13, rt), w = Tensor::rand({c, c, 3, 3}, 14, rt);
        x.realize(), w.realize(), s.sync();
        double cms = 0;
        auto secs = s.time([&] { x.conv2d(w, 1).realize(); s.sync(); }, cms);
        const double flops = 2.0 * double(n * c * c * 9 * hw * hw);
        s.add("conv2d_3x3", "ms", secs, cms, 0, false, s.peak_gflops, double(hw), {flops, 4.0 * double(2 * n * c * hw * hw + c * c * 9)}, flops);
    }
    if (include_copies) {
        Options copies = options;
        copies.only = {"copy_"};
        if (options.wants("copy_h2d") || options.wants("copy_d2h")) {
            for (Result& r : run_hcq_suite(*device, copies)) {
                if (!options.wants(r.name)) continue;
                r.numbers["of_peak"] = r.value / s.stream_gbps;
                r.numbers["compile_ms"] = 0;
                s.progress(r);
                s.results.push_back(std::move(r));
            }
        }
    }
    if (options.wants("launch_overhead")) {
        Tensor x = Tensor::rand({16}, 15, rt);
        x.realize(), s.sync();
        const int launches = q ? 200 : 2000;
        double cms = 0;
        auto secs = s.time([&] {
            for (int i = 0; i < launches; ++i) x.scalar(1.0).add(x).realize();
            s.sync();
        }, cms);
        for (double& v : secs) v /= launches;
        Result r;
        r.name = "launch_overhead";
        r.unit = "us";
        r.value = median(secs) * 1e6;
        r.numbers["min"] = *std::min_element(secs.begin(), secs.end()) * 1e6;
        r.numbers["max"] = *std::max_element(secs.begin(), secs.end()) * 1e6;
        r.numbers["compile_ms"] = cms;
        r.numbers["runs"] = double(secs.size());
        r.numbers["launches"] = launches;
        s.progress(r);
        s.results.push_back(std::move(r));
    }
    return s.results;
}

}  // namespace baregpu::bench
