#include "firmware-loader/amd/imu.hpp"

namespace baregpu::fw::amd {

ImuFirmware parse_imu(const ByteReader& file) {
    ImuFirmware fw;
    fw.header = parse_ucode_header(file);
    const UcodeHeader& h = fw.header;
    expect_header_version(file, h, 1, {0}, "imu_firmware_header");
    expect_header_size(file, h, 48, "imu_firmware_header_v1_0");
    uint32_t iram_size = file.u32(32, "imu_iram_ucode_size_bytes");
    uint32_t iram_offset = file.u32(36, "imu_iram_ucode_offset_bytes");
    uint32_t dram_size = file.u32(40, "imu_dram_ucode_size_bytes");
    uint32_t dram_offset = file.u32(44, "imu_dram_ucode_offset_bytes");
    fw.iram = file.region(file.add(h.ucode_array_offset_bytes, iram_offset, "imu_iram_ucode_offset_bytes", 36), iram_size,
                          "IMU IRAM (ucode_array_offset_bytes + imu_iram_ucode_offset_bytes, imu_iram_ucode_size_bytes)");
    fw.dram = file.region(file.add(h.ucode_array_offset_bytes, dram_offset, "imu_dram_ucode_offset_bytes", 44), dram_size,
                          "IMU DRAM (ucode_array_offset_bytes + imu_dram_ucode_offset_bytes, imu_dram_ucode_size_bytes)");
    return fw;
}

}  // namespace baregpu::fw::amd
