// CRC-32 as zlib computes it (IEEE 802.3 polynomial, reflected, initial and final XOR
// 0xffffffff): the checksum amdgpu's common_firmware_header.crc32 field is meant to carry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace baregpu::fw {

uint32_t crc32(std::span<const std::byte> bytes, uint32_t crc = 0);

}  // namespace baregpu::fw
