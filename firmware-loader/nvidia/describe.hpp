// Identification of NVIDIA firmware files for fwinfo and the loader: which NVIDIA format a
// file is, decided by its magic, and its decoded headers as a Description.
#pragma once

#include "firmware-loader/byte_reader.hpp"
#include "firmware-loader/description.hpp"

#include <optional>
#include <string_view>

namespace baregpu::fw::nv {

// nullopt when the bytes carry none of the NVIDIA magics: "\x7fELF" (GSP-RM image, FMC),
// u32 0x10de at offset 0 (nvfw_bin_hdr: booter, scrubber, bootloader), u16 0xAA55 at offset 0
// (VBIOS). Otherwise the decoded file; throws FirmwareError when a file with one of those
// magics is malformed. basename ("booter_load-570.144.bin") only breaks a tie the header
// cannot: which sub-header an nvfw_bin_hdr container carries.
std::optional<Description> describe_file(const ByteReader& file, std::string_view basename);

}  // namespace baregpu::fw::nv
