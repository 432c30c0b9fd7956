#include "firmware-loader/amd/ucode_header.hpp"

#include "firmware-loader/crc32.hpp"

#include <algorithm>

namespace baregpu::fw::amd {

const char* to_string(CrcResult result) {
    switch (result) {
    case CrcResult::payload: return "matches bytes [32, EOF)";
    case CrcResult::first_480_bytes: return "matches bytes [32, 512)";
    case CrcResult::mismatch: return "matches no range tried";
    }
    return "?";
}

std::string UcodeHeader::version() const {
    return std::to_string(header_version_major) + "." + std::to_string(header_version_minor);
}

UcodeHeader parse_ucode_header(const ByteReader& file) {
    file.expect(file.size() >= UcodeHeader::kSize, "common_firmware_header", 0,
                "at least " + std::to_string(UcodeHeader::kSize) + " bytes", std::to_string(file.size()) + " bytes");
    UcodeHeader h;
    h.size_bytes = file.u32(0, "size_bytes");
    h.header_size_bytes = file.u32(4, "header_size_bytes");
    h.header_version_major = file.u16(8, "header_version_major");
    h.header_version_minor = file.u16(10, "header_version_minor");
    h.ip_version_major = file.u16(12, "ip_version_major");
    h.ip_version_minor = file.u16(14, "ip_version_minor");
    h.ucode_version = file.u32(16, "ucode_version");
    h.ucode_size_bytes = file.u32(20, "ucode_size_bytes");
    h.ucode_array_offset_bytes = file.u32(24, "ucode_array_offset_bytes");
    h.crc32 = file.u32(28, "crc32");

    file.expect(h.size_bytes == file.size(), "size_bytes", 0, std::to_string(file.size()) + " (the file's length)",
                std::to_string(h.size_bytes));
    file.expect(h.header_size_bytes >= UcodeHeader::kSize && h.header_size_bytes <= file.size(), "header_size_bytes", 4,
                "32 to " + std::to_string(file.size()), std::to_string(h.header_size_bytes));
    file.expect(h.ucode_array_offset_bytes >= UcodeHeader::kSize, "ucode_array_offset_bytes", 24,
                "at least 32 (past the common header)", std::to_string(h.ucode_array_offset_bytes));
    h.ucode = file.region(h.ucode_array_offset_bytes, h.ucode_size_bytes, "ucode_array_offset_bytes + ucode_size_bytes");

    auto bytes = file.data();
    if (crc32(bytes.subspan(UcodeHeader::kSize)) == h.crc32)
        h.crc = CrcResult::payload;
    else if (bytes.size() >= 512 && crc32(bytes.subspan(UcodeHeader::kSize, 512 - UcodeHeader::kSize)) == h.crc32)
        h.crc = CrcResult::first_480_bytes;
    return h;
}

void expect_header_version(const ByteReader& file, const UcodeHeader& h, uint16_t major,
                           std::initializer_list<uint16_t> minors, std::string_view what) {
    bool ok = h.header_version_major == major &&
              std::find(minors.begin(), minors.end(), h.header_version_minor) != minors.end();
    if (ok) return;
    std::string expected = std::string(what) + " header version";
    for (uint16_t minor : minors) expected += " " + std::to_string(major) + "." + std::to_string(minor);
    file.fail("header_version_major.minor", 8, expected, h.version());
}

void expect_header_size(const ByteReader& file, const UcodeHeader& h, uint32_t at_least, std::string_view what) {
    file.expect(h.header_size_bytes >= at_least, "header_size_bytes", 4,
                "at least " + std::to_string(at_least) + " for " + std::string(what), std::to_string(h.header_size_bytes));
}

}  // namespace baregpu::fw::amd
