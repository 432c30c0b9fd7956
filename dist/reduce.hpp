// Element types and reductions of the collectives, applied on the host to staged data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace baregpu::dist {

enum class DataType : uint8_t { float32, float64, int32, int64 };
enum class ReduceOp : uint8_t { sum, max };

constexpr uint64_t element_size(DataType t) { return t == DataType::float32 || t == DataType::int32 ? 4 : 8; }
const char* to_string(DataType t);
const char* to_string(ReduceOp op);

// into[i] = op(into[i], from[i]) for `count` elements. Unaligned pointers are fine.
void reduce_into(std::byte* into, const std::byte* from, uint64_t count, DataType type, ReduceOp op) noexcept;

}  // namespace baregpu::dist
