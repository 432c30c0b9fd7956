#include "compiler/graph.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace baregpu::compiler {

NodeRef Node::make_buffer(hcq::Buffer buffer, DType dtype, Shape shape) {
    auto n = std::make_shared<Node>();
    n->kind = NodeKind::buffer;
    n->dtype = dtype;
    n->shape = std::move(shape);
    n->realized = std::move(buffer);
    return n;
}

NodeRef Node::make_constant(double value, DType dtype, Shape shape) {
    auto n = std::make_shared<Node>();
    n->kind = NodeKind::constant;
    n->dtype = dtype;
    n->shape = std::move(shape);
    n->value = value;
    return n;
}

NodeRef Node::make_alu(Op op, DType dtype, std::vector<NodeRef> src) {
    if (src.size() != size_t(op_arity(op)) || is_reduce(op)) {
        throw std::invalid_argument(fmt::format("{}: takes {} sources, got {}", op_name(op), op_arity(op), src.size()));
    }
    for (const NodeRef& s : src) {
        if (s->shape != src[0]->shape) {
            throw std::invalid_argument(fmt::format("{}: sources of shapes {} and {}; broadcast them to one shape first", op_name(op),
                                                    shape_string(src[0]->shape), shape_string(s->shape)));
        }
    }
    auto n = std::make_shared<Node>();
    n->kind = NodeKind::alu;
    n->op = op;
    n->dtype = dtype;
    n->shape = src[0]->shape;
    n->src = std::move(src);
    return n;
}

NodeRef Node::make_reduce(Op op, NodeRef src, std::vector<int> axes) {
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    auto n = std::make_shared<Node>();
    n->kind = NodeKind::reduce;
    n->op = op;
    n->dtype = src->dtype;
    n->shape = src->shape;
    for (int a : axes) {
        if (a < 0 || size_t(a) >= n->shape.size()) {
            throw std::invalid_argument(fmt::format("{}: axis {} is outside shape {}", op_name(op), a, shape_string(src->shape)));
        }
        n->shape[size_t(a)] = 1;
    }
    n->axes = std::move(axes);
    n->src = {std::move(src)};
    return n;
}

NodeRef Node::make_view(NodeRef src, ShapeTracker view) {
    // Views of views collapse into one tracker.
    if (src->kind == NodeKind::view && !src->realized) {
        view = view.on_top_of(src->view);
        src = src->src[0];
    }
    auto n = std::make_shared<Node>();
    n->kind = NodeKind::view;
    n->dtype = src->dtype;
    n->shape = view.shape();
    n->view = std::move(view);
    n->src = {std::move(src)};
    return n;
}

}  // namespace baregpu::compiler
