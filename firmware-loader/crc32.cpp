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
    // Plain pointers and the table's data(): every parse of a file checksums all of it, and the
    // sanitizer build (-O0/-O1, iterators and operator[] left as calls) made this most of its time.
    crc = ~crc;
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
    const uint32_t* table = kTable.data();
    for (const auto* end = p + bytes.size(); p != end; ++p) crc = table[(crc ^ *p) & 0xff] ^ (crc >> 8);
    return ~crc;
}

}  // namespace baregpu::fw
