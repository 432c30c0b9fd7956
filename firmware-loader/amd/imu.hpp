// The IMU's firmware (gc_<ver>_imu.bin): imu_firmware_header v1.0, an IRAM and a DRAM image.
// Layout: Linux drivers/gpu/drm/amd/amdgpu/amdgpu_ucode.h (imu_firmware_header_v1_0), torvalds/linux
// d754ed2821fd. Both offsets are relative to ucode_array_offset_bytes (imu_v11_0_load_microcode;
// in the real files DRAM follows IRAM directly).
#pragma once

#include "firmware-loader/amd/ucode_header.hpp"

namespace baregpu::fw::amd {

struct ImuFirmware {
    UcodeHeader header;
    Region iram;
    Region dram;
};

ImuFirmware parse_imu(const ByteReader& file);

}  // namespace baregpu::fw::amd
