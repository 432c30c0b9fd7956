// Element types the compiler and the Tensor API know, and their storage in device memory.
#pragma once

#include <cstdint>
#include <string_view>

namespace baregpu::compiler {

// bool is stored as one byte (0 or 1); every other type in its natural width, little-endian.
// float16 (IEEE binary16) and bfloat16 are stored in 16 bits and computed in float32: each
// load widens exactly, and each op's result is rounded to nearest even (a reduction's once, at
// its end).
enum class DType : uint8_t { float32, int32, boolean, float16, bfloat16 };

constexpr uint32_t dtype_bytes(DType t) {
    return t == DType::boolean ? 1 : (t == DType::float16 || t == DType::bfloat16) ? 2 : 4;
}
constexpr bool is_float(DType t) { return t == DType::float32 || t == DType::float16 || t == DType::bfloat16; }
constexpr bool is_half(DType t) { return t == DType::float16 || t == DType::bfloat16; }

constexpr std::string_view dtype_name(DType t) {
    switch (t) {
        case DType::float32: return "float32";
        case DType::int32: return "int32";
        case DType::boolean: return "bool";
        case DType::float16: return "float16";
        case DType::bfloat16: return "bfloat16";
    }
    return "?";
}

}  // namespace baregpu::compiler
