// What a firmware file is, whichever vendor's: amdgpu formats by name (their headers have no type
// field), NVIDIA formats by magic. The entry point fwinfo and the robustness tests use.
#pragma once

#include "firmware-loader/byte_reader.hpp"
#include "firmware-loader/description.hpp"

#include <string_view>

namespace baregpu::fw {

// Parses and describes the file. Throws FirmwareError when it is malformed, or when it is no
// format we know (the error says which names and magics were tried).
Description describe_firmware(const ByteReader& file, std::string_view basename);

}  // namespace baregpu::fw
