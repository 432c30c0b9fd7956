// One kernel as the code generator sees it: an expression tree over its input buffers, at
// most one reduction, and one contiguous output. Views are already folded into each load.
//
// Index spaces. `full_shape` is the loop space. Without a reduction the output has full_shape.
// With one, the output has full_shape with the reduce axes set to 1; expressions under the
// reduction are evaluated at full-shape indices, expressions above it at output indices (the
// reduce axes at 0). A load's tracker has the shape of the space it is evaluated in.
#pragma once

#include "compiler/dtype.hpp"
#include "compiler/ops.hpp"
#include "compiler/shape_tracker.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::compiler {

struct Expr;
struct TileShape;
using ExprRef = std::shared_ptr<const Expr>;

enum class ExprKind : uint8_t {
    load,      // element view(index) of input `input`, 0 where the view is masked
    constant,  // value
    alu,       // op of src
    reduce,    // op of src[0] over the kernel's reduce axes
    masked,    // src[0] where every mask of `view` holds at the index, else 0 (a pad above an op)
    // op of src[0] over the last axis, at the index with that axis running over [0, row): a
    // keepdim reduction broadcast back along the axis it reduced (softmax's max and sum,
    // layernorm's mean). Computed once per output row, before the row's elements, so the
    // row is read from memory once and re-read from cache. Only in kernels without `reduce`.
    row_reduce,
};

struct Expr {
    ExprKind kind = ExprKind::constant;
    Op op = Op::add;
    DType dtype = DType::float32;
    std::vector<ExprRef> src;
    uint32_t input = 0;
    ShapeTracker view;
    double value = 0;
    int64_t row = 0;  // row_reduce: the length of the reduced last axis
};

struct Kernel {
    Shape full_shape;
    std::vector<int> reduce_axes;  // ascending; empty without a reduction
    DType output_dtype = DType::float32;
    std::vector<DType> inputs;     // buffer i + 1 of the kernel arguments (buffer 0 is the output)
    ExprRef root;

    Shape output_shape() const;
    int64_t output_elements() const { return numel(output_shape()); }
    // Elements of work per output element (the reduction's size, else 1).
    int64_t reduce_elements() const;
    bool has_row_reduce() const;
    // The grid of a GPU kernel launched in workgroups of `block` work-items: one workgroup per
    // output row (the last axis) when it has row reductions, which its work-items compute together;
    // one per 64 x 64 tile of C for a matrix product (matmul_match.hpp); else one work-item per
    // output element.
    // tile: the GPU matmul's (TileShape{}: gpu_tile's choice; else a tile search candidate).
    int64_t gpu_workgroups(int64_t block, const TileShape& tile) const;
    int64_t gpu_workgroups(int64_t block) const;
    // A canonical text of everything the generated code depends on: equal texts, equal code.
    std::string key() const;
    // "k_" + a hash of key(): the function's symbol name.
    std::string name() const;
};

// The CPU matmul's blocking (llvm_kernel_ir.cpp): C in mc x nc tiles, K in slices of kc, A and B
// packed per tile and slice. mc: a multiple of 12 (the register block's rows); nc: of 32 (its
// columns); the packed panels and the C tile (4 bytes each) stay under the CPU device's 1 MiB
// of extra stack. The defaults are what the kernel uses unless the tile search chose otherwise.
// A GPU matmul reads it as its square tile (mc = nc) and K slice (kc): valid_gpu.
struct TileShape {
    int64_t mc = 192, nc = 256, kc = 256;

    bool operator==(const TileShape&) const = default;
    bool valid() const { return mc > 0 && nc > 0 && kc > 0 && mc % 12 == 0 && nc % 32 == 0 && mc * kc + kc * nc + mc * nc <= 240 * 1024; }
    // A GPU matmul's tile (matmul_match.hpp): the default (gpu_tile's choice) or a square C tile of
    // 64 or 128 (mc = nc) with a K slice (kc) of 8, 16 or 32.
    bool valid_gpu() const {
        return *this == TileShape{} || (mc == nc && (mc == 64 || mc == 128) && (kc == 8 || kc == 16 || kc == 32));
    }
    // "mc 192 nc 256 kc 256", and back (nullopt for anything else or an invalid shape).
    std::string text() const;
    static std::optional<TileShape> parse(const std::string& text);
};

// 64-bit FNV-1a of `text`, printed as 16 hex digits.
std::string hash_hex(const std::string& text);

}  // namespace baregpu::compiler
