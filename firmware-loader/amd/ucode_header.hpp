// amdgpu's common_firmware_header: the 32 bytes every AMD ucode file (PSP, SMU, CP, RLC, MES, IMU,
// SDMA) begins with. Layout: Linux drivers/gpu/drm/amd/amdgpu/amdgpu_ucode.h (struct
// common_firmware_header), torvalds/linux d754ed2821fd.
#pragma once

#include "firmware-loader/byte_reader.hpp"

#include <cstdint>
#include <string>

namespace baregpu::fw::amd {

// What the crc32 field turned out to cover. Linux never checks it, and real files disagree
// (CrcResult below; tests/firmware/amd_files_test.cpp), so a mismatch is a warning, never a rejection.
enum class CrcResult {
    payload,           // zlib CRC-32 of bytes [32, EOF): what the field is documented to hold
    first_480_bytes,   // CRC-32 of bytes [32, 512): seen in gc_12_0_1_toc and smu_14_0_3
    mismatch,          // neither
};
const char* to_string(CrcResult result);

struct UcodeHeader {
    static constexpr uint64_t kSize = 32;

    uint32_t size_bytes = 0;         // the whole file; must equal its length
    uint32_t header_size_bytes = 0;  // this header plus the IP-specific one (see each parser)
    uint16_t header_version_major = 0;
    uint16_t header_version_minor = 0;
    uint16_t ip_version_major = 0;   // coarse: the minor is 0 in every real file; take IP versions from discovery
    uint16_t ip_version_minor = 0;
    uint32_t ucode_version = 0;
    uint32_t ucode_size_bytes = 0;
    uint32_t ucode_array_offset_bytes = 0;
    uint32_t crc32 = 0;
    Region ucode;                    // [ucode_array_offset_bytes, + ucode_size_bytes)
    CrcResult crc = CrcResult::mismatch;

    std::string version() const;     // "2.0"
};

// Reads and checks the common header: the file is at least a header long, size_bytes equals the
// file's length (amdgpu_ucode_validate's check), header_size_bytes is between 32 and the file's
// length, and the ucode array lies inside the file.
UcodeHeader parse_ucode_header(const ByteReader& file);

// Fails unless the header's version is major.minor (for parsers that take exactly one version).
void expect_header_version(const ByteReader& file, const UcodeHeader& header, uint16_t major,
                           std::initializer_list<uint16_t> minors, std::string_view what);

// The header_size_bytes the IP-specific header needs at least: fail when the file's says less.
void expect_header_size(const ByteReader& file, const UcodeHeader& header, uint32_t at_least, std::string_view what);

}  // namespace baregpu::fw::amd
