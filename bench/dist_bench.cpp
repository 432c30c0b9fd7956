#include "bench/dist_bench.hpp"

#include "base/error.hpp"
#include "dist/communicator.hpp"

#include <mpi.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace baregpu::bench {

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Seconds `run` took on the slowest rank, each run started together.
template <typename Run>
std::vector<double> timed(int runs, Run&& run) {
    std::vector<double> out;
    for (int i = 0; i < runs; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        const auto t0 = std::chrono::steady_clock::now();
        run();
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), slowest = 0;
        MPI_Allreduce(&s, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        out.push_back(slowest);
    }
    return out;
}

}  // namespace

DistRun run_dist_suite(const std::shared_ptr<hcq::Device>& device, const Options& options) {
    dist::Communicator comm({device});
    DistRun run{comm.rank(), comm.size(), {}};
    if (comm.size() < 2)
        throw Error(device->name(), "the dist suite measures transfers between ranks: run it under mpirun with 2 or more "
                                    "(mpirun -np 2 baregpu bench --suite dist)");
    const double n = comm.size(), bus_factor = 2 * (n - 1) / n;
    std::vector<uint64_t> sizes{1ull << 20, 4ull << 20, 16ull << 20, 64ull << 20, 256ull << 20};
    if (options.quick) sizes = {1ull << 20, 4ull << 20};
    const int runs = options.quick ? 3 : std::clamp(options.repeats, 3, 7);
    for (uint64_t bytes : sizes) {
        const std::string name = fmt::format("allreduce_{}MiB", bytes >> 20);
        if (!options.wants(name)) continue;
        const uint64_t count = bytes / 4;
        hcq::Buffer buffer = device->allocate(bytes);
        std::vector<float> host(count, 1.0f);
        device->copy_in(buffer, std::as_bytes(std::span(host)));
        auto ours = [&] { comm.allreduce(buffer, count, dist::DataType::float32, dist::ReduceOp::sum); };
        auto theirs = [&] { MPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); };
        // What the pipelining saves: the same device copies and MPI_Allreduce one after the other.
        auto sequential = [&] {
            device->copy_out(std::as_writable_bytes(std::span(host)), buffer);
            theirs();
            device->copy_in(buffer, std::as_bytes(std::span(host)));
        };
        ours();  // warm: staging slots, page faults
        theirs();
        const std::vector<double> t = timed(runs, ours), b = timed(runs, theirs);
        const double value = bus_factor * static_cast<double>(bytes) / median(t) / 1e9;
        const double baseline = bus_factor * static_cast<double>(bytes) / median(b) / 1e9;
        Result r{name, value, "GB/s", {}, {}};
        r.numbers["baseline"] = baseline;
        r.numbers["ratio"] = value / baseline;
        r.numbers["ranks"] = n;
        r.numbers["runs"] = runs;
        r.numbers["min"] = bus_factor * static_cast<double>(bytes) / *std::max_element(t.begin(), t.end()) / 1e9;
        r.numbers["max"] = bus_factor * static_cast<double>(bytes) / *std::min_element(t.begin(), t.end()) / 1e9;
        if (!device->limits().host_memory) {
            const double s = bus_factor * static_cast<double>(bytes) / median(timed(runs, sequential)) / 1e9;
            r.numbers["sequential"] = s;
            r.numbers["pipelining_gain"] = value / s;
        }
        if (bytes >= (64ull << 20)) {
            r.numbers["target"] = 0.8;
            r.flags["pass"] = value / baseline >= 0.8;
        }
        run.results.push_back(std::move(r));
    }
    return run;
}

}  // namespace baregpu::bench
