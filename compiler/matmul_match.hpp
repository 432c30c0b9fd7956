// Which kernels are a matrix product, and along which axes: the CPU's register-blocked kernel
// and the GPUs' LDS-tiled one (llvm_kernel_ir.cpp) compute these, and the GPU launch
// (Kernel::gpu_workgroups) sizes its grid by the tiles.
#pragma once

#include "compiler/kernel.hpp"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace baregpu::compiler {

// A sum of a product whose left factor does not vary along the output's inner axis n and
// whose right factor does not vary along another output axis m: C[m, n] = sum_k A(m, k)
// B(k, n), k running over every reduce axis (flattened row-major: a conv2d's channels and
// window), with any views, batch axes and an elementwise epilogue above the sum. A and B are
// arbitrary expressions (a transposed load, a broadcast, a padded window, a cast).
struct MatmulPlan {
    size_t m, n;
    std::vector<size_t> batch;  // the other output axes, outermost first
    const Expr* red;
    const Expr* a;
    const Expr* b;
};

// The kernel's matrix product computed in mr x nr blocks of C, or nullopt: not a float32 sum of
// products, or padding M and N up to whole blocks would more than quadruple the work (a
// matrix-vector product is memory-bound and better served by the general loops).
std::optional<MatmulPlan> match_matmul(const Kernel& kernel, int64_t mr, int64_t nr);

// The axes the output loops run over: every non-reduced one (outer), the last innermost.
std::pair<std::vector<size_t>, std::optional<size_t>> output_axes(const Kernel& kernel);

// The kernel's reduction, or null.
const Expr* find_reduce(const Expr& e);

// The GPU matmul (llvm_kernel_ir.cpp, emit_gpu_matmul): one workgroup of 256 work-items (16 x 16)
// per square tile of C, each item a (tile / 16)-square block of it in registers, K staged through
// LDS / shared memory kGpuSlice at a time. kGpuTile is the smallest tile (the padding rule of
// match_matmul); gpu_tile picks 128 where C spans whole 128-tiles both ways: half the global loads
// per FMA (1/64) and 64 FMAs per four LDS loads.
inline constexpr int64_t kGpuTile = 64;
inline constexpr int64_t kGpuSlice = 16;  // K per LDS stage
inline constexpr int64_t kGpuItemsPerSide = 16;
inline int64_t gpu_tile(int64_t m, int64_t n) { return m >= 128 && n >= 128 ? 128 : kGpuTile; }

// The tile side and K slice the GPU matmul of C (m x n) uses with `tile`: gpu_tile's and kGpuSlice
// for the default TileShape{}, else the tile search candidate's (mc = nc the side, kc the slice).
struct GpuTile {
    int64_t side, slice;
};
GpuTile gpu_tile_for(int64_t m, int64_t n, const TileShape& tile);

// The GPU tile search's candidates for a kernel (Compiler::tile_candidates): the default first,
// then the other 64- and 128-tiles with slices of 8 to 32 (128 only where the padding stays under
// 4x). None for a kernel that is no matmul.
std::vector<TileShape> gpu_tile_candidates(const Kernel& kernel);

}  // namespace baregpu::compiler
