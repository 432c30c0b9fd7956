// The MES scheduler's firmware (gc_<ver>_mes*.bin, _uni_mes.bin): mes_firmware_header v1.0, an
// instruction part and a data part, each with the address the MES core loads it at.
// Layout: Linux drivers/gpu/drm/amd/amdgpu/amdgpu_ucode.h (mes_firmware_header_v1_0), torvalds/linux
// d754ed2821fd; offsets are absolute (mes_v11_0_load_microcode reads fw->data + offset).
// Real MES files carry version 0 in both version fields: 0 is a version, not "none".
#pragma once

#include "firmware-loader/amd/ucode_header.hpp"

namespace baregpu::fw::amd {

struct MesFirmware {
    UcodeHeader header;
    uint32_t mes_ucode_version = 0;
    uint32_t mes_ucode_data_version = 0;
    Region instructions;
    Region data;
    uint64_t uc_start_addr = 0;    // hi << 32 | lo
    uint64_t data_start_addr = 0;  // hi << 32 | lo
};

MesFirmware parse_mes(const ByteReader& file);

}  // namespace baregpu::fw::amd
