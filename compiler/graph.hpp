// The lazy graph the Tensor API builds: what each value is computed from. Nothing here runs;
// the scheduler (scheduler.hpp) turns the part of the graph a realize() needs into kernels.
#pragma once

#include "compiler/dtype.hpp"
#include "compiler/ops.hpp"
#include "compiler/shape_tracker.hpp"
#include "hcq/memory.hpp"

#include <functional>
#include <memory>
#include <vector>

namespace baregpu::compiler {

struct Node;
using NodeRef = std::shared_ptr<Node>;

enum class NodeKind : uint8_t {
    buffer,    // data in device memory (realized is set)
    constant,  // every element is `value`
    alu,       // an elementwise op (unary/binary/ternary/cast) of same-shape sources
    reduce,    // op over `axes` of src[0]; the reduced dims stay with size 1
    view,      // src[0] seen through `view` (a movement op, no data moves)
};

struct Node {
    NodeKind kind = NodeKind::constant;
    Op op = Op::add;
    DType dtype = DType::float32;
    Shape shape;
    std::vector<NodeRef> src;
    double value = 0;          // constant
    std::vector<int> axes;     // reduce, ascending
    ShapeTracker view;         // view: maps this node's index to src[0]'s row-major element
    // Set once computed: a contiguous row-major array of numel(shape) elements of dtype. From
    // then on the node is a leaf for every later schedule.
    hcq::Buffer realized;
    // Whoever allocated `realized` may keep it for reuse once no node needs it: this is
    // destroyed with the last node sharing the buffer (a reshape aliasing it shares this too).
    // Code that copies `realized` out must keep the node alive as long as it uses the copy.
    std::shared_ptr<void> release;
    // A buffer node whose data is still elsewhere (tensor::Tensor::to: another device's tensor,
    // not computed yet): the runtime calls it, before scheduling anything that reads the node,
    // to set `realized` (and `release`), then clears it. Empty for every other node.
    std::function<void(Node&)> pending;

    static NodeRef make_buffer(hcq::Buffer buffer, DType dtype, Shape shape);
    static NodeRef make_constant(double value, DType dtype, Shape shape);
    // Sources must have one shape; throws std::invalid_argument otherwise. dtype is the result's.
    static NodeRef make_alu(Op op, DType dtype, std::vector<NodeRef> src);
    static NodeRef make_reduce(Op op, NodeRef src, std::vector<int> axes);
    static NodeRef make_view(NodeRef src, ShapeTracker view);
};

}  // namespace baregpu::compiler
