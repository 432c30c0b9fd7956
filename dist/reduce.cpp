#include "dist/reduce.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace baregpu::dist {

const char* to_string(DataType t) {
    switch (t) {
        case DataType::float32: return "float32";
        case DataType::float64: return "float64";
        case DataType::int32: return "int32";
        case DataType::int64: return "int64";
    }
    return "?";
}

const char* to_string(ReduceOp op) { return op == ReduceOp::sum ? "sum" : "max"; }

namespace {

// Blocks of 256 elements copied to aligned locals: the loops vectorize, and staged data needs no
// alignment.
template <typename T>
void reduce_typed(std::byte* into, const std::byte* from, uint64_t count, ReduceOp op) noexcept {
    constexpr uint64_t kBlock = 256;
    alignas(64) T a[kBlock];
    alignas(64) T b[kBlock];
    for (uint64_t i = 0; i < count; i += kBlock) {
        const uint64_t n = std::min(kBlock, count - i);
        std::memcpy(a, into + i * sizeof(T), n * sizeof(T));
        std::memcpy(b, from + i * sizeof(T), n * sizeof(T));
        if (op == ReduceOp::sum) {
            if constexpr (std::is_integral_v<T>) {
                // Wrapping, as MPI implementations sum integers: signed overflow would be undefined.
                using U = std::make_unsigned_t<T>;
                for (uint64_t j = 0; j < n; ++j) a[j] = static_cast<T>(static_cast<U>(a[j]) + static_cast<U>(b[j]));
            } else {
                for (uint64_t j = 0; j < n; ++j) a[j] += b[j];
            }
        } else {
            // NaN wins, as in numpy's maximum: a comparison alone would keep whichever came first.
            for (uint64_t j = 0; j < n; ++j) a[j] = (b[j] > a[j] || b[j] != b[j]) ? b[j] : a[j];
        }
        std::memcpy(into + i * sizeof(T), a, n * sizeof(T));
    }
}

}  // namespace

void reduce_into(std::byte* into, const std::byte* from, uint64_t count, DataType type, ReduceOp op) noexcept {
    switch (type) {
        case DataType::float32: return reduce_typed<float>(into, from, count, op);
        case DataType::float64: return reduce_typed<double>(into, from, count, op);
        case DataType::int32: return reduce_typed<int32_t>(into, from, count, op);
        case DataType::int64: return reduce_typed<int64_t>(into, from, count, op);
    }
}

}  // namespace baregpu::dist
