#include "compiler/matmul_match.hpp"

#include <functional>
#include <unordered_map>

namespace baregpu::compiler {

namespace {

// Whether e's value changes along kernel axis d: some load or mask under it does (only the top
// view sees the kernel index; the views below see its flat offset).
bool varies_along(const Kernel& k, const Expr& e, size_t d) {
    if (k.full_shape[d] == 1) return false;
    std::unordered_map<const Expr*, bool> seen;  // shared subexpressions once
    std::function<bool(const Expr&)> visit = [&](const Expr& x) {
        if (!seen.emplace(&x, true).second) return false;
        if (x.kind == ExprKind::load || x.kind == ExprKind::masked) {
            const View& v = x.view.views().back();
            auto [lo, hi] = v.mask_of(d);
            if (v.strides[d] != 0 || lo != 0 || hi != v.shape[d]) return true;
        }
        if (x.kind == ExprKind::reduce || x.kind == ExprKind::row_reduce) return true;
        for (const ExprRef& s : x.src) {
            if (visit(*s)) return true;
        }
        return false;
    };
    return visit(e);
}

}  // namespace

const Expr* find_reduce(const Expr& e) {
    if (e.kind == ExprKind::reduce) return &e;
    for (const ExprRef& s : e.src) {
        if (const Expr* r = find_reduce(*s)) return r;
    }
    return nullptr;
}

std::pair<std::vector<size_t>, std::optional<size_t>> output_axes(const Kernel& k) {
    std::vector<bool> reduced(k.full_shape.size(), false);
    for (int a : k.reduce_axes) reduced[size_t(a)] = true;
    std::vector<size_t> outer;
    std::optional<size_t> inner;
    for (size_t d = 0; d < k.full_shape.size(); ++d) {
        if (reduced[d]) continue;
        if (inner) outer.push_back(*inner);
        inner = d;
    }
    return {outer, inner};
}

std::optional<MatmulPlan> match_matmul(const Kernel& k, int64_t mr, int64_t nr) {
    if (!k.root) return std::nullopt;
    const auto [outer, inner] = output_axes(k);
    const Expr* red = find_reduce(*k.root);
    if (!red || !inner || outer.empty() || red->op != Op::reduce_sum || red->dtype != DType::float32) return std::nullopt;
    const Expr& prod = *red->src[0];
    if (prod.kind != ExprKind::alu || prod.op != Op::mul || prod.dtype != DType::float32) return std::nullopt;
    const Expr* x = prod.src[0].get();
    const Expr* y = prod.src[1].get();
    if (x->dtype != DType::float32 || y->dtype != DType::float32) return std::nullopt;
    // m: the innermost other output axis that one factor ignores while the other ignores n
    // (a matmul's row axis; a conv2d's output channels).
    std::optional<MatmulPlan> found;
    for (size_t j = outer.size(); j-- > 0 && !found;) {
        for (auto [a, b] : {std::pair{x, y}, std::pair{y, x}}) {
            if (varies_along(k, *a, *inner) || varies_along(k, *b, outer[j])) continue;
            MatmulPlan p{outer[j], *inner, {}, red, a, b};
            for (size_t d : outer) {
                if (d != outer[j]) p.batch.push_back(d);
            }
            found = p;
            break;
        }
    }
    if (!found) return std::nullopt;
    const int64_t M = k.full_shape[found->m], N = k.full_shape[found->n];
    const int64_t padded = (M + mr - 1) / mr * mr * ((N + nr - 1) / nr * nr);
    if (padded > 4 * M * N) return std::nullopt;
    return found;
}

GpuTile gpu_tile_for(int64_t m, int64_t n, const TileShape& tile) {
    if (tile == TileShape{}) return {gpu_tile(m, n), kGpuSlice};
    return {tile.mc, tile.kc};
}

std::vector<TileShape> gpu_tile_candidates(const Kernel& kernel) {
    std::optional<MatmulPlan> p = match_matmul(kernel, kGpuTile, kGpuTile);
    if (!p) return {};
    const int64_t m = kernel.full_shape[p->m], n = kernel.full_shape[p->n];
    const GpuTile standard = gpu_tile_for(m, n, TileShape{});
    std::vector<TileShape> out{TileShape{}};
    for (const TileShape t : {TileShape{64, 64, 16}, TileShape{64, 64, 32}, TileShape{128, 128, 8}, TileShape{128, 128, 16}}) {
        if (t.mc == standard.side && t.kc == standard.slice) continue;  // the default's shape
        if (t.mc == 128 && (m + 127) / 128 * 128 * ((n + 127) / 128 * 128) > 4 * m * n) continue;
        out.push_back(t);
    }
    return out;
}

}  // namespace baregpu::compiler
