// Builds amdgpu ucode files in memory for the header versions no real file in firmware/
// uses (psp v1.x, ta v1.0, gfx v1.0, sdma v1.x, rlc v2.4/v2.5, smc v1.0) and for malformed
// variants. Layouts: Linux amdgpu_ucode.h (see firmware-loader/amd/*.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace baregpu::test {

class UcodeBuilder {
public:
    // A file of total_bytes with a common header: version major.minor, header_size, the ucode
    // array at array_offset of array_bytes.
    UcodeBuilder(uint32_t total_bytes, uint16_t major, uint16_t minor, uint32_t header_size, uint32_t array_offset,
                 uint32_t array_bytes) : bytes_(total_bytes) {
        put32(0, total_bytes);
        put32(4, header_size);
        put16(8, major);
        put16(10, minor);
        put16(12, 11);
        put32(16, 0x1234);
        put32(20, array_bytes);
        put32(24, array_offset);
    }

    UcodeBuilder& put16(size_t at, uint16_t v) {
        for (int i = 0; i < 2; ++i) bytes_.at(at + i) = static_cast<std::byte>(v >> (8 * i));
        return *this;
    }
    UcodeBuilder& put32(size_t at, uint32_t v) {
        for (int i = 0; i < 4; ++i) bytes_.at(at + i) = static_cast<std::byte>(v >> (8 * i));
        return *this;
    }
    const std::vector<std::byte>& bytes() const { return bytes_; }

private:
    std::vector<std::byte> bytes_;
};

}  // namespace baregpu::test
