// The SDMA engines' firmware (sdma_<ver>.bin): sdma_firmware_header v1.0/v1.1 (one image with a
// jump table), v2.0 (context thread TH0 + control thread TH1), v3.0 (one RS64 image).
// Layout: Linux drivers/gpu/drm/amd/amdgpu/amdgpu_ucode.h (sdma_firmware_header_v1_0/v1_1/v2_0/v3_0),
// torvalds/linux d754ed2821fd. TH0 starts at the ucode array; ctl_ucode_offset and the v3 offset are
// absolute (amdgpu_sdma.c amdgpu_sdma_init_microcode).
#pragma once

#include "firmware-loader/amd/ucode_header.hpp"

#include <optional>

namespace baregpu::fw::amd {

struct SdmaFirmware {
    UcodeHeader header;
    uint32_t ucode_feature_version = 0;
    Region ucode;                     // v1/v3: the image; v2: TH0, the context thread
    std::optional<Region> ctl_ucode;  // v2 only: TH1, the control thread
    std::optional<Region> jump_table; // v1 only, when jt_size != 0
    uint32_t digest_size = 0;         // v1.1 only
};

SdmaFirmware parse_sdma(const ByteReader& file);

}  // namespace baregpu::fw::amd
