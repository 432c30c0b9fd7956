// A lazy tensor: every operation only records what to compute (compiler/graph.hpp); nothing
// runs until realize() or a read-back. Movement ops (reshape, permute, expand, pad, shrink,
// flip) are views: they never copy. Elementwise ops broadcast like numpy. A Tensor is a cheap
// handle (shared ownership of its graph node); copies alias the same value.
//
// dtypes: float32, float16, bfloat16 and int32; comparisons yield bool. Mixed operands take the
// wider kind (float32 > float16/bfloat16 > int32 > bool; float16 with bfloat16 gives float32);
// bool operands of arithmetic count as 0/1. float16/bfloat16 ops compute in float32 and round
// each result to their type (as numpy does); a sum accumulates in float32 and rounds once.
#pragma once

#include "compiler/dtype.hpp"
#include "compiler/graph.hpp"
#include "tensor/runtime.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace baregpu::tensor {

using compiler::DType;
using compiler::Shape;

class Tensor {
public:
    Tensor() = default;
    Tensor(compiler::NodeRef node, std::shared_ptr<Runtime> runtime);

    // Creation. rt: where the tensor lives (default: Runtime::default_runtime()).
    static Tensor full(const Shape& shape, double value, DType dtype = DType::float32, std::shared_ptr<Runtime> rt = {});
    static Tensor zeros(const Shape& shape, DType dtype = DType::float32, std::shared_ptr<Runtime> rt = {});
    static Tensor ones(const Shape& shape, DType dtype = DType::float32, std::shared_ptr<Runtime> rt = {});
    // 0, 1, ..., n - 1.
    static Tensor arange(int64_t n, DType dtype = DType::float32, std::shared_ptr<Runtime> rt = {});
    // Uniform in [0, 1), float32; the same seed gives the same values on every device.
    static Tensor rand(const Shape& shape, uint64_t seed, std::shared_ptr<Runtime> rt = {});
    static Tensor from_vector(const std::vector<float>& values, const Shape& shape, std::shared_ptr<Runtime> rt = {});
    static Tensor from_vector(const std::vector<int32_t>& values, const Shape& shape, std::shared_ptr<Runtime> rt = {});
    // float16/bfloat16 from their raw 16-bit patterns (or: from_vector(floats).cast(dtype)).
    static Tensor from_bits(const std::vector<uint16_t>& bits, const Shape& shape, DType dtype, std::shared_ptr<Runtime> rt = {});

    const Shape& shape() const { return node_->shape; }
    DType dtype() const { return node_->dtype; }
    int64_t numel() const { return compiler::numel(node_->shape); }
    size_t ndim() const { return node_->shape.size(); }
    const compiler::NodeRef& node() const { return node_; }
    Runtime& runtime() const { return *rt_; }

    // Elementwise, unary. exp/log are natural; log of a negative number is NaN.
    Tensor neg() const;
    Tensor exp() const;
    Tensor log() const;
    Tensor exp2() const;
    Tensor log2() const;
    Tensor sqrt() const;
    Tensor recip() const;
    Tensor relu() const;
    Tensor sigmoid() const;
    Tensor abs() const;
    Tensor logical_not() const;
    Tensor cast(DType dtype) const;

    // Elementwise, binary, broadcasting.
    Tensor add(const Tensor& o) const;
    Tensor sub(const Tensor& o) const;
    Tensor mul(const Tensor& o) const;
    Tensor div(const Tensor& o) const;  // int32: truncates toward zero, 0 for a zero divisor
    Tensor maximum(const Tensor& o) const;
    Tensor minimum(const Tensor& o) const;
    Tensor lt(const Tensor& o) const;
    Tensor gt(const Tensor& o) const;
    Tensor le(const Tensor& o) const;
    Tensor ge(const Tensor& o) const;
    Tensor eq(const Tensor& o) const;
    Tensor ne(const Tensor& o) const;
    // this ? a : b, all three broadcast together.
    Tensor where(const Tensor& a, const Tensor& b) const;
    // A scalar of this tensor's dtype on its device (shape () ).
    Tensor scalar(double value) const;

    // Reductions over `axes` (negative counts from the end; empty: every axis).
    Tensor sum(std::vector<int> axes = {}, bool keepdim = false) const;
    Tensor max(std::vector<int> axes = {}, bool keepdim = false) const;
    Tensor mean(std::vector<int> axes = {}, bool keepdim = false) const;

    // Movement (views, no copies). reshape accepts one -1.
    Tensor reshape(Shape shape) const;
    Tensor permute(std::vector<int> order) const;
    Tensor transpose(int a = -2, int b = -1) const;
    Tensor expand(const Shape& shape) const;
    Tensor pad(const std::vector<std::pair<int64_t, int64_t>>& before_after) const;
    Tensor shrink(const std::vector<std::pair<int64_t, int64_t>>& begin_end) const;
    Tensor flip(std::vector<int> axes) const;

    // (..., M, K) @ (..., K, N) -> (..., M, N), batch dims broadcast; one fused kernel.
    Tensor matmul(const Tensor& o) const;
    // 2-D convolution (cross-correlation, stride 1): this (N, C, H, W) with weight (O, C, KH, KW),
    // `padding` zeros on each side of H and W -> (N, O, H+2p-KH+1, W+2p-KW+1). One fused kernel:
    // the input's sliding windows are a view.
    Tensor conv2d(const Tensor& weight, int64_t padding = 0) const;
    Tensor softmax(int axis = -1) const;
    // (x - mean) / sqrt(var + eps) over `axis` (population variance), no scale or bias.
    Tensor layernorm(int axis = -1, double eps = 1e-5) const;
    Tensor tanh() const;
    // The tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    Tensor gelu() const;

    // This tensor on another device (its runtime; or the device's, Runtime::for_device), lazily:
    // the data moves when the result (or anything computed from it) is first realized or read,
    // after this tensor is computed on its own device. The same runtime: *this.
    Tensor to(const std::shared_ptr<Runtime>& runtime) const;
    Tensor to(const std::shared_ptr<hcq::Device>& device) const;
    const std::shared_ptr<Runtime>& runtime_ptr() const { return rt_; }

    // Compute now (asynchronously on the device); returns *this.
    const Tensor& realize() const;
    bool realized() const { return static_cast<bool>(node_->realized); }

    // Realize and copy back, row-major. T: float for float32 (and, widened exactly, for float16
    // and bfloat16), int32_t for int32, bool for bool, uint16_t for the bits of float16/bfloat16.
    template <typename T>
    std::vector<T> to_vector() const;

private:
    Tensor with(compiler::NodeRef node) const { return Tensor(std::move(node), rt_); }
    // This tensor seen through op(tracker): a new view node, no copy.
    Tensor movement(const std::function<compiler::ShapeTracker(const compiler::ShapeTracker&)>& op) const;
    // Broadcast to `shape` (numpy: missing leading dims are 1).
    Tensor expand_to(const Shape& shape) const;
    Tensor unary(compiler::Op op) const;
    // This tensor if it holds a float type, else cast to float32.
    Tensor as_float() const;
    Tensor binary(compiler::Op op, const Tensor& o, bool to_bool = false) const;
    Tensor reduce(compiler::Op op, std::vector<int> axes, bool keepdim) const;
    int axis(int a) const;

    compiler::NodeRef node_;
    std::shared_ptr<Runtime> rt_;
};

inline Tensor operator+(const Tensor& a, const Tensor& b) { return a.add(b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return a.sub(b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return a.mul(b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return a.div(b); }
inline Tensor operator-(const Tensor& a) { return a.neg(); }
inline Tensor operator+(const Tensor& a, double b) { return a.add(a.scalar(b)); }
inline Tensor operator-(const Tensor& a, double b) { return a.sub(a.scalar(b)); }
inline Tensor operator*(const Tensor& a, double b) { return a.mul(a.scalar(b)); }
inline Tensor operator/(const Tensor& a, double b) { return a.div(a.scalar(b)); }
inline Tensor operator+(double a, const Tensor& b) { return b.scalar(a).add(b); }
inline Tensor operator-(double a, const Tensor& b) { return b.scalar(a).sub(b); }
inline Tensor operator*(double a, const Tensor& b) { return b.scalar(a).mul(b); }
inline Tensor operator/(double a, const Tensor& b) { return b.scalar(a).div(b); }

// Shape of broadcasting a and b (numpy rules). Throws std::invalid_argument naming both.
Shape broadcast_shape(const Shape& a, const Shape& b);

}  // namespace baregpu::tensor
