// The scheduler: which kernels compute a node, in dependency order.
//
// Fusion rules. A kernel computes one node. Elementwise ops, constants and views are folded
// into whatever consumes them (recomputed per use, never stored). One reduction folds into a
// kernel when the kernel's output index space is the reduction's output (only elementwise ops
// between them); its whole input chain folds under it. Every other reduction — one seen
// through a view (broadcast back, permuted), or under another reduction — is a split point:
// it becomes its own kernel and the consumer loads its result — except a keepdim reduction
// over the last axis read broadcast back along that axis (softmax's max and sum, layernorm's
// mean) by a kernel with no reduction of its own: it folds in as a row_reduce, computed per
// output row (rows up to 16384 elements). A reduction that a kernel folds in but that gets
// realized meanwhile for another consumer is loaded instead (the kernel is built again). A
// root that is a pure reshape of an unrealized node aliases that node's buffer instead of
// copying.
#pragma once

#include "compiler/graph.hpp"
#include "compiler/kernel.hpp"

#include <optional>
#include <vector>

namespace baregpu::compiler {

struct ScheduleItem {
    // Absent: output takes inputs[0]'s buffer as it is (a reshape of a contiguous result).
    std::optional<Kernel> kernel;
    NodeRef output;
    std::vector<NodeRef> inputs;  // kernel buffer i + 1; realized by earlier items or before
};

// Everything `target` needs that is not realized yet, dependencies first. Empty when target
// is realized. Does not change the graph: the caller runs the items and sets `realized`.
std::vector<ScheduleItem> schedule(const NodeRef& target);

}  // namespace baregpu::compiler
