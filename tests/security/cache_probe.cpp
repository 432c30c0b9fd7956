// A program that uses the kernel cache as any baregpu program does ($BAREGPU_CACHE_DIR): it runs
// a matmul, a fused elementwise sum and a reduction on the cpu device, checks every value
// against the host, and prints "ok hits=<cache hits> generated=<kernels compiled>". A wrong value
// prints "WRONG ..." and exits 1. The attack suite runs it before and after damaging the cache.
#include "drivers/registry.hpp"
#include "hcq/registry.hpp"
#include "tensor/runtime.hpp"
#include "tensor/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

using namespace baregpu;

namespace {

bool close(float got, double want) { return std::fabs(got - want) <= 1e-3 * (1 + std::fabs(want)); }

}  // namespace

int main() {
    try {
        registry::register_backends(hcq::registry());
        auto rt = std::make_shared<tensor::Runtime>(hcq::open_device("cpu"));
        const int n = 96;
        std::vector<float> a(n * n), b(n * n);
        for (int i = 0; i < n * n; ++i) {
            a[size_t(i)] = float((i * 7) % 13) - 6.0f;
            b[size_t(i)] = float((i * 5) % 11) - 5.0f;
        }
        tensor::Tensor ta = tensor::Tensor::from_vector(a, {n, n}, rt), tb = tensor::Tensor::from_vector(b, {n, n}, rt);
        std::vector<float> mm = ta.matmul(tb).to_vector<float>();
        int wrong = 0;
        for (int i = 0; i < n; ++i) {
            for (int j = 0; j < n; ++j) {
                double want = 0;
                for (int k = 0; k < n; ++k) want += double(a[size_t(i * n + k)]) * b[size_t(k * n + j)];
                wrong += !close(mm[size_t(i * n + j)], want);
            }
        }
        if (wrong) {
            std::printf("WRONG matmul %d: %d of %d values differ\n", n, wrong, n * n);
            return 1;
        }
        std::vector<float> s = ((ta - tb) * 2.0).sum().to_vector<float>();
        double want = 0;
        for (int i = 0; i < n * n; ++i) want += (double(a[size_t(i)]) - b[size_t(i)]) * 2.0;
        if (s.size() != 1 || !close(s[0], want)) {
            std::printf("WRONG sum(2(a-b)): got %g, want %g\n", s.empty() ? 0.0 : double(s[0]), want);
            return 1;
        }
        std::vector<float> rows = (ta * tb + 1.0).sum({1}).to_vector<float>();
        for (int i = 0; i < n; ++i) {
            double row = 0;
            for (int j = 0; j < n; ++j) row += double(a[size_t(i * n + j)]) * b[size_t(i * n + j)] + 1.0;
            if (rows.size() != size_t(n) || !close(rows[size_t(i)], row)) {
                std::printf("WRONG row sums of a*b+1: row %d\n", i);
                return 1;
            }
        }
        std::vector<float> m = (ta - 1.0).max({0}).to_vector<float>();
        for (int j = 0; j < n; ++j) {
            double col = -1e30;
            for (int i = 0; i < n; ++i) col = std::max(col, double(a[size_t(i * n + j)]) - 1.0);
            if (m.size() != size_t(n) || !close(m[size_t(j)], col)) {
                std::printf("WRONG column maxima of a-1: column %d\n", j);
                return 1;
            }
        }
        std::printf("ok hits=%llu generated=%llu\n", static_cast<unsigned long long>(rt->compiler().cache_hits()),
                    static_cast<unsigned long long>(rt->compiler().generated()));
        return 0;
    } catch (const std::exception& e) {
        std::printf("error: %s\n", e.what());
        return 2;
    }
}
