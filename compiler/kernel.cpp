#include "compiler/kernel.hpp"

#include "compiler/matmul_match.hpp"

#include <cstdio>
#include <fmt/format.h>
#include <unordered_map>

namespace baregpu::compiler {

Shape Kernel::output_shape() const {
    Shape s = full_shape;
    for (int a : reduce_axes) s[size_t(a)] = 1;
    return s;
}

int64_t Kernel::reduce_elements() const {
    int64_t n = 1;
    for (int a : reduce_axes) n *= full_shape[size_t(a)];
    return n;
}

bool Kernel::has_row_reduce() const {
    std::unordered_map<const Expr*, bool> seen;  // shared subexpressions once
    auto visit = [&](auto& self, const Expr& e) -> bool {
        if (!seen.emplace(&e, true).second) return false;
        if (e.kind == ExprKind::row_reduce) return true;
        for (const ExprRef& s : e.src) {
            if (self(self, *s)) return true;
        }
        return false;
    };
    return root && visit(visit, *root);
}

int64_t Kernel::gpu_workgroups(int64_t block) const { return gpu_workgroups(block, TileShape{}); }

int64_t Kernel::gpu_workgroups(int64_t block, const TileShape& tile) const {
    if (has_row_reduce()) return output_elements() / full_shape.back();
    if (std::optional<MatmulPlan> p = match_matmul(*this, kGpuTile, kGpuTile)) {
        const int64_t m = full_shape[p->m], n = full_shape[p->n], t = gpu_tile_for(m, n, tile).side;
        int64_t tiles = (m + t - 1) / t * ((n + t - 1) / t);
        for (size_t d : p->batch) tiles *= full_shape[d];
        return tiles;
    }
    return (output_elements() + block - 1) / block;
}

std::string Kernel::key() const {
    // Each distinct expression once, in post-order, referring to its sources by number: shared
    // subexpressions stay shared and the text stays linear in the tree's size.
    std::unordered_map<const Expr*, size_t> ids;
    std::string text = fmt::format("full{} reduce({}) out {} in(", shape_string(full_shape), fmt::join(reduce_axes, ","),
                                   dtype_name(output_dtype));
    for (DType t : inputs) text += fmt::format("{},", dtype_name(t));
    text += ")\n";
    auto visit = [&](auto& self, const Expr& e) -> size_t {
        if (auto it = ids.find(&e); it != ids.end()) return it->second;
        std::vector<size_t> srcs;
        for (const ExprRef& s : e.src) srcs.push_back(self(self, *s));
        size_t id = ids.size();
        ids.emplace(&e, id);
        text += fmt::format("%{} = ", id);
        switch (e.kind) {
            case ExprKind::load: text += fmt::format("load {} in{} {}", dtype_name(e.dtype), e.input, e.view.key()); break;
            case ExprKind::constant: text += fmt::format("const {} {:a}", dtype_name(e.dtype), e.value); break;
            case ExprKind::alu: text += fmt::format("{} {}", op_name(e.op), dtype_name(e.dtype)); break;
            case ExprKind::reduce: text += fmt::format("reduce {} {}", op_name(e.op), dtype_name(e.dtype)); break;
            case ExprKind::masked: text += fmt::format("masked {} {}", dtype_name(e.dtype), e.view.key()); break;
            case ExprKind::row_reduce: text += fmt::format("row_reduce {} {} over {}", op_name(e.op), dtype_name(e.dtype), e.row); break;
        }
        for (size_t s : srcs) text += fmt::format(" %{}", s);
        text += "\n";
        return id;
    };
    visit(visit, *root);
    return text;
}

std::string hash_hex(const std::string& text) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : text) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    return fmt::format("{:016x}", h);
}

std::string TileShape::text() const { return fmt::format("mc {} nc {} kc {}", mc, nc, kc); }

std::optional<TileShape> TileShape::parse(const std::string& text) {
    TileShape t;
    long long mc = 0, nc = 0, kc = 0;
    int used = 0;
    if (std::sscanf(text.c_str(), "mc %lld nc %lld kc %lld%n", &mc, &nc, &kc, &used) != 3 || size_t(used) != text.size()) return std::nullopt;
    t.mc = mc;
    t.nc = nc;
    t.kc = kc;
    if (!t.valid() && !t.valid_gpu()) return std::nullopt;
    return t;
}

std::string Kernel::name() const { return "k_" + hash_hex(key()); }

}  // namespace baregpu::compiler
