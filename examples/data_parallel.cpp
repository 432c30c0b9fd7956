// Data-parallel training with baregpu::dist: every rank holds a shard of the data, computes its
// gradient with Tensor operations on its own device, and the gradients are summed across ranks by
// an allreduce on the device buffer that holds them; every rank then takes the same step. The
// model is least squares (w minimising the mean of (X w - y)^2), whose gradient is a sum over
// rows, so the sharded steps must match steps on the whole data in one process: rank 0 runs
// those too and compares.
//
//   mpirun --oversubscribe -np 4 build/examples/data_parallel [--device NAME] [--steps K]
//
// Prints the loss as it goes and, on rank 0, the largest difference between the weights of the
// two runs; exits 1 when it is above the float32 tolerance.
#include "dist/communicator.hpp"
#include "drivers/registry.hpp"
#include "hcq/registry.hpp"
#include "tensor/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

using namespace baregpu;
using tensor::Tensor;

constexpr int64_t kRows = 4096;  // examples, split across the ranks
constexpr int64_t kFeatures = 64;
constexpr double kLearningRate = 0.1;
constexpr float kTolerance = 1e-4f;

struct Problem {
    Tensor x, y;
};

// The same data on every rank: Tensor::rand gives the same values for a seed on every device.
Problem make_problem(const std::shared_ptr<tensor::Runtime>& rt) {
    Tensor x = Tensor::rand({kRows, kFeatures}, 1, rt) - 0.5;
    Tensor w_true = Tensor::rand({kFeatures, 1}, 2, rt);
    return {x, x.matmul(w_true) + (Tensor::rand({kRows, 1}, 3, rt) - 0.5) * 0.01};
}

// d/dw of mean((X w - y)^2) over all kRows rows, restricted to the rows given: summing it over a
// partition of the rows gives the full gradient.
Tensor gradient(const Tensor& x, const Tensor& y, const Tensor& w) {
    return x.transpose().matmul(x.matmul(w) - y) * (2.0 / kRows);
}

double loss(const Problem& p, const Tensor& w) {
    Tensor r = p.x.matmul(w) - p.y;
    return static_cast<double>((r * r).mean().to_vector<float>()[0]);
}

// The device buffer a realized tensor computes into: the collectives work on device memory.
hcq::Buffer buffer_of(const Tensor& t) {
    t.realize();
    const hcq::Buffer& b = t.node()->realized;
    if (!b || b.size() < static_cast<uint64_t>(t.numel()) * 4) {
        std::fprintf(stderr, "data_parallel: the gradient is not a realized float32 buffer\n");
        std::exit(1);
    }
    return b;
}

}  // namespace

int main(int argc, char** argv) {
    registry::register_backends(hcq::registry());
    std::string device;
    int steps = 20;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--device" && i + 1 < argc) {
            device = argv[++i];
        } else if (a == "--steps" && i + 1 < argc) {
            steps = std::atoi(argv[++i]);
        } else {
            std::fprintf(stderr, "usage: data_parallel [--device NAME] [--steps K]\n");
            return 2;
        }
    }
    try {
        auto dev = device.empty() ? hcq::open_default_device() : hcq::open_device(device);
        auto rt = tensor::Runtime::for_device(dev);
        dist::Communicator comm({dev});
        const int rank = comm.rank(), ranks = comm.size();
        const Problem all = make_problem(rt);
        const int64_t lo = kRows * rank / ranks, hi = kRows * (rank + 1) / ranks;
        const Tensor xs = all.x.shrink({{lo, hi}, {0, kFeatures}});
        const Tensor ys = all.y.shrink({{lo, hi}, {0, 1}});

        Tensor w = Tensor::zeros({kFeatures, 1}, tensor::DType::float32, rt);
        for (int step = 0; step < steps; ++step) {
            Tensor g = gradient(xs, ys, w);
            comm.allreduce(buffer_of(g), kFeatures, dist::DataType::float32, dist::ReduceOp::sum);
            w = (w - g * kLearningRate).realize();
            if (rank == 0 && (step % 5 == 0 || step + 1 == steps)) std::printf("step %2d  loss %.6f\n", step, loss(all, w));
        }
        if (rank != 0) return 0;

        // The same steps on the whole data in this process alone.
        Tensor w1 = Tensor::zeros({kFeatures, 1}, tensor::DType::float32, rt);
        for (int step = 0; step < steps; ++step) w1 = (w1 - gradient(all.x, all.y, w1) * kLearningRate).realize();
        const auto a = w.to_vector<float>(), b = w1.to_vector<float>();
        float worst = 0;
        for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
        const bool ok = worst <= kTolerance;
        std::printf("data_parallel: %d ranks on %s, %d steps: max |w - w_single_process| = %.3g (tolerance %.0e): %s\n", ranks,
                    dev->name().c_str(), steps, static_cast<double>(worst), static_cast<double>(kTolerance), ok ? "ok" : "MISMATCH");
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "data_parallel: %s\n", e.what());
        return 1;
    }
}
