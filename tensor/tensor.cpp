#include "tensor/tensor.hpp"

#include "base/error.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <numbers>
#include <numeric>
#include <random>
#include <stdexcept>

namespace baregpu::tensor {

using compiler::Node;
using compiler::NodeRef;
using compiler::Op;
using compiler::ShapeTracker;

namespace {

std::shared_ptr<Runtime> or_default(std::shared_ptr<Runtime> rt) { return rt ? std::move(rt) : Runtime::default_runtime(); }

// float32 > float16/bfloat16 > int32 > bool; float16 with bfloat16 meets in float32.
DType promote(DType a, DType b) {
    if (a == b) return a;
    if (a == DType::float32 || b == DType::float32) return DType::float32;
    if (compiler::is_half(a) && compiler::is_half(b)) return DType::float32;
    if (compiler::is_half(a)) return a;
    if (compiler::is_half(b)) return b;
    if (a == DType::int32 || b == DType::int32) return DType::int32;
    return DType::boolean;
}

}  // namespace

Shape broadcast_shape(const Shape& a, const Shape& b) {
    Shape out(std::max(a.size(), b.size()), 1);
    for (size_t i = 0; i < out.size(); ++i) {
        int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
        int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
        if (da != db && da != 1 && db != 1) {
            throw std::invalid_argument(fmt::format("cannot broadcast shapes {} and {}: dimension {} from the end is {} vs {}",
                                                    compiler::shape_string(a), compiler::shape_string(b), i, da, db));
        }
        out[out.size() - 1 - i] = da == 1 ? db : da;
    }
    return out;
}

Tensor::Tensor(NodeRef node, std::shared_ptr<Runtime> runtime) : node_(std::move(node)), rt_(std::move(runtime)) {}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, std::shared_ptr<Runtime> rt) {
    // One constant element seen through a broadcasting view: no storage until realized.
    NodeRef c = Node::make_constant(value, dtype, Shape(shape.size(), 1));
    Tensor t(c, or_default(std::move(rt)));
    return t.expand(shape);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, std::shared_ptr<Runtime> rt) { return full(shape, 0, dtype, std::move(rt)); }
Tensor Tensor::ones(const Shape& shape, DType dtype, std::shared_ptr<Runtime> rt) { return full(shape, 1, dtype, std::move(rt)); }

Tensor Tensor::arange(int64_t n, DType dtype, std::shared_ptr<Runtime> rt) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), 0);
    Tensor t = from_vector(v, {n}, std::move(rt));
    return dtype == DType::int32 ? t : t.cast(dtype);
}

Tensor Tensor::rand(const Shape& shape, uint64_t seed, std::shared_ptr<Runtime> rt) {
    // 24 random bits per value: exactly representable in float32, uniform over [0, 1).
    std::mt19937_64 gen(seed);
    std::vector<float> v(size_t(compiler::numel(shape)));
    for (float& x : v) x = float(gen() >> 40) * (1.0f / 16777216.0f);
    return from_vector(v, shape, std::move(rt));
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape, std::shared_ptr<Runtime> rt) {
    rt = or_default(std::move(rt));
    return Tensor(rt->upload(std::as_bytes(std::span(values)), DType::float32, shape), rt);
}

Tensor Tensor::from_vector(const std::vector<int32_t>& values, const Shape& shape, std::shared_ptr<Runtime> rt) {
    rt = or_default(std::move(rt));
    return Tensor(rt->upload(std::as_bytes(std::span(values)), DType::int32, shape), rt);
}

Tensor Tensor::scalar(double value) const { return with(Node::make_constant(value, dtype() == DType::boolean ? DType::float32 : dtype(), {})); }

Tensor Tensor::from_bits(const std::vector<uint16_t>& bits, const Shape& shape, DType dtype, std::shared_ptr<Runtime> rt) {
    if (!compiler::is_half(dtype)) {
        throw std::invalid_argument(fmt::format("from_bits: {} is not a 16-bit float type", compiler::dtype_name(dtype)));
    }
    rt = or_default(std::move(rt));
    return Tensor(rt->upload(std::as_bytes(std::span(bits)), dtype, shape), rt);
}

Tensor Tensor::movement(const std::function<ShapeTracker(const ShapeTracker&)>& op) const {
    // Applied to the tracker of an unrealized view directly, so that strides compose (an expand
    // of a transpose stays one strided view instead of a stack of two).
    if (node_->kind == compiler::NodeKind::view && !node_->realized) return with(Node::make_view(node_->src[0], op(node_->view)));
    return with(Node::make_view(node_, op(ShapeTracker::contiguous(shape()))));
}

Tensor Tensor::unary(Op op) const { return with(Node::make_alu(op, dtype(), {node_})); }

Tensor Tensor::cast(DType to) const {
    if (to == dtype()) return *this;
    return with(Node::make_alu(Op::cast, to, {node_}));
}

Tensor Tensor::binary(Op op, const Tensor& o, bool to_bool) const {
    if (o.rt_ != rt_) throw Error(rt_->device().name(), "an operation on tensors of two devices; move one first");
    Shape shape = broadcast_shape(this->shape(), o.shape());
    DType t = promote(dtype(), o.dtype());
    if (!to_bool && t == DType::boolean && op != Op::logical_and && op != Op::logical_or && op != Op::max) t = DType::int32;
    Tensor a = cast(t).expand_to(shape), b = o.cast(t).expand_to(shape);
    return with(Node::make_alu(op, to_bool ? DType::boolean : t, {a.node_, b.node_}));
}

Tensor Tensor::neg() const { return dtype() == DType::boolean ? logical_not() : unary(Op::neg); }
Tensor Tensor::as_float() const { return compiler::is_float(dtype()) ? *this : cast(DType::float32); }
Tensor Tensor::exp2() const { return as_float().unary(Op::exp2); }
Tensor Tensor::log2() const { return as_float().unary(Op::log2); }
// exp and log are one op to the user: a 16-bit input is computed in float32 and rounded once,
// not after the scaling inside.
Tensor Tensor::exp() const {
    if (compiler::is_half(dtype())) return cast(DType::float32).exp().cast(dtype());
    return (as_float() * (1.0 / std::log(2.0))).exp2();
}
Tensor Tensor::log() const {
    if (compiler::is_half(dtype())) return cast(DType::float32).log().cast(dtype());
    return log2() * std::log(2.0);
}
Tensor Tensor::sqrt() const { return as_float().unary(Op::sqrt); }
Tensor Tensor::recip() const { return as_float().unary(Op::recip); }
Tensor Tensor::relu() const { return maximum(scalar(0)); }
Tensor Tensor::sigmoid() const { return (1.0 + neg().exp()).recip(); }
Tensor Tensor::abs() const { return maximum(neg()); }
Tensor Tensor::logical_not() const { return cast(DType::boolean).unary(Op::logical_not); }

Tensor Tensor::add(const Tensor& o) const { return binary(Op::add, o); }
Tensor Tensor::sub(const Tensor& o) const { return binary(Op::sub, o); }
Tensor Tensor::mul(const Tensor& o) const { return binary(Op::mul, o); }
Tensor Tensor::div(const Tensor& o) const { return binary(Op::div, o); }
Tensor Tensor::maximum(const Tensor& o) const { return binary(Op::max, o); }
Tensor Tensor::minimum(const Tensor& o) const { return neg().maximum(o.neg()).neg(); }
Tensor Tensor::lt(const Tensor& o) const { return binary(Op::cmp_lt, o, true); }
Tensor Tensor::gt(const Tensor& o) const { return o.lt(*this); }
Tensor Tensor::le(const Tensor& o) const { return gt(o).logical_not(); }
Tensor Tensor::ge(const Tensor& o) const { return lt(o).logical_not(); }
Tensor Tensor::eq(const Tensor& o) const { return binary(Op::cmp_eq, o, true); }
Tensor Tensor::ne(const Tensor& o) const { return binary(Op::cmp_ne, o, true); }

Tensor Tensor::where(const Tensor& a, const Tensor& b) const {
    if (a.rt_ != rt_ || b.rt_ != rt_) throw Error(rt_->device().name(), "where: tensors of different devices");
    Shape shape = broadcast_shape(broadcast_shape(this->shape(), a.shape()), b.shape());
    DType t = promote(a.dtype(), b.dtype());
    Tensor c = cast(DType::boolean).expand_to(shape);
    return with(Node::make_alu(Op::where, t, {c.node_, a.cast(t).expand_to(shape).node_, b.cast(t).expand_to(shape).node_}));
}

int Tensor::axis(int a) const {
    int n = int(ndim());
    if (a < -n || a >= n) throw std::invalid_argument(fmt::format("axis {} is outside rank {}", a, n));
    return a < 0 ? a + n : a;
}

Tensor Tensor::reduce(Op op, std::vector<int> axes, bool keepdim) const {
    if (axes.empty()) {
        axes.resize(ndim());
        std::iota(axes.begin(), axes.end(), 0);
    }
    for (int& a : axes) a = axis(a);
    Tensor src = dtype() == DType::boolean ? cast(DType::int32) : *this;
    int64_t out = numel();
    for (int a : axes) out = shape()[size_t(a)] ? out / shape()[size_t(a)] : 0;
    Tensor r;
    // A large reduction to one element in two kernels: 256 partial results first, so that the
    // work spreads over the device's workgroups (one output element is one workgroup's work).
    // Not for 16-bit floats, whose partials would be rounded to 16 bits.
    constexpr int64_t kParts = 256;
    if (out == 1 && numel() >= 65536 && numel() % kParts == 0 && !compiler::is_half(src.dtype())) {
        Tensor parts = src.reshape({kParts, numel() / kParts});
        parts = parts.with(Node::make_reduce(op, parts.node_, {1}));
        r = parts.with(Node::make_reduce(op, parts.node_, {0})).reshape(Shape(ndim(), 1));
    } else {
        r = with(Node::make_reduce(op, src.node_, axes));
    }
    if (keepdim) return r;
    Shape kept;
    for (size_t d = 0; d < ndim(); ++d) {
        if (std::find(axes.begin(), axes.end(), int(d)) == axes.end()) kept.push_back(shape()[d]);
    }
    return r.reshape(kept);
}

Tensor Tensor::sum(std::vector<int> axes, bool keepdim) const { return reduce(Op::reduce_sum, std::move(axes), keepdim); }
Tensor Tensor::max(std::vector<int> axes, bool keepdim) const { return reduce(Op::reduce_max, std::move(axes), keepdim); }

Tensor Tensor::mean(std::vector<int> axes, bool keepdim) const {
    Tensor s = as_float().sum(axes, keepdim);
    return s * (double(s.numel()) / double(numel()));
}

Tensor Tensor::reshape(Shape shape) const {
    int64_t known = 1;
    int infer = -1;
    for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] == -1) {
            if (infer >= 0) throw std::invalid_argument(fmt::format("reshape: more than one -1 in {}", compiler::shape_string(shape)));
            infer = int(d);
        } else {
            known *= shape[d];
        }
    }
    if (infer >= 0 && known != 0) shape[size_t(infer)] = numel() / known;
    if (shape == this->shape()) return *this;
    return movement([&](const ShapeTracker& st) { return st.reshape(shape); });
}

Tensor Tensor::permute(std::vector<int> order) const {
    for (int& o : order) o = axis(o);
    return movement([&](const ShapeTracker& st) { return st.permute(order); });
}

Tensor Tensor::transpose(int a, int b) const {
    std::vector<int> order(ndim());
    std::iota(order.begin(), order.end(), 0);
    std::swap(order[size_t(axis(a))], order[size_t(axis(b))]);
    return permute(order);
}

Tensor Tensor::expand(const Shape& shape) const {
    if (shape == this->shape()) return *this;
    return movement([&](const ShapeTracker& st) { return st.expand(shape); });
}

Tensor Tensor::expand_to(const Shape& shape) const {
    if (shape == this->shape()) return *this;
    Shape padded(shape.size() - ndim(), 1);
    padded.insert(padded.end(), this->shape().begin(), this->shape().end());
    return reshape(padded).expand(shape);
}

Tensor Tensor::pad(const std::vector<std::pair<int64_t, int64_t>>& before_after) const {
    return movement([&](const ShapeTracker& st) { return st.pad(before_after); });
}

Tensor Tensor::shrink(const std::vector<std::pair<int64_t, int64_t>>& begin_end) const {
    return movement([&](const ShapeTracker& st) { return st.shrink(begin_end); });
}

Tensor Tensor::flip(std::vector<int> axes) const {
    for (int& a : axes) a = axis(a);
    return movement([&](const ShapeTracker& st) { return st.flip(axes); });
}

Tensor Tensor::matmul(const Tensor& o) const {
    if (ndim() < 2 || o.ndim() < 2) {
        throw std::invalid_argument(fmt::format("matmul: operands of rank {} and {}; both need rank 2 or more", ndim(), o.ndim()));
    }
    int64_t k = shape().back();
    if (o.shape()[o.ndim() - 2] != k) {
        throw std::invalid_argument(fmt::format("matmul: {} @ {}: inner dimensions {} and {} differ", compiler::shape_string(shape()),
                                                compiler::shape_string(o.shape()), k, o.shape()[o.ndim() - 2]));
    }
    // 16-bit operands multiply and accumulate in float32 and round once (still one kernel).
    DType t = promote(dtype(), o.dtype());
    if (compiler::is_half(t)) return cast(DType::float32).matmul(o.cast(DType::float32)).cast(t);
    // a (..., M, 1, K) * b^T (..., 1, N, K), summed over K.
    Shape as = shape();
    as.insert(as.end() - 1, 1);
    Tensor bt = o.transpose();
    Shape bs = bt.shape();
    bs.insert(bs.end() - 2, 1);
    return reshape(as).mul(bt.reshape(bs)).sum({-1});
}

Tensor Tensor::conv2d(const Tensor& weight, int64_t padding) const {
    if (ndim() != 4 || weight.ndim() != 4 || weight.shape()[1] != shape()[1]) {
        throw std::invalid_argument(fmt::format("conv2d: input {} (N, C, H, W) and weight {} (O, C, KH, KW) do not match",
                                                compiler::shape_string(shape()), compiler::shape_string(weight.shape())));
    }
    const int64_t n = shape()[0], c = shape()[1], o = weight.shape()[0], kh = weight.shape()[2], kw = weight.shape()[3];
    Tensor x = padding ? pad({{0, 0}, {0, 0}, {padding, padding}, {padding, padding}}) : *this;
    x = x.movement([&](const ShapeTracker& st) { return st.windows(kh, kw); });  // (N, C, OH, OW, KH, KW)
    const int64_t oh = x.shape()[2], ow = x.shape()[3];
    const Shape full{n, o, c, oh, ow, kh, kw};
    Tensor xs = x.reshape({n, 1, c, oh, ow, kh, kw}).expand(full);
    Tensor ws = weight.reshape({1, o, c, 1, 1, kh, kw}).expand(full);
    return xs.mul(ws).sum({2, 5, 6});
}

Tensor Tensor::softmax(int ax) const {
    int a = axis(ax);
    Tensor x = as_float();
    Tensor e = (x - x.max({a}, true)).exp();
    return e / e.sum({a}, true);
}

Tensor Tensor::layernorm(int ax, double eps) const {
    int a = axis(ax);
    Tensor x = as_float();
    Tensor centered = x - x.mean({a}, true);
    return centered / ((centered * centered).mean({a}, true) + eps).sqrt();
}

// tanh(x) = 2 sigmoid(2x) - 1: exact at the ends (+-1), no cancellation problem in float32
// beyond that of sigmoid itself near 0.
Tensor Tensor::tanh() const { return (as_float() * 2.0).sigmoid() * 2.0 - 1.0; }

Tensor Tensor::gelu() const {
    Tensor x = as_float();
    return x * 0.5 * (1.0 + ((x + x * x * x * 0.044715) * std::sqrt(2.0 / std::numbers::pi)).tanh());
}

Tensor Tensor::to(const std::shared_ptr<Runtime>& runtime) const {
    if (!runtime) throw std::invalid_argument("to: no runtime given");
    if (runtime == rt_) return *this;
    return Tensor(runtime->import(node_, rt_), runtime);
}

Tensor Tensor::to(const std::shared_ptr<hcq::Device>& device) const {
    if (!device) throw std::invalid_argument("to: no device given");
    return to(Runtime::for_device(device));
}

const Tensor& Tensor::realize() const {
    rt_->realize(node_);
    return *this;
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
    if constexpr (std::is_same_v<T, float>) {
        if (compiler::is_half(dtype())) return cast(DType::float32).to_vector<float>();
    }
    DType want = std::is_same_v<T, float> ? DType::float32 : std::is_same_v<T, int32_t> ? DType::int32 : DType::boolean;
    if constexpr (std::is_same_v<T, uint16_t>) want = compiler::is_half(dtype()) ? dtype() : DType::float16;
    if (want != dtype()) {
        throw std::invalid_argument(fmt::format("to_vector: the tensor holds {}, not {}", compiler::dtype_name(dtype()), compiler::dtype_name(want)));
    }
    if constexpr (std::is_same_v<T, bool>) {
        std::vector<uint8_t> raw(static_cast<size_t>(numel()));
        rt_->read(node_, std::as_writable_bytes(std::span(raw)));
        return std::vector<bool>(raw.begin(), raw.end());
    } else {
        std::vector<T> out(static_cast<size_t>(numel()));
        rt_->read(node_, std::as_writable_bytes(std::span(out)));
        return out;
    }
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template std::vector<uint16_t> Tensor::to_vector<uint16_t>() const;

}  // namespace baregpu::tensor
