// The real firmware files the tests decode: firmware/ (linux-firmware, unmodified; the Meson option
// firmware_dir), found through BAREGPU_TEST_FIRMWARE_DIR, which the tests' meson.build files set.
// The repository carries them, so a missing directory or file fails the test (REQUIRE_FIRMWARE).
#pragma once

#include "firmware-loader/byte_reader.hpp"

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::test {

// The directory, or nullopt when the variable is unset or names no directory.
std::optional<std::filesystem::path> firmware_dir();

// The bytes of dir/relative ("amdgpu/psp_13_0_0_sos.bin"). Throws std::runtime_error (failing the
// test) when the directory exists but the file does not.
std::vector<std::byte> firmware_bytes(const std::string& relative);

// Every regular file under the directory except the licences and MANIFEST, as paths relative to
// it, sorted.
std::vector<std::string> all_firmware_files();

// Reader over bytes named like the file (the name is what errors and kind detection see).
inline fw::ByteReader reader(const std::vector<std::byte>& bytes, const std::string& relative) {
    return fw::ByteReader(bytes, relative.substr(relative.rfind('/') + 1));
}

}  // namespace baregpu::test

// At the top of a test case that reads real firmware files.
#define REQUIRE_FIRMWARE()                                                                                          \
    do {                                                                                                            \
        if (!::baregpu::test::firmware_dir())                                                                       \
            FAIL("BAREGPU_TEST_FIRMWARE_DIR does not name a directory (the checkout's firmware/: run through meson test)"); \
    } while (false)
