// Bounds-checked little-endian reads from a firmware file. Every offset and size a parser takes
// from a header goes through here, so no parser ever reads outside the file: a read that would
// is a FirmwareError naming the file, the field, its offset and what was wrong.
#pragma once

#include "base/error.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace baregpu::fw {

// Part of a file: where it starts (bytes from the start of the file) and its bytes.
struct Region {
    uint64_t offset = 0;
    std::span<const std::byte> bytes;

    uint64_t size() const { return bytes.size(); }
    uint64_t end() const { return offset + bytes.size(); }
};

// "0x1f" — how offsets and magic numbers appear in errors and in fwinfo.
std::string hex(uint64_t value);

class ByteReader {
public:
    // data must outlive the reader and everything parsed from it. file: the name errors quote.
    ByteReader(std::span<const std::byte> data, std::string file) : data_(data), file_(std::move(file)) {}

    const std::string& file() const { return file_; }
    uint64_t size() const { return data_.size(); }
    std::span<const std::byte> data() const { return data_; }

    uint8_t u8(uint64_t offset, std::string_view field) const;
    uint16_t u16(uint64_t offset, std::string_view field) const;
    uint32_t u32(uint64_t offset, std::string_view field) const;
    uint64_t u64(uint64_t offset, std::string_view field) const;

    // [offset, offset + size) of the file; throws when any byte of it lies outside. A zero-size
    // region may sit at the very end of the file.
    Region region(uint64_t offset, uint64_t size, std::string_view field) const;
    // base + offset, throwing (as field, reported at at) when the sum overflows 64 bits.
    uint64_t add(uint64_t base, uint64_t offset, std::string_view field, uint64_t at) const;
    // A NUL-terminated string starting at offset, at most max_bytes long including the NUL.
    std::string cstring(uint64_t offset, uint64_t max_bytes, std::string_view field) const;

    [[noreturn]] void fail(std::string_view field, uint64_t offset, std::string expected, std::string found) const;
    void expect(bool ok, std::string_view field, uint64_t offset, std::string expected, std::string found) const {
        if (!ok) fail(field, offset, std::move(expected), std::move(found));
    }
    // Fails unless value == wanted; errors print both in hex.
    void expect_eq(uint64_t value, uint64_t wanted, std::string_view field, uint64_t offset) const;

private:
    void need(uint64_t offset, uint64_t width, std::string_view field) const;

    std::span<const std::byte> data_;
    std::string file_;
};

}  // namespace baregpu::fw
