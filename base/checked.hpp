// Checked arithmetic for sizes and offsets that come from outside: a device register, a
// firmware header, a sysfs file. Overflow is reported, never wrapped.
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>

namespace baregpu {

template <typename T>
    requires std::is_unsigned_v<T>
constexpr std::optional<T> checked_add(T a, T b) {
    T out;
    if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
    return out;
}

template <typename T>
    requires std::is_unsigned_v<T>
constexpr std::optional<T> checked_mul(T a, T b) {
    T out;
    if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
    return out;
}

// True when [offset, offset + length) lies inside [0, total), computed without overflow.
constexpr bool range_within(uint64_t offset, uint64_t length, uint64_t total) {
    return offset <= total && length <= total - offset;
}

// Round up to a power-of-two alignment; nullopt on overflow.
constexpr std::optional<uint64_t> align_up(uint64_t value, uint64_t alignment) {
    auto sum = checked_add<uint64_t>(value, alignment - 1);
    if (!sum) return std::nullopt;
    return *sum & ~(alignment - 1);
}

constexpr bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace baregpu
