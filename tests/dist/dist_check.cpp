// Run under mpirun by dist_test.py: every collective of baregpu::dist on this rank's devices,
// checked against the result computed here from every rank's known input; or a failure on
// purpose (a rank that dies mid-allreduce, a device that faults, a rank that stays away) and what
// the others report.
//
//   dist_check check DEVICES      DEVICES: this rank's, comma-separated ("cpu", "cpu,cpu?threads=1")
//   dist_check die RANK DEVICES   RANK kills itself in the middle of an allreduce
//   dist_check fault RANK DEVICES RANK's device enters its error state before an allreduce
//   dist_check stall RANK DEVICES RANK stays away from the collectives for twice the timeout
//   dist_check mismatch RANK DEVICES RANK calls a broadcast where the others call an allreduce
//
// Prints "dist-check ok ..." on rank 0 when every check passed, after "dist-check stats ..."
// (Communicator::stats); a failed check prints what differed and exits 1. In die/fault/stall the
// other ranks print "RankError on=SURVIVOR rank=VICTIM after_ms=T: message" and exit 3 (every rank,
// in mismatch).
#include "dist/communicator.hpp"
#include "drivers/registry.hpp"
#include "hcq/registry.hpp"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace baregpu;
using dist::DataType;
using dist::ReduceOp;

int g_failures = 0;

// Rank r's input element i: small multiples of 1/4, so every sum is exact in any order.
float input_f32(int r, uint64_t i) { return static_cast<float>(r + 1) * 0.5f + static_cast<float>(i % 97) * 0.25f; }
int32_t input_i32(int r, uint64_t i) { return static_cast<int32_t>((i * 7919 + static_cast<uint64_t>(r) * 104729) % 1000003) - 500000; }
double input_f64(int r, uint64_t i) { return static_cast<double>(r) - static_cast<double>(i % 13) * 0.125; }

template <typename T>
void expect_equal(const char* what, const std::vector<T>& got, const std::vector<T>& want, int rank) {
    for (size_t i = 0; i < want.size(); ++i) {
        if (got[i] != want[i]) {
            std::fprintf(stderr, "dist-check rank %d: %s: element %zu of %zu is %s, expected %s\n", rank, what, i, want.size(),
                         fmt::format("{}", got[i]).c_str(), fmt::format("{}", want[i]).c_str());
            ++g_failures;
            return;
        }
    }
}

template <typename T>
hcq::Buffer upload(hcq::Device& dev, const std::vector<T>& values, uint64_t extra = 0) {
    hcq::Buffer b = dev.allocate(values.size() * sizeof(T) + extra);
    dev.copy_in(b, std::as_bytes(std::span(values)));
    return b;
}

template <typename T>
std::vector<T> download(hcq::Device& dev, const hcq::Buffer& b, uint64_t count) {
    std::vector<T> out(count);
    dev.copy_out(std::as_writable_bytes(std::span(out)), b.view(0, count * sizeof(T)));
    return out;
}

// Every device of this rank contributes `local` shares: device d of rank r is participant r * local + d.
void check_allreduce(dist::Communicator& comm, uint64_t count) {
    const int n = comm.size(), local = static_cast<int>(comm.devices().size());
    {
        std::vector<hcq::Buffer> buffers;
        for (int d = 0; d < local; ++d) {
            std::vector<float> in(count);
            for (uint64_t i = 0; i < count; ++i) in[i] = input_f32(comm.rank() * local + d, i);
            buffers.push_back(upload(*comm.devices()[static_cast<size_t>(d)], in));
        }
        comm.allreduce(buffers, count, DataType::float32, ReduceOp::sum);
        std::vector<float> want(count, 0.0f);
        for (int p = 0; p < n * local; ++p)
            for (uint64_t i = 0; i < count; ++i) want[i] += input_f32(p, i);
        for (int d = 0; d < local; ++d)
            expect_equal(fmt::format("allreduce sum float32 count {} (device {})", count, d).c_str(),
                         download<float>(*comm.devices()[static_cast<size_t>(d)], buffers[static_cast<size_t>(d)], count), want, comm.rank());
    }
    {
        hcq::Device& dev = *comm.devices()[0];
        std::vector<int32_t> in(count);
        for (uint64_t i = 0; i < count; ++i) in[i] = input_i32(comm.rank(), i);
        hcq::Buffer b = upload(dev, in);
        comm.allreduce(b, count, DataType::int32, ReduceOp::max);
        std::vector<int32_t> want(count, INT32_MIN);
        for (int p = 0; p < n; ++p)
            for (uint64_t i = 0; i < count; ++i) want[i] = std::max(want[i], input_i32(p, i));
        expect_equal(fmt::format("allreduce max int32 count {}", count).c_str(), download<int32_t>(dev, b, count), want, comm.rank());
    }
}

void check_float64_sum(dist::Communicator& comm, uint64_t count) {
    hcq::Device& dev = *comm.devices()[0];
    std::vector<double> in(count);
    for (uint64_t i = 0; i < count; ++i) in[i] = input_f64(comm.rank(), i);
    hcq::Buffer b = upload(dev, in);
    comm.allreduce(b, count, DataType::float64, ReduceOp::sum);
    std::vector<double> want(count, 0.0);
    for (int p = 0; p < comm.size(); ++p)
        for (uint64_t i = 0; i < count; ++i) want[i] += input_f64(p, i);
    expect_equal(fmt::format("allreduce sum float64 count {}", count).c_str(), download<double>(dev, b, count), want, comm.rank());
}

void check_broadcast(dist::Communicator& comm, uint64_t count, int root) {
    std::vector<hcq::Buffer> buffers;
    std::vector<int32_t> want(count);
    for (uint64_t i = 0; i < count; ++i) want[i] = input_i32(root, i);
    for (const auto& dev : comm.devices()) {
        std::vector<int32_t> in(count);
        for (uint64_t i = 0; i < count; ++i) in[i] = comm.rank() == root ? want[i] : -1;
        buffers.push_back(upload(*dev, in));
    }
    comm.broadcast(buffers, count * 4, root);
    for (size_t d = 0; d < buffers.size(); ++d)
        expect_equal(fmt::format("broadcast of {} int32 from rank {} (device {})", count, root, d).c_str(),
                     download<int32_t>(*comm.devices()[d], buffers[d], count), want, comm.rank());
}

void check_allgather(dist::Communicator& comm, uint64_t count) {
    hcq::Device& dev = *comm.devices()[0];
    std::vector<int32_t> in(count);
    for (uint64_t i = 0; i < count; ++i) in[i] = input_i32(comm.rank(), i);
    hcq::Buffer send = upload(dev, in);
    hcq::Buffer recv = dev.allocate(count * 4 * static_cast<uint64_t>(comm.size()));
    comm.allgather(send, recv, count * 4);
    std::vector<int32_t> want;
    for (int p = 0; p < comm.size(); ++p)
        for (uint64_t i = 0; i < count; ++i) want.push_back(input_i32(p, i));
    expect_equal(fmt::format("allgather of {} int32 per rank", count).c_str(), download<int32_t>(dev, recv, want.size()), want, comm.rank());
}

void check_reduce_scatter(dist::Communicator& comm, uint64_t count) {
    hcq::Device& dev = *comm.devices()[0];
    const uint64_t total = count * static_cast<uint64_t>(comm.size());
    std::vector<float> in(total);
    for (uint64_t i = 0; i < total; ++i) in[i] = input_f32(comm.rank(), i);
    hcq::Buffer send = upload(dev, in);
    hcq::Buffer recv = dev.allocate(count * 4);
    comm.reduce_scatter(send, recv, count, DataType::float32, ReduceOp::sum);
    std::vector<float> want(count, 0.0f);
    for (int p = 0; p < comm.size(); ++p)
        for (uint64_t i = 0; i < count; ++i) want[i] += input_f32(p, static_cast<uint64_t>(comm.rank()) * count + i);
    expect_equal(fmt::format("reduce-scatter sum float32, {} per rank", count).c_str(), download<float>(dev, recv, count), want, comm.rank());
}

void check_send_recv(dist::Communicator& comm, uint64_t count) {
    // Each rank sends to the next and receives from the one before (even ranks send first).
    hcq::Device& dev = *comm.devices()[0];
    const int n = comm.size(), to = (comm.rank() + 1) % n, from = (comm.rank() + n - 1) % n;
    std::vector<int32_t> in(count);
    for (uint64_t i = 0; i < count; ++i) in[i] = input_i32(comm.rank(), i);
    hcq::Buffer send = upload(dev, in);
    hcq::Buffer recv = dev.allocate(count * 4);
    if (comm.rank() % 2 == 0) {
        comm.send(send, count * 4, to, 7);
        comm.recv(recv, count * 4, from, 7);
    } else {
        comm.recv(recv, count * 4, from, 7);
        comm.send(send, count * 4, to, 7);
    }
    std::vector<int32_t> want(count);
    for (uint64_t i = 0; i < count; ++i) want[i] = input_i32(from, i);
    expect_equal(fmt::format("send/recv of {} int32 from rank {}", count, from).c_str(), download<int32_t>(dev, recv, count), want, comm.rank());
}

std::vector<std::shared_ptr<hcq::Device>> open_devices(const std::string& list) {
    std::vector<std::shared_ptr<hcq::Device>> devices;
    size_t start = 0;
    for (;;) {
        const size_t comma = list.find(',', start);
        devices.push_back(hcq::open_device(list.substr(start, comma - start)));
        if (comma == std::string::npos) return devices;
        start = comma + 1;
    }
}

int run_check(const std::string& devices) {
    auto opened = open_devices(devices);
    const auto t0 = std::chrono::steady_clock::now();
    {
        dist::Communicator comm(opened);
        const uint64_t n = static_cast<uint64_t>(comm.size());
        // Fewer elements than ranks, uneven blocks, and more than one 4 MiB chunk (once: the small
        // chunks below cover many).
        for (uint64_t count : {uint64_t{1}, n - 1 + 2, uint64_t{1000}}) check_allreduce(comm, count);
        check_float64_sum(comm, (uint64_t{1} << 19) + 7);
        for (int root = 0; root < comm.size(); ++root) check_broadcast(comm, 3001, root);
        check_allgather(comm, 1);
        check_allgather(comm, 5000);
        check_reduce_scatter(comm, 1);
        check_reduce_scatter(comm, 3333);
        if (comm.size() > 1) check_send_recv(comm, 70000);
    }
    {
        // Small chunks: many pipeline steps, each slot reused while others are in flight.
        dist::Options small;
        small.chunk_bytes = 16 << 10;
        small.slots = 3;
        dist::Communicator comm(opened, small);
        check_allreduce(comm, 100'003);
        check_broadcast(comm, 50'001, comm.size() - 1);
        check_allgather(comm, 20'000);
        check_reduce_scatter(comm, 20'001);
        if (comm.size() > 1) check_send_recv(comm, 30'000);
        const dist::Communicator::Stats st = comm.stats();
        if (comm.rank() == 0)
            std::printf("dist-check stats: dma_copies=%llu device_copies=%llu host_copies=%llu peer_transfers=%llu in_place=%llu\n",
                        static_cast<unsigned long long>(st.dma_copies), static_cast<unsigned long long>(st.device_copies), static_cast<unsigned long long>(st.host_copies),
                        static_cast<unsigned long long>(st.peer_transfers), static_cast<unsigned long long>(st.in_place));
        if (g_failures == 0 && comm.rank() == 0) {
            std::printf("dist-check ok: %d ranks, rank 0 on %s, %.1f s\n", comm.size(), devices.c_str(),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
    }
    return g_failures ? 1 : 0;
}

// A rank fails on purpose in the middle of allreduces; the others must report it, naming it.
enum class Failure { die, fault, stall, mismatch };

int run_failure(Failure how, int victim, const std::string& devices) {
    auto opened = open_devices(devices);
    dist::Options options;
    options.chunk_bytes = 64 << 10;
    dist::Communicator comm(opened, options);
    hcq::Device& dev = *opened[0];
    const uint64_t count = 1 << 20;
    std::vector<float> in(count, 1.0f);
    hcq::Buffer b = upload(dev, in);
    comm.allreduce(b, count, DataType::float32, ReduceOp::sum);  // everyone is in, once
    auto t0 = std::chrono::steady_clock::now();
    try {
        for (int round = 0; round < 1000; ++round) {
            if (round == 2) t0 = std::chrono::steady_clock::now();
            if (comm.rank() == victim && round == 2) {
                switch (how) {
                    case Failure::die:
                        // Mid-allreduce from the others' point of view: they are in round 2 already.
                        std::fprintf(stderr, "dist-check rank %d: dying now (SIGKILL)\n", victim);
                        std::fflush(stderr);
                        ::raise(SIGKILL);
                        break;
                    case Failure::fault: dev.fail("dist-check: a fault injected on rank " + std::to_string(victim)); break;
                    case Failure::stall:
                        // Alive, but busy elsewhere: it sends no heartbeat, and the others name it after the timeout.
                        std::this_thread::sleep_for(2 * hcq::default_timeout());
                        break;
                    case Failure::mismatch:
                        // Alive and waiting, in another collective than the others.
                        comm.broadcast(b, count * 4, 0);
                        continue;
                }
            }
            comm.allreduce(b, count, DataType::float32, ReduceOp::sum);
        }
    } catch (const dist::RankError& e) {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::printf("RankError on=%d rank=%d after_ms=%.0f: %s\n", comm.rank(), e.rank(), ms, e.what());
        std::fflush(stdout);
        return 3;
    } catch (const std::exception& e) {
        std::printf("Error on rank %d: %s\n", comm.rank(), e.what());
        std::fflush(stdout);
        return comm.rank() == victim ? 4 : 1;
    }
    std::printf("rank %d: no error\n", comm.rank());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    registry::register_backends(hcq::registry());
    std::vector<std::string> args(argv + 1, argv + argc);
    try {
        if (args.size() == 2 && args[0] == "check") return run_check(args[1]);
        if (args.size() == 3 && (args[0] == "die" || args[0] == "fault" || args[0] == "stall" || args[0] == "mismatch")) {
            const Failure how = args[0] == "die"     ? Failure::die
                                : args[0] == "fault" ? Failure::fault
                                : args[0] == "stall" ? Failure::stall
                                                     : Failure::mismatch;
            return run_failure(how, std::stoi(args[1]), args[2]);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dist-check: %s\n", e.what());
        return 1;
    }
    std::fprintf(stderr, "usage: dist_check check DEVICES | die|fault|stall|mismatch RANK DEVICES\n");
    return 2;
}
