// Shared by the NVIDIA firmware tests: loading the real files from BAREGPU_TEST_FIRMWARE_DIR
// (skipping with a message when absent), a little-endian byte builder for synthetic files, and
// a check that a parse fails with a FirmwareError naming a given field.
#pragma once

#include "base/error.hpp"
#include "firmware-loader/byte_reader.hpp"
#include "tests/firmware/firmware_files.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace baregpu::test::nv {

// The bytes of $BAREGPU_TEST_FIRMWARE_DIR/relative. The repository carries the files, so a missing
// directory or file fails the test (tests/firmware/firmware_files.hpp).
inline std::optional<std::vector<std::byte>> firmware_file(const std::string& relative) {
    if (!firmware_dir()) FAIL("BAREGPU_TEST_FIRMWARE_DIR does not name a directory (the checkout's firmware/: run through meson test)");
    return firmware_bytes(relative);
}

inline fw::ByteReader reader_for(std::span<const std::byte> bytes, const std::string& name) {
    return fw::ByteReader(bytes, name);
}

// Little-endian writes into a growing buffer, for files built from the public layouts.
struct Bytes {
    std::vector<std::byte> b;

    explicit Bytes(size_t size = 0) : b(size) {}
    void fit(uint64_t end) {
        if (end > b.size()) b.resize(end);
    }
    Bytes& u8(uint64_t at, uint64_t v) {
        fit(at + 1);
        b[at] = static_cast<std::byte>(v & 0xff);
        return *this;
    }
    Bytes& u16(uint64_t at, uint64_t v) { return u8(at, v).u8(at + 1, v >> 8); }
    Bytes& u32(uint64_t at, uint64_t v) { return u16(at, v).u16(at + 2, v >> 16); }
    Bytes& u64(uint64_t at, uint64_t v) { return u32(at, v).u32(at + 4, v >> 32); }
    Bytes& str(uint64_t at, const std::string& s) {  // no NUL added
        for (size_t i = 0; i < s.size(); ++i) u8(at + i, static_cast<uint8_t>(s[i]));
        return *this;
    }
    Bytes& fill(uint64_t at, uint64_t size, uint8_t v) {
        for (uint64_t i = 0; i < size; ++i) u8(at + i, v);
        return *this;
    }
};

// Runs parse, which must throw a FirmwareError whose field contains field_part.
template <typename F>
void require_firmware_error(F&& parse, const std::string& field_part) {
    try {
        parse();
        FAIL("parsed without error; expected a FirmwareError naming " << field_part);
    } catch (const FirmwareError& e) {
        INFO("error: " << e.what());
        CHECK(e.field().find(field_part) != std::string::npos);
        CHECK(!e.expected().empty());
        CHECK(!e.found().empty());
    }
}

}  // namespace baregpu::test::nv
