// float16 and bfloat16: storage rounding (to nearest even, subnormals, overflow, NaN) checked
// bit for bit against known encodings and a reference rounding in double, and arithmetic and
// reductions that compute in float32 and round on store.
#include "compiler/scheduler.hpp"
#include "tests/tensor/support.hpp"

#include <cmath>
#include <limits>

using namespace baregpu;
using namespace baregpu::test;
using tensor::Tensor;
using DType = compiler::DType;

namespace {

// x rounded to the nearest value with `mantissa` explicit bits and exponents >= min_exp
// (below it: the subnormal grid), ties to even; beyond max_finite: infinity.
double round_to(double x, int mantissa, int min_exp, double max_finite) {
    if (std::isnan(x) || std::isinf(x) || x == 0) return x;
    int e = std::ilogb(x);
    e = std::max(e, min_exp);
    double quantum = std::ldexp(1.0, e - mantissa);
    double r = std::nearbyint(x / quantum) * quantum;  // default rounding mode: to nearest even
    if (std::fabs(r) > max_finite) return std::copysign(INFINITY, x);
    return r;
}
double round_half(double x) { return round_to(x, 10, -14, 65504.0); }
double round_bfloat(double x) { return round_to(x, 7, -126, 3.3895313892515355e38); }

Ref rounded(const Ref& r, DType t) { return r.map(t == DType::float16 ? round_half : round_bfloat); }

}  // namespace

TEST_CASE("half: known encodings of float16 and bfloat16") {
    auto rt = device_runtime();
    std::vector<float> values{1.0f, -2.0f, 65504.0f, 1e5f, std::ldexp(1.0f, -24), 0.1f, -0.0f, std::numeric_limits<float>::quiet_NaN(),
                              65520.0f, std::ldexp(1.0f, -25)};
    auto half = Tensor::from_vector(values, {10}, rt).cast(DType::float16).to_vector<uint16_t>();
    std::vector<uint16_t> want_half{0x3c00, 0xc000, 0x7bff, 0x7c00, 0x0001, 0x2e66, 0x8000, 0x7e00, 0x7c00, 0x0000};
    for (size_t i = 0; i < values.size(); ++i) {
        INFO("float16 of " << values[i]);
        if (std::isnan(values[i])) {
            CHECK((half[i] & 0x7c00) == 0x7c00);
            CHECK((half[i] & 0x03ff) != 0);
        } else {
            CHECK(half[i] == want_half[i]);
        }
    }
    auto bf = Tensor::from_vector(values, {10}, rt).cast(DType::bfloat16).to_vector<uint16_t>();
    std::vector<uint16_t> want_bf{0x3f80, 0xc000, 0x4780, 0x47c3, 0x3380, 0x3dcd, 0x8000, 0x7fc0, 0x4780, 0x3300};
    for (size_t i = 0; i < values.size(); ++i) {
        INFO("bfloat16 of " << values[i]);
        CHECK(bf[i] == want_bf[i]);
    }
    // And back: the bits widen exactly.
    auto back = Tensor::from_bits({0x3c00, 0x0001, 0x7c00, 0xfbff}, {4}, DType::float16, rt).to_vector<float>();
    CHECK(back == std::vector<float>{1.0f, std::ldexp(1.0f, -24), INFINITY, -65504.0f});
}

TEST_CASE("half: casts round to nearest even over the whole range") {
    std::mt19937 gen(21);
    for (DType t : {DType::float16, DType::bfloat16}) {
        INFO(compiler::dtype_name(t));
        for (auto [lo, hi] : {std::pair{-1.0, 1.0}, {-70000.0, 70000.0}, {-1e-4, 1e-4}, {-1e-7, 1e-7}}) {
            Ref x = Ref::random({500}, gen, lo, hi);
            Tensor tx = Tensor::from_vector(x.floats(), x.shape, device_runtime());
            check_close(tx.cast(t), rounded(x, t), 0, 0);
        }
    }
}

TEST_CASE("half: arithmetic, reductions and matmul compute in float32 and round on store") {
    std::mt19937 gen(22);
    for (DType t : {DType::float16, DType::bfloat16}) {
        INFO(compiler::dtype_name(t));
        Ref a = rounded(Ref::random({8, 33}, gen, -4, 4), t), b = rounded(Ref::random({33}, gen, -4, 4), t);
        Tensor ta = Tensor::from_vector(a.floats(), a.shape, device_runtime()).cast(t);
        Tensor tb = Tensor::from_vector(b.floats(), b.shape, device_runtime()).cast(t);
        Tensor prod = ta * tb;
        REQUIRE(prod.dtype() == t);
        check_close(prod, rounded(Ref::zip(a, b, [](double x, double y) { return double(float(x * y)); }), t), 0, 0);
        Tensor s = (ta + tb).sum({1});
        REQUIRE(s.dtype() == t);
        // Each add rounds to the 16-bit type; the sum accumulates in float32 and rounds once.
        Ref want = rounded(rounded(Ref::zip(a, b, [](double x, double y) { return x + y; }), t).reduce({1}, 0, [](double x, double y) { return x + y; }).reshape({8}), t);
        // Sums in float32 may differ from the double reference by float32 rounding before the
        // final 16-bit rounding: allow one 16-bit step.
        check_close(s, want, t == DType::float16 ? 1e-3 : 8e-3, 1e-3);
        check_close(ta.exp(), rounded(a.map([](double v) { return std::exp(v); }), t), t == DType::float16 ? 1e-3 : 8e-3);
        // Mixed with float32 widens.
        CHECK((ta + Tensor::ones({1}, DType::float32, device_runtime())).dtype() == DType::float32);
        Ref m = rounded(Ref::random({5, 33}, gen, -1, 1), t);
        Tensor tm = Tensor::from_vector(m.floats(), m.shape, device_runtime()).cast(t);
        Ref mm = rounded(Ref::matmul(a, m.permute({1, 0})), t);
        CHECK(compiler::schedule(ta.matmul(tm.transpose()).node()).size() == 1);
        check_close(ta.matmul(tm.transpose()), mm, t == DType::float16 ? 2e-3 : 1.6e-2, 2e-3);
    }
}
