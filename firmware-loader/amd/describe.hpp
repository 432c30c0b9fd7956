// What an AMD firmware file is, for fwinfo and the robustness tests: picks the parser from the
// file's name as linux-firmware spells it (psp_13_0_0_sos.bin, gc_11_0_0_mec.bin, ...) — amdgpu
// ucode headers carry no type field — or from the discovery signature.
#pragma once

#include "firmware-loader/byte_reader.hpp"
#include "firmware-loader/description.hpp"

#include <optional>
#include <string_view>

namespace baregpu::fw::amd {

enum class FileKind { psp_sos, psp_ta, psp_toc, smc, gfx, rlc, rlc_toc, mes, imu, sdma, discovery };
const char* to_string(FileKind kind);

// From the basename ("gc_11_0_0_mec.bin", also with .zst/.xz or a _kicker suffix); nullopt when the
// name is not one of amdgpu's (the bytes are not looked at, except the discovery signature).
std::optional<FileKind> kind_of(const ByteReader& file, std::string_view basename);

// Parses the file as kind and describes what it decoded. Throws FirmwareError.
Description describe(const ByteReader& file, FileKind kind);

// kind_of + describe; nullopt when the file is not an amdgpu format.
std::optional<Description> describe_file(const ByteReader& file, std::string_view basename);

}  // namespace baregpu::fw::amd
