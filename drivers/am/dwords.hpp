// Command packets are dword streams: 64-bit addresses and values go in as low and high dwords,
// and rings and indirect buffers are written and parsed as dwords over their bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace baregpu::am {

constexpr uint32_t lo(uint64_t v) { return static_cast<uint32_t>(v); }
constexpr uint32_t hi(uint64_t v) { return static_cast<uint32_t>(v >> 32); }

// `bytes` as dwords (a multiple of 4 bytes, 4-byte aligned: ring and buffer memory always is).
inline std::span<uint32_t> words_of(std::span<std::byte> bytes) {
    return {reinterpret_cast<uint32_t*>(bytes.data()), bytes.size() / 4};
}
inline std::span<const uint32_t> words_of(std::span<const std::byte> bytes) {
    return {reinterpret_cast<const uint32_t*>(bytes.data()), bytes.size() / 4};
}

}  // namespace baregpu::am
