// Element types the compiler and the Tensor API know, and their storage in device memory.
#pragma once

#include <cstdint>
#include <string_view>

namespace baregpu::compiler {

// bool is stored as one byte (0 or 1); every other type in its natural width, little-endian.
enum class DType : uint8_t { float32, int32, boolean };

constexpr uint32_t dtype_bytes(DType t) { return t == DType::boolean ? 1 : 4; }
constexpr bool is_float(DType t) { return t == DType::float32; }

constexpr std::string_view dtype_name(DType t) {
    switch (t) {
        case DType::float32: return "float32";
        case DType::int32: return "int32";
        case DType::boolean: return "bool";
    }
    return "?";
}

}  // namespace baregpu::compiler
