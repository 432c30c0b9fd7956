// The real firmware files the tests decode: firmware/ (linux-firmware, unmodified; the Meson option
// firmware_dir), found through BAREGPU_TEST_FIRMWARE_DIR, which the tests' meson.build files set.
// The repository carries them, so a missing directory or file fails the test (REQUIRE_FIRMWARE).
#pragma once

#include "firmware-loader/byte_reader.hpp"

#include <cstddef>
#include <filesystem>
#include <optional>
#include <sanitizer/asan_interface.h>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
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

// Prefixes of a private copy of a file, shortest last: prefix(n) poisons everything past the
// first n bytes for AddressSanitizer (no-ops in other builds), so a parser reading even one byte
// past its input, or anywhere further in the file, is reported, as it would be past an exact-size
// copy, without a copy per length (megabytes faulted in and zeroed each time). Lengths must not
// grow: each call poisons only what the shorter prefix cuts off.
class PoisonedPrefixes {
public:
    explicit PoisonedPrefixes(std::vector<std::byte> bytes) : bytes_(std::move(bytes)), poisoned_from_(bytes_.size()) {}
    ~PoisonedPrefixes() { ASAN_UNPOISON_MEMORY_REGION(bytes_.data(), bytes_.size()); }
    PoisonedPrefixes(const PoisonedPrefixes&) = delete;
    PoisonedPrefixes& operator=(const PoisonedPrefixes&) = delete;

    std::span<const std::byte> prefix(uint64_t length) {
        if (length > poisoned_from_)
            throw std::logic_error("PoisonedPrefixes: length " + std::to_string(length) + " after " + std::to_string(poisoned_from_));
        ASAN_POISON_MEMORY_REGION(bytes_.data() + length, poisoned_from_ - length);
        poisoned_from_ = length;
        return std::span<const std::byte>(bytes_).first(length);
    }

private:
    std::vector<std::byte> bytes_;
    uint64_t poisoned_from_;
};

}  // namespace baregpu::test

// At the top of a test case that reads real firmware files.
#define REQUIRE_FIRMWARE()                                                                                          \
    do {                                                                                                            \
        if (!::baregpu::test::firmware_dir())                                                                       \
            FAIL("BAREGPU_TEST_FIRMWARE_DIR does not name a directory (the checkout's firmware/: run through meson test)"); \
    } while (false)
