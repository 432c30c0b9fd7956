#include "firmware-loader/amd/mes.hpp"

namespace baregpu::fw::amd {

MesFirmware parse_mes(const ByteReader& file) {
    MesFirmware fw;
    fw.header = parse_ucode_header(file);
    expect_header_version(file, fw.header, 1, {0}, "mes_firmware_header");
    expect_header_size(file, fw.header, 72, "mes_firmware_header_v1_0");
    fw.mes_ucode_version = file.u32(32, "mes_ucode_version");
    uint32_t ucode_size = file.u32(36, "mes_ucode_size_bytes");
    uint32_t ucode_offset = file.u32(40, "mes_ucode_offset_bytes");
    fw.mes_ucode_data_version = file.u32(44, "mes_ucode_data_version");
    uint32_t data_size = file.u32(48, "mes_ucode_data_size_bytes");
    uint32_t data_offset = file.u32(52, "mes_ucode_data_offset_bytes");
    fw.uc_start_addr = uint64_t{file.u32(60, "mes_uc_start_addr_hi")} << 32 | file.u32(56, "mes_uc_start_addr_lo");
    fw.data_start_addr = uint64_t{file.u32(68, "mes_data_start_addr_hi")} << 32 | file.u32(64, "mes_data_start_addr_lo");
    fw.instructions = file.region(ucode_offset, ucode_size, "MES instructions (mes_ucode_offset_bytes, mes_ucode_size_bytes)");
    fw.data = file.region(data_offset, data_size, "MES data (mes_ucode_data_offset_bytes, mes_ucode_data_size_bytes)");
    return fw;
}

}  // namespace baregpu::fw::amd
