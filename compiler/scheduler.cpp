#include "compiler/scheduler.hpp"

#include <map>
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
        Shape space = node->shape;
        std::unordered_set<const Node*> seen;
        if (const Node* r = reduce_under_reshapes(*node, seen)) space = r->shape;
        KernelBuilder kb(*this);
        Kernel k;
        k.full_shape = space;
        k.output_dtype = node->dtype;
        k.root = kb.build(node, ShapeTracker::contiguous(space));
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
        std::map<std::pair<const Node*, std::string>, ExprRef> memo;

        explicit KernelBuilder(Scheduler& owner) : s(owner) {}

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
