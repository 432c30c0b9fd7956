#include "firmware-loader/crc32.hpp"

#include <array>

namespace baregpu::fw {

namespace {

constexpr std::array<uint32_t, 256> make_table() {
    std::array<uint32_t, 256> table{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    return table;
}

constexpr auto kTable = make_table();

}  // namespace

uint32_t crc32(std::span<const std::byte> bytes, uint32_t crc) {
    crc = ~crc;
    for (std::byte b : bytes) crc = kTable[(crc ^ static_cast<uint8_t>(b)) & 0xff] ^ (crc >> 8);
    return ~crc;
}

}  // namespace baregpu::fw
