#include "compiler/scheduler.hpp"

#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace baregpu::compiler {

namespace {

class Scheduler {
public:
    std::vector<ScheduleItem> items;

    void realize(const NodeRef& node) {
        if (node->realized || scheduled_.count(node.get())) return;
        if (node->kind == NodeKind::view && node->view.is_contiguous()) {
            realize(node->src[0]);
            items.push_back({std::nullopt, node, {node->src[0]}});
            scheduled_.insert(node.get());
            return;
        }
        // The kernel's index space: the node's shape, or the shape of the reduction it folds in
        // when only reshapes lie between (same elements in the same order, so the output is the
        // same row-major array): sum(x, keepdim=false) * 2 is one kernel.
        Shape space;
        Kernel k;
        std::optional<KernelBuilder> builder;
        for (;;) {
            space = node->shape;
            std::unordered_set<const Node*> seen;
            const Node* folded = reduce_under_reshapes(*node, seen);
            if (folded) space = folded->shape;
            // Row reductions only where the kernel has no reduction of its own; should one fold
            // in anyway, the kernel is built again without them (what they would have fused is
            // realized by earlier items instead).
            builder.emplace(*this, folded == nullptr);
            k.full_shape = space;
            k.output_dtype = node->dtype;
            k.root = builder->build(node, ShapeTracker::contiguous(space));
            if (builder->reduce && builder->used_rows) {
                builder.emplace(*this, false);
                k.root = builder->build(node, ShapeTracker::contiguous(space));
            }
            // The reduction this kernel folds in may have been realized meanwhile for another
            // of its consumers (softmax(relu(a @ b)): the row max needs the matmul): then load
            // it instead of computing it a second time. Terminates: each pass schedules more.
            if (builder->reduce && scheduled_.count(builder->reduce)) continue;
            break;
        }
        KernelBuilder& kb = *builder;
        if (kb.reduce) {
            k.full_shape = kb.reduce->src[0]->shape;
            k.reduce_axes = kb.reduce->axes;
        }
        for (const NodeRef& in : kb.inputs) k.inputs.push_back(in->dtype);
        items.push_back({std::move(k), node, kb.inputs});
        scheduled_.insert(node.get());
    }

private:
    // The first unrealized reduction reachable from `node` through elementwise ops and pure
    // reshapes only.
    const Node* reduce_under_reshapes(const Node& node, std::unordered_set<const Node*>& seen) const {
        if (node.realized || scheduled_.count(&node) || !seen.insert(&node).second) return nullptr;
        if (node.kind == NodeKind::reduce) return &node;
        if (node.kind == NodeKind::view && !node.view.is_contiguous()) return nullptr;
        if (node.kind != NodeKind::alu && node.kind != NodeKind::view) return nullptr;
        for (const NodeRef& src : node.src) {
            if (const Node* r = reduce_under_reshapes(*src, seen)) return r;
        }
        return nullptr;
    }

    struct KernelBuilder {
        Scheduler& s;
        std::vector<NodeRef> inputs;
        std::unordered_map<const Node*, uint32_t> input_index;
        const Node* reduce = nullptr;
        bool rows = false;       // may reductions fold in as row_reduce
        bool used_rows = false;  // did one
        std::map<std::pair<const Node*, std::string>, ExprRef> memo;

        KernelBuilder(Scheduler& owner, bool allow_rows) : s(owner), rows(allow_rows) {}

        // Rows longer than this are not fused: a row's reductions and its elements then no
        // longer share the cache, and the runtime's workgroups (at least 16K elements each)
        // could split a row and compute its reductions twice.
        static constexpr int64_t kMaxRow = 16384;

        // Whether `st` reads the keepdim reduction `node` over the last axis broadcast back
        // along it: the same index on every other axis, any index on the last.
        static bool broadcasts_row(const Node& node, const ShapeTracker& st) {
            const Shape& rs = node.shape;
            const size_t r = rs.size();
            if (r == 0 || node.axes != std::vector<int>{int(r - 1)} || st.views().size() != 1) return false;
            if (node.src[0]->shape.back() > kMaxRow) return false;
            const View& v = st.views()[0];
            if (v.has_mask() || v.offset != 0 || v.shape.size() != r) return false;
            int64_t stride = 1;  // the row-major stride of rs at d (rs[r - 1] is 1)
            for (size_t d = r - 1; d-- > 0;) {
                if (v.shape[d] != rs[d] || (rs[d] != 1 && v.strides[d] != stride)) return false;
                stride *= rs[d];
            }
            return v.strides[r - 1] == 0 || v.shape[r - 1] == 1;
        }

        ExprRef load(const NodeRef& node, const ShapeTracker& st) {
            auto [it, added] = input_index.emplace(node.get(), uint32_t(inputs.size()));
            if (added) inputs.push_back(node);
            auto e = std::make_shared<Expr>();
            e->kind = ExprKind::load;
            e->dtype = node->dtype;
            e->input = it->second;
            e->view = st;
            return e;
        }

        // node's value at the kernel index that `st` maps into node's row-major index.
        ExprRef build(const NodeRef& node, const ShapeTracker& st) {
            auto key = std::make_pair(node.get(), st.key());
            if (auto it = memo.find(key); it != memo.end()) return it->second;
            ExprRef out = build_uncached(node, st);
            memo.emplace(std::move(key), out);
            return out;
        }

        ExprRef build_uncached(const NodeRef& node, const ShapeTracker& st) {
            if (node->realized || s.scheduled_.count(node.get())) return load(node, st);
            auto e = std::make_shared<Expr>();
            e->dtype = node->dtype;
            switch (node->kind) {
                case NodeKind::buffer: return load(node, st);
                case NodeKind::constant:
                    e->kind = ExprKind::constant;
                    e->value = node->value;
                    return e;
                case NodeKind::alu:
                    e->kind = ExprKind::alu;
                    e->op = node->op;
                    for (const NodeRef& src : node->src) e->src.push_back(build(src, st));
                    return e;
                case NodeKind::view: {
                    // kernel index -> node index (st), then node index -> source index (the view).
                    ShapeTracker through = st.on_top_of(node->view);
                    ExprRef inner = build(node->src[0], through);
                    if (!node->view.has_mask()) return inner;
                    e->kind = ExprKind::masked;
                    e->view = through;
                    e->src = {inner};
                    return e;
                }
                case NodeKind::reduce:
                    if (!reduce && st.is_contiguous() && st.shape() == node->shape) {
                        reduce = node.get();
                        e->kind = ExprKind::reduce;
                        e->op = node->op;
                        e->src = {build(node->src[0], ShapeTracker::contiguous(node->src[0]->shape))};
                        return e;
                    }
                    if (rows && broadcasts_row(*node, st)) {
                        used_rows = true;
                        e->kind = ExprKind::row_reduce;
                        e->op = node->op;
                        e->row = node->src[0]->shape.back();
                        e->src = {build(node->src[0], ShapeTracker::contiguous(node->src[0]->shape))};
                        return e;
                    }
                    s.realize(node);
                    return load(node, st);
            }
            return e;
        }
    };

    std::unordered_set<const Node*> scheduled_;
};

}  // namespace

std::vector<ScheduleItem> schedule(const NodeRef& target) {
    Scheduler s;
    s.realize(target);
    return std::move(s.items);
}

}  // namespace baregpu::compiler
