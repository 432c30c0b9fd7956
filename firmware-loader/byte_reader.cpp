#include "firmware-loader/byte_reader.hpp"

#include "base/checked.hpp"

#include <cstring>

namespace baregpu::fw {

std::string hex(uint64_t value) {
    static constexpr char kDigits[] = "0123456789abcdef";
    char buf[19];
    char* p = buf + sizeof buf;
    do {
        *--p = kDigits[value & 0xf];
        value >>= 4;
    } while (value != 0);
    *--p = 'x';
    *--p = '0';
    return std::string(p, buf + sizeof buf);
}

void ByteReader::fail(std::string_view field, uint64_t offset, std::string expected, std::string found) const {
    throw FirmwareError(file_, std::string(field), offset, std::move(expected), std::move(found));
}

void ByteReader::need(uint64_t offset, uint64_t width, std::string_view field) const {
    if (!range_within(offset, width, data_.size()))
        fail(field, offset, std::to_string(width) + " bytes inside the file",
             "the file ends at " + std::to_string(data_.size()));
}

uint8_t ByteReader::u8(uint64_t offset, std::string_view field) const {
    need(offset, 1, field);
    return static_cast<uint8_t>(data_[offset]);
}

uint16_t ByteReader::u16(uint64_t offset, std::string_view field) const {
    need(offset, 2, field);
    const auto* p = reinterpret_cast<const uint8_t*>(data_.data() + offset);
    return static_cast<uint16_t>(p[0] | p[1] << 8);
}

uint32_t ByteReader::u32(uint64_t offset, std::string_view field) const {
    need(offset, 4, field);
    const auto* p = reinterpret_cast<const uint8_t*>(data_.data() + offset);
    return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

uint64_t ByteReader::u64(uint64_t offset, std::string_view field) const {
    uint64_t lo = u32(offset, field);
    uint64_t hi = u32(offset + 4, field);  // offset + 4 cannot overflow: the first read proved offset < size
    return lo | hi << 32;
}

Region ByteReader::region(uint64_t offset, uint64_t size, std::string_view field) const {
    if (!range_within(offset, size, data_.size())) {
        auto end = checked_add<uint64_t>(offset, size);
        fail(field, offset, std::to_string(size) + " bytes inside the file (which ends at " + std::to_string(data_.size()) + ")",
             end ? "a region ending at " + std::to_string(*end) : std::string("a region whose end overflows 64 bits"));
    }
    return Region{offset, data_.subspan(offset, size)};
}

uint64_t ByteReader::add(uint64_t base, uint64_t offset, std::string_view field, uint64_t at) const {
    auto sum = checked_add<uint64_t>(base, offset);
    if (!sum) fail(field, at, "an offset that fits in 64 bits", hex(base) + " + " + hex(offset));
    return *sum;
}

std::string ByteReader::cstring(uint64_t offset, uint64_t max_bytes, std::string_view field) const {
    need(offset, 1, field);
    uint64_t limit = std::min<uint64_t>(max_bytes, data_.size() - offset);
    const auto* start = reinterpret_cast<const char*>(data_.data() + offset);
    const void* nul = std::memchr(start, 0, limit);
    if (nul == nullptr)
        fail(field, offset, "a NUL-terminated string of at most " + std::to_string(max_bytes) + " bytes",
             "no NUL in the " + std::to_string(limit) + " bytes there");
    return std::string(start, static_cast<const char*>(nul));
}

void ByteReader::expect_eq(uint64_t value, uint64_t wanted, std::string_view field, uint64_t offset) const {
    if (value != wanted) fail(field, offset, hex(wanted), hex(value));
}

}  // namespace baregpu::fw
