// Every Tensor op against the reference implementation (tests/tensor/reference.hpp) on random
// inputs, on the cpu device.
#include "tests/tensor/support.hpp"

#include <cmath>
#include <numbers>

using namespace baregpu;
using namespace baregpu::test;
using tensor::Tensor;
using DType = compiler::DType;

namespace {

Tensor upload(const Ref& r) { return Tensor::from_vector(r.floats(), r.shape, device_runtime()); }
Tensor upload_int(const Ref& r) { return Tensor::from_vector(r.ints(), r.shape, device_runtime()); }

}  // namespace

TEST_CASE("tensor: creation ops") {
    auto rt = device_runtime();
    check_close(Tensor::zeros({3, 4}, DType::float32, rt), Ref::filled({3, 4}, 0));
    check_close(Tensor::ones({2, 3, 2}, DType::int32, rt), Ref::filled({2, 3, 2}, 1));
    check_close(Tensor::full({5}, 2.5, DType::float32, rt), Ref::filled({5}, 2.5));
    Ref ar = Ref::filled({7}, 0);
    for (size_t i = 0; i < 7; ++i) ar.v[i] = double(i);
    check_close(Tensor::arange(7, DType::int32, rt), ar);
    check_close(Tensor::arange(7, DType::float32, rt), ar);

    auto a = Tensor::rand({1000}, 42, rt).to_vector<float>();
    auto b = Tensor::rand({1000}, 42, rt).to_vector<float>();
    auto c = Tensor::rand({1000}, 43, rt).to_vector<float>();
    CHECK(a == b);
    CHECK(a != c);
    double mean = 0;
    for (float x : a) {
        REQUIRE(x >= 0.0f);
        REQUIRE(x < 1.0f);
        mean += x / 1000.0;
    }
    CHECK(mean > 0.4);
    CHECK(mean < 0.6);
}

TEST_CASE("tensor: unary float ops") {
    std::mt19937 gen(1);
    Ref x = Ref::random({3, 37}, gen, -4, 4);
    Ref pos = Ref::random({3, 37}, gen, 0.001, 50);
    Tensor tx = upload(x), tp = upload(pos);
    check_close(tx.neg(), x.map([](double v) { return -v; }));
    check_close(tx.exp(), x.map([](double v) { return std::exp(v); }), 1e-5);
    check_close(tx.exp2(), x.map([](double v) { return std::exp2(v); }), 1e-5);
    check_close(tp.log(), pos.map([](double v) { return std::log(v); }), 1e-5, 1e-5);
    check_close(tp.log2(), pos.map([](double v) { return std::log2(v); }), 1e-5, 1e-5);
    check_close(tp.sqrt(), pos.map([](double v) { return std::sqrt(v); }));
    check_close(tp.recip(), pos.map([](double v) { return 1 / v; }));
    check_close(tx.relu(), x.map([](double v) { return std::max(v, 0.0); }));
    check_close(tx.sigmoid(), x.map([](double v) { return 1 / (1 + std::exp(-v)); }));
    check_close(tx.abs(), x.map([](double v) { return std::fabs(v); }));
    // Wide ranges and the special values of exp and log.
    Ref wide = Ref::random({200}, gen, -80, 80);
    check_close(upload(wide).exp(), wide.map([](double v) { return std::exp(v); }), 2e-5, 1e-30);
    Ref tiny = Ref::random({200}, gen, 1e-30, 1e30);
    check_close(upload(tiny).log(), tiny.map([](double v) { return std::log(v); }), 1e-5, 1e-5);
    Ref special = {{5}, {0.0, -1.0, INFINITY, -INFINITY, 1e-40}};
    Ref logs = special.map([](double v) { return std::log(double(float(v))); });
    check_close(upload(special).log(), logs, 1e-4, 1e-3);
}

TEST_CASE("tensor: binary ops broadcast like numpy") {
    std::mt19937 gen(2);
    Ref a = Ref::random({3, 1, 5}, gen, -3, 3);
    Ref b = Ref::random({4, 1}, gen, 0.5, 3);
    Tensor ta = upload(a), tb = upload(b);
    check_close(ta + tb, Ref::zip(a, b, [](double x, double y) { return x + y; }));
    check_close(ta - tb, Ref::zip(a, b, [](double x, double y) { return x - y; }));
    check_close(ta * tb, Ref::zip(a, b, [](double x, double y) { return x * y; }));
    check_close(ta / tb, Ref::zip(a, b, [](double x, double y) { return x / y; }));
    check_close(ta.maximum(tb), Ref::zip(a, b, [](double x, double y) { return std::max(x, y); }));
    check_close(ta.minimum(tb), Ref::zip(a, b, [](double x, double y) { return std::min(x, y); }));
    check_close(ta.lt(tb), Ref::zip(a, b, [](double x, double y) { return x < y ? 1.0 : 0.0; }));
    check_close(ta.ge(tb), Ref::zip(a, b, [](double x, double y) { return x >= y ? 1.0 : 0.0; }));
    check_close(ta * 2.0 + 1.0, a.map([](double x) { return x * 2 + 1; }));
    check_close(1.0 - ta, a.map([](double x) { return 1 - x; }));
    Ref same = a.map([](double x) { return std::round(x); });
    Tensor ts = upload(same);
    check_close(ts.eq(ta.cast(DType::int32).cast(DType::float32)), Ref::zip(same, a, [](double x, double y) { return x == double(int(y)) ? 1.0 : 0.0; }));
    check_close(ts.ne(ts), Ref::filled(same.shape, 0));
    CHECK_THROWS_AS(ta + upload(Ref::filled({2, 4}, 1)), std::invalid_argument);
}

TEST_CASE("tensor: int32 arithmetic, division by zero and casts") {
    std::mt19937 gen(3);
    Ref a = Ref::random_int({64}, gen, -1000, 1000);
    Ref b = Ref::random_int({64}, gen, -7, 7);
    Tensor ta = upload_int(a), tb = upload_int(b);
    check_close(ta + tb, Ref::zip(a, b, [](double x, double y) { return x + y; }));
    check_close(ta * tb - ta, Ref::zip(a, b, [](double x, double y) { return x * y - x; }));
    check_close(ta / tb, Ref::zip(a, b, [](double x, double y) { return y == 0 ? 0.0 : double(int(x) / int(y)); }));
    check_close(ta.maximum(tb), Ref::zip(a, b, [](double x, double y) { return std::max(x, y); }));
    check_close(ta.lt(tb), Ref::zip(a, b, [](double x, double y) { return x < y ? 1.0 : 0.0; }));
    Ref f = Ref::random({64}, gen, -100, 100);
    check_close(upload(f).cast(DType::int32), f.map([](double x) { return std::trunc(x); }));
    check_close(ta.cast(DType::float32) * 0.5, a.map([](double x) { return x * 0.5; }));
    check_close(tb.cast(DType::boolean), b.map([](double x) { return x != 0 ? 1.0 : 0.0; }));
    check_close(tb.cast(DType::boolean).cast(DType::float32), b.map([](double x) { return x != 0 ? 1.0 : 0.0; }));
    // Mixed int32 and float32 computes in float32.
    check_close(ta + upload(f), Ref::zip(a, f, [](double x, double y) { return x + y; }), 1e-6, 1e-4);
}

TEST_CASE("tensor: where broadcasts its three operands") {
    std::mt19937 gen(4);
    Ref c = Ref::random({4, 1}, gen, -1, 1);
    Ref a = Ref::random({4, 6}, gen, -5, 5);
    Ref b = Ref::random({6}, gen, -5, 5);
    Tensor cond = upload(c).gt(upload(Ref::filled({1}, 0)));
    Ref want = a;
    for (int64_t i = 0; i < 4; ++i)
        for (int64_t j = 0; j < 6; ++j) want.v[size_t(i * 6 + j)] = c.v[size_t(i)] > 0 ? a.v[size_t(i * 6 + j)] : b.v[size_t(j)];
    check_close(cond.where(upload(a), upload(b)), want);
}

TEST_CASE("tensor: reductions over axes, keepdim, mean") {
    std::mt19937 gen(5);
    Ref x = Ref::random({3, 5, 7}, gen, -2, 2);
    Tensor t = upload(x);
    auto sum = [](double a, double b) { return a + b; };
    auto mx = [](double a, double b) { return std::max(a, b); };
    check_close(t.sum({2}, true), x.reduce({2}, 0, sum));
    check_close(t.sum({0}), x.reduce({0}, 0, sum).reshape({5, 7}));
    check_close(t.sum({0, 2}), x.reduce({0, 2}, 0, sum).reshape({5}));
    check_close(t.sum(), x.reduce({0, 1, 2}, 0, sum).reshape({}), 1e-5, 1e-4);
    check_close(t.max({1}), x.reduce({1}, -INFINITY, mx).reshape({3, 7}));
    check_close(t.max({-1}, true), x.reduce({2}, -INFINITY, mx));
    check_close(t.mean({1, 2}), x.reduce({1, 2}, 0, sum).reshape({3}).map([](double v) { return v / 35; }));
    Ref xi = Ref::random_int({6, 9}, gen, -50, 50);
    check_close(upload_int(xi).sum({1}), xi.reduce({1}, 0, sum).reshape({6}));
    check_close(upload_int(xi).max({0}), xi.reduce({0}, -1e9, mx).reshape({9}));
    // Counting with a comparison: bool sums as int32.
    check_close(t.gt(upload(Ref::filled({1}, 0))).sum({2}), x.map([](double v) { return v > 0 ? 1.0 : 0.0; }).reduce({2}, 0, sum).reshape({3, 5}));
    // A large reduction split over many output rows and over the grid.
    Ref big = Ref::random({300, 400}, gen, -1, 1);
    check_close(upload(big).sum({1}), big.reduce({1}, 0, sum).reshape({300}), 1e-4, 1e-4);
    check_close(upload(big).sum({0}), big.reduce({0}, 0, sum).reshape({400}), 1e-4, 1e-4);
    // Whole reductions of large tensors go through 256 partial results (two kernels).
    Ref many = Ref::random({512, 300}, gen, -1, 1);
    uint64_t before = device_runtime()->kernels_launched();
    check_close(upload(many).sum(), many.reduce({0, 1}, 0, sum).reshape({}), 1e-5, 1e-3);
    CHECK(device_runtime()->kernels_launched() - before == 2);
    check_close(upload(many).max({}, true), many.reduce({0, 1}, -INFINITY, mx));
    check_close(upload(many).flip({0}).mean(), many.reduce({0, 1}, 0, sum).reshape({}).map([](double v) { return v / (512 * 300); }), 1e-5, 1e-6);
    // Rows longer than the interchanged loops keep accumulators for: the plain loop order.
    Ref wide = Ref::random({3, 5000}, gen, -1, 1);
    check_close(upload(wide).sum({0}), wide.reduce({0}, 0, sum).reshape({5000}), 1e-5, 1e-5);
    check_close(upload(wide).max({0}), wide.reduce({0}, -INFINITY, mx).reshape({5000}));
    // Interchanged with an op above the reduction and a reduction over two axes.
    Ref cube = Ref::random({6, 7, 40}, gen, -1, 1);
    check_close(upload(cube).sum({0, 1}) * 2.0 + 1.0, cube.reduce({0, 1}, 0, sum).reshape({40}).map([](double v) { return v * 2 + 1; }), 1e-5, 1e-5);
}

TEST_CASE("tensor: empty tensors and reductions over empty axes") {
    auto rt = device_runtime();
    Tensor empty = Tensor::zeros({3, 0}, DType::float32, rt);
    CHECK((empty + 1.0).to_vector<float>().empty());
    check_close(empty.sum({1}), Ref::filled({3}, 0));
    check_close(empty.max({1}), Ref::filled({3}, -INFINITY));
    CHECK(empty.sum({0}).to_vector<float>().empty());
}

TEST_CASE("tensor: movement ops are views, folded into the consumer's indexing") {
    std::mt19937 gen(6);
    Ref x = Ref::random({4, 5, 6}, gen, -1, 1);
    Tensor t = upload(x);
    check_close(t.permute({2, 0, 1}), x.permute({2, 0, 1}));
    check_close(t.flip({1}), x.flip({1}));
    check_close(t.flip({0, 2}), x.flip({0, 2}));
    check_close(t.pad({{1, 2}, {0, 0}, {3, 1}}), x.pad({{1, 2}, {0, 0}, {3, 1}}));
    check_close(t.shrink({{1, 3}, {2, 5}, {0, 6}}), x.shrink({{1, 3}, {2, 5}, {0, 6}}));
    check_close(t.reshape({20, 6}), x.reshape({20, 6}));
    check_close(t.reshape({-1}), x.reshape({120}));
    Ref col = Ref::random({4, 1, 6}, gen, -1, 1);
    check_close(upload(col).expand({4, 5, 6}), col.broadcast_to({4, 5, 6}));
    // Compositions that strides alone cannot express: reshape of a permuted or padded view.
    check_close(t.permute({1, 0, 2}).reshape({5, 24}), x.permute({1, 0, 2}).reshape({5, 24}));
    check_close(t.pad({{0, 0}, {1, 1}, {0, 0}}).reshape({4, 42}).flip({1}), x.pad({{0, 0}, {1, 1}, {0, 0}}).reshape({4, 42}).flip({1}));
    check_close(t.flip({2}).shrink({{0, 4}, {1, 4}, {2, 6}}).pad({{1, 0}, {0, 2}, {1, 1}}).permute({2, 1, 0}),
                x.flip({2}).shrink({{0, 4}, {1, 4}, {2, 6}}).pad({{1, 0}, {0, 2}, {1, 1}}).permute({2, 1, 0}));
    // A pad above an op whose value at 0 is not 0: padding is 0, not exp(0).
    check_close(t.exp().pad({{1, 1}, {0, 0}, {0, 0}}), x.map([](double v) { return std::exp(v); }).pad({{1, 1}, {0, 0}, {0, 0}}));
    // Elementwise between non-contiguous views of one buffer.
    check_close(t.flip({0}) * t.permute({0, 1, 2}) + t.shrink({{0, 4}, {0, 5}, {0, 6}}),
                Ref::zip(Ref::zip(x.flip({0}), x, [](double a, double b) { return a * b; }), x, [](double a, double b) { return a + b; }));
    // Views of realized results and of views.
    Tensor r = (t * 2.0).realize();
    check_close(r.transpose(0, 2).flip({0}), x.map([](double v) { return v * 2; }).permute({2, 1, 0}).flip({0}));
    CHECK_THROWS_AS(t.reshape({7, 7}), std::invalid_argument);
    CHECK_THROWS_AS(t.expand({4, 6, 6}), std::invalid_argument);
    CHECK_THROWS_AS(t.shrink({{0, 5}, {0, 5}, {0, 6}}), std::invalid_argument);
}

TEST_CASE("tensor: matmul, including transposed and batched operands") {
    std::mt19937 gen(7);
    for (auto [m, k, n] : {std::tuple{1, 1, 1}, {3, 5, 7}, {17, 33, 9}, {64, 128, 48}}) {
        Ref a = Ref::random({m, k}, gen, -1, 1), b = Ref::random({k, n}, gen, -1, 1);
        INFO(m << "x" << k << " @ " << k << "x" << n);
        check_close(upload(a).matmul(upload(b)), Ref::matmul(a, b), 1e-4, 1e-4);
        // The same product from a transposed buffer.
        Ref bt = b.permute({1, 0});
        check_close(upload(a).matmul(upload(bt).transpose()), Ref::matmul(a, b), 1e-4, 1e-4);
    }
    Ref a = Ref::random({2, 3, 4}, gen, -1, 1), b = Ref::random({4, 5}, gen, -1, 1);
    Tensor prod = upload(a).matmul(upload(b));
    REQUIRE(prod.shape() == compiler::Shape{2, 3, 5});
    auto got = prod.to_vector<float>();
    for (int64_t bi = 0; bi < 2; ++bi) {
        Ref slice = a.shrink({{bi, bi + 1}, {0, 3}, {0, 4}}).reshape({3, 4});
        Ref want = Ref::matmul(slice, b);
        for (size_t i = 0; i < want.v.size(); ++i) REQUIRE(std::fabs(got[size_t(bi * 15) + i] - want.v[i]) < 1e-4);
    }
    CHECK_THROWS_AS(upload(a).matmul(upload(a)), std::invalid_argument);
}

// The CPU code generator's register-blocked matmul (compiler/llvm_kernel_ir.cpp: 12 x 32 register
// blocks, 192 x 256 tiles, K in slices of 256): sizes that are not multiples of any block and
// that cross a tile or a K slice, degenerate shapes (1 x N and N x 1 are matrix-vector products:
// the general loops take them), operands through views, a fused epilogue.
TEST_CASE("tensor: matmul edge sizes and views (blocked kernel)") {
    std::mt19937 gen(17);
    for (auto [m, k, n] : {std::tuple{200, 300, 270}, {1, 70, 300}, {300, 70, 1}, {13, 1, 45}, {12, 256, 32}, {25, 17, 33}, {193, 5, 257}}) {
        INFO(m << "x" << k << " @ " << k << "x" << n);
        Ref a = Ref::random({m, k}, gen, -1, 1), b = Ref::random({k, n}, gen, -1, 1);
        if (too_slow_to_interpret(int64_t(m) * k * n)) continue;
        Ref want = Ref::matmul(a, b);
        check_close(upload(a).matmul(upload(b)), want, 1e-4, 1e-4);
        // Both operands stored transposed.
        check_close(upload(a.permute({1, 0})).transpose().matmul(upload(b.permute({1, 0})).transpose()), want, 1e-4, 1e-4);
        // A as a window of a larger padded buffer, B flipped twice (negative strides).
        Ref big = Ref::random({m + 3, k + 5}, gen, -1, 1);
        Ref window = big.shrink({{2, m + 2}, {1, k + 1}});
        check_close(upload(big).shrink({{2, m + 2}, {1, k + 1}}).matmul(upload(b.flip({0, 1})).flip({0, 1})), Ref::matmul(window, b), 1e-4, 1e-4);
        // A zero-padded operand (masked loads): pad K on both sides of both operands.
        Ref ap = a.pad({{0, 0}, {2, 1}}), bp = b.pad({{2, 1}, {0, 0}});
        check_close(upload(a).pad({{0, 0}, {2, 1}}).matmul(upload(b).pad({{2, 1}, {0, 0}})), Ref::matmul(ap, bp), 1e-4, 1e-4);
        // The epilogue the scheduler fuses: relu(a @ b + bias), bias broadcast over rows.
        Ref bias = Ref::random({1, n}, gen, -1, 1);
        Ref fused = Ref::zip(want, bias, [](double x, double y) { return std::max(x + y, 0.0); });
        check_close((upload(a).matmul(upload(b)) + upload(bias)).relu(), fused, 1e-4, 1e-4);
    }
    // Batched, the right operand broadcast over the batch.
    Ref a = Ref::random({3, 20, 40}, gen, -1, 1), b = Ref::random({40, 35}, gen, -1, 1);
    auto got = upload(a).matmul(upload(b)).to_vector<float>();
    for (int64_t bi = 0; bi < 3; ++bi) {
        Ref want = Ref::matmul(a.shrink({{bi, bi + 1}, {0, 20}, {0, 40}}).reshape({20, 40}), b);
        for (size_t i = 0; i < want.v.size(); ++i) REQUIRE(std::fabs(got[size_t(bi * 700) + i] - want.v[i]) < 1e-4);
    }
}

TEST_CASE("tensor: softmax") {
    std::mt19937 gen(8);
    Ref x = Ref::random({6, 50}, gen, -10, 10);
    Ref mx = x.reduce({1}, -INFINITY, [](double a, double b) { return std::max(a, b); });
    Ref e = Ref::zip(x, mx, [](double a, double m) { return std::exp(a - m); });
    Ref s = e.reduce({1}, 0, [](double a, double b) { return a + b; });
    check_close(upload(x).softmax(), Ref::zip(e, s, [](double a, double b) { return a / b; }), 1e-5, 1e-6);
    Ref e0 = Ref::zip(x, x.reduce({0}, -INFINITY, [](double a, double b) { return std::max(a, b); }), [](double a, double m) { return std::exp(a - m); });
    Ref s0 = e0.reduce({0}, 0, [](double a, double b) { return a + b; });
    check_close(upload(x).softmax(0), Ref::zip(e0, s0, [](double a, double b) { return a / b; }), 1e-5, 1e-6);
    // Rows on both sides of the scheduler's fused-row limit (16384), batch axes in front, and
    // rows that the runtime's workgroups split (5 x 7000: two groups of 17500 elements).
    for (auto shape : {RefShape{2, 3, 7}, RefShape{2, 16384}, RefShape{1, 16385}, RefShape{5, 7000}}) {
        Ref y = Ref::random(shape, gen, -10, 10);
        int last = int(shape.size()) - 1;
        Ref ym = y.reduce({last}, -INFINITY, [](double a, double b) { return std::max(a, b); });
        Ref ye = Ref::zip(y, ym, [](double a, double m) { return std::exp(a - m); });
        Ref ys = ye.reduce({last}, 0, [](double a, double b) { return a + b; });
        check_close(upload(y).softmax(), Ref::zip(ye, ys, [](double a, double b) { return a / b; }), 1e-5, 1e-6);
    }
}

TEST_CASE("tensor: a row maximum ignores NaN, fused or not") {
    // maxnum semantics in every reduction loop: a NaN element does not become the maximum.
    std::vector<float> v{1, NAN, 3, -2, NAN, NAN, NAN, NAN};
    for (int row : {4, 0}) {  // 4: the row fused into its consumer; 0: a reduction kernel
        Tensor t = Tensor::from_vector(v, {2, 4}, device_runtime());
        Tensor m = row ? t - t.max({1}, true) : t.max({1}, true);
        auto got = m.to_vector<float>();
        if (row) {
            CHECK(got[0] == -2.0f);
            CHECK(std::isnan(got[1]));
            CHECK(got[2] == 0.0f);
            CHECK(got[3] == -5.0f);
            for (size_t i = 4; i < 8; ++i) CHECK(std::isnan(got[i]));
        } else {
            CHECK(got[0] == 3.0f);
            CHECK(got[1] == -INFINITY);
        }
    }
}

TEST_CASE("tensor: layernorm, tanh, gelu") {
    std::mt19937 gen(9);
    Ref x = Ref::random({7, 64}, gen, -3, 5);
    Ref mean = x.reduce({1}, 0, [](double a, double b) { return a + b; }).map([](double v) { return v / 64; });
    Ref c = Ref::zip(x, mean, [](double a, double m) { return a - m; });
    Ref var = c.map([](double v) { return v * v; }).reduce({1}, 0, [](double a, double b) { return a + b; }).map([](double v) { return v / 64; });
    check_close(upload(x).layernorm(), Ref::zip(c, var, [](double a, double v) { return a / std::sqrt(v + 1e-5); }), 1e-4, 1e-4);
    Ref y = Ref::random({300}, gen, -6, 6);
    check_close(upload(y).tanh(), y.map([](double v) { return std::tanh(v); }), 1e-5, 1e-6);
    check_close(upload(y).gelu(), y.map([](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v))); }), 1e-5, 1e-6);
}

TEST_CASE("tensor: conv2d with and without padding is one kernel") {
    std::mt19937 gen(10);
    // The last two take the register-blocked kernel (output channels as rows, output columns as
    // columns, channels x window as K: 270 crosses a K slice; ragged blocks); the others are
    // too narrow for it and take the general loops.
    for (auto [n, c, h, w, o, k, pad] : {std::tuple{1, 1, 5, 5, 1, 3, 0}, {2, 3, 8, 7, 4, 3, 1}, {1, 4, 6, 9, 2, 1, 0}, {2, 2, 5, 6, 3, 5, 2},
                                         {2, 30, 13, 34, 20, 3, 1}, {1, 5, 6, 40, 13, 1, 0}}) {
        INFO("N" << n << " C" << c << " " << h << "x" << w << " O" << o << " K" << k << " pad " << pad);
        Ref x = Ref::random({n, c, h, w}, gen, -1, 1), wt = Ref::random({o, c, k, k}, gen, -1, 1);
        Ref xp = x.pad({{0, 0}, {0, 0}, {pad, pad}, {pad, pad}});
        int64_t oh = h + 2 * pad - k + 1, ow = w + 2 * pad - k + 1;
        if (too_slow_to_interpret(int64_t(n) * o * oh * ow * c * k * k)) continue;
        Ref want = Ref::filled({n, o, oh, ow}, 0);
        for (int64_t b = 0; b < n; ++b)
            for (int64_t q = 0; q < o; ++q)
                for (int64_t i = 0; i < oh; ++i)
                    for (int64_t j = 0; j < ow; ++j) {
                        double acc = 0;
                        for (int64_t ch = 0; ch < c; ++ch)
                            for (int64_t a = 0; a < k; ++a)
                                for (int64_t e = 0; e < k; ++e) acc += xp.at({b, ch, i + a, j + e}) * wt.at({q, ch, a, e});
                        want.v[size_t(want.ravel({b, q, i, j}))] = acc;
                    }
        Tensor y = upload(x).conv2d(upload(wt), pad);
        uint64_t before = device_runtime()->kernels_launched();
        check_close(y, want, 1e-4, 1e-4);
        CHECK(device_runtime()->kernels_launched() - before == 1);
    }
    // Windows of a non-contiguous input (flipped): the window view stacks on it.
    Ref x = Ref::random({1, 2, 6, 6}, gen, -1, 1), wt = Ref::random({1, 2, 3, 3}, gen, -1, 1);
    Ref xf = x.flip({3});
    Ref want = Ref::filled({1, 1, 4, 4}, 0);
    for (int64_t i = 0; i < 4; ++i)
        for (int64_t j = 0; j < 4; ++j) {
            double acc = 0;
            for (int64_t ch = 0; ch < 2; ++ch)
                for (int64_t a = 0; a < 3; ++a)
                    for (int64_t e = 0; e < 3; ++e) acc += xf.at({0, ch, i + a, j + e}) * wt.at({0, ch, a, e});
            want.v[size_t(i * 4 + j)] = acc;
        }
    check_close(upload(x).flip({3}).conv2d(upload(wt)), want, 1e-4, 1e-4);
    CHECK_THROWS_AS(upload(x).conv2d(upload(Ref::random({1, 3, 3, 3}, gen, -1, 1))), std::invalid_argument);
}
