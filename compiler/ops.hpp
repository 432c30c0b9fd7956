// The primitive operations. Everything the Tensor API offers is built from these: exp is
// exp2(x * log2(e)), relu is max(x, 0), matmul is reshape + expand + mul + sum.
#pragma once

#include <cstdint>
#include <string_view>

namespace baregpu::compiler {

enum class Op : uint8_t {
    // Unary. neg: -x; exp2 and log2: base 2; recip: 1 / x; logical_not: !x on bool.
    neg, exp2, log2, sqrt, recip, logical_not,
    // cast: to the node's dtype (float -> int truncates toward zero; anything -> bool is x != 0).
    cast,
    // Binary. div on int32 truncates toward zero and yields 0 for a zero divisor; cmp_* yield bool.
    add, sub, mul, div, max, cmp_lt, cmp_eq, cmp_ne, logical_and, logical_or,
    // Ternary: where(cond, a, b).
    where,
    // Reductions over axes.
    reduce_sum, reduce_max,
};

constexpr int op_arity(Op op) {
    switch (op) {
        case Op::neg: case Op::exp2: case Op::log2: case Op::sqrt: case Op::recip: case Op::logical_not: case Op::cast:
        case Op::reduce_sum: case Op::reduce_max:
            return 1;
        case Op::where: return 3;
        default: return 2;
    }
}

constexpr bool is_reduce(Op op) { return op == Op::reduce_sum || op == Op::reduce_max; }
constexpr bool is_comparison(Op op) { return op == Op::cmp_lt || op == Op::cmp_eq || op == Op::cmp_ne; }

constexpr std::string_view op_name(Op op) {
    switch (op) {
        case Op::neg: return "neg";
        case Op::exp2: return "exp2";
        case Op::log2: return "log2";
        case Op::sqrt: return "sqrt";
        case Op::recip: return "recip";
        case Op::logical_not: return "not";
        case Op::cast: return "cast";
        case Op::add: return "add";
        case Op::sub: return "sub";
        case Op::mul: return "mul";
        case Op::div: return "div";
        case Op::max: return "max";
        case Op::cmp_lt: return "cmplt";
        case Op::cmp_eq: return "cmpeq";
        case Op::cmp_ne: return "cmpne";
        case Op::logical_and: return "and";
        case Op::logical_or: return "or";
        case Op::where: return "where";
        case Op::reduce_sum: return "sum";
        case Op::reduce_max: return "rmax";
    }
    return "?";
}

}  // namespace baregpu::compiler
