// The command processor's firmware (gc_<ver>_{pfp,me,mec,ce}.bin): gfx_firmware_header v1.0
// (F32 ucode with a jump table) and v2.0 (RS64: separate instruction and data/stack parts and the
// start address the core runs from).
// Layout: Linux drivers/gpu/drm/amd/amdgpu/amdgpu_ucode.h (gfx_firmware_header_v1_0/v2_0),
// torvalds/linux d754ed2821fd. v1 jump-table units (dwords from the ucode start): gfx_v10_0.c;
// v2 offsets are absolute: gfx_v11_0_rlc_backdoor_autoload_copy_gfx_ucode (the data part ends each real file).
#pragma once

#include "firmware-loader/amd/ucode_header.hpp"

#include <optional>

namespace baregpu::fw::amd {

struct GfxFirmware {
    UcodeHeader header;
    uint32_t ucode_feature_version = 0;
    bool rs64 = false;                    // v2.0
    Region instructions;                  // v1: the ucode array; v2: ucode_offset/size_bytes
    std::optional<Region> jump_table;     // v1 only, when jt_size != 0
    std::optional<Region> data;           // v2 only: data and stacks
    uint64_t ucode_start_addr = 0;        // v2 only: hi << 32 | lo
};

GfxFirmware parse_gfx(const ByteReader& file);

}  // namespace baregpu::fw::amd
