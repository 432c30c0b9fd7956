#include "firmware-loader/amd/gfx.hpp"

namespace baregpu::fw::amd {

GfxFirmware parse_gfx(const ByteReader& file) {
    GfxFirmware fw;
    fw.header = parse_ucode_header(file);
    const UcodeHeader& h = fw.header;
    fw.ucode_feature_version = file.u32(32, "ucode_feature_version");
    if (h.header_version_major == 1) {
        expect_header_version(file, h, 1, {0}, "gfx_firmware_header");
        expect_header_size(file, h, 44, "gfx_firmware_header_v1_0");
        fw.instructions = h.ucode;
        uint32_t jt_offset = file.u32(36, "jt_offset");
        uint32_t jt_size = file.u32(40, "jt_size");
        if (jt_size != 0) {
            // Both in dwords from the start of the ucode array.
            uint64_t start = h.ucode_array_offset_bytes + uint64_t{jt_offset} * 4;
            fw.jump_table = file.region(start, uint64_t{jt_size} * 4, "jump table (jt_offset, jt_size in dwords)");
        }
        return fw;
    }
    expect_header_version(file, h, 2, {0}, "gfx_firmware_header");
    expect_header_size(file, h, 60, "gfx_firmware_header_v2_0");
    fw.rs64 = true;
    uint32_t ucode_size = file.u32(36, "ucode_size_bytes");
    uint32_t ucode_offset = file.u32(40, "ucode_offset_bytes");
    uint32_t data_size = file.u32(44, "data_size_bytes");
    uint32_t data_offset = file.u32(48, "data_offset_bytes");
    fw.ucode_start_addr = uint64_t{file.u32(56, "ucode_start_addr_hi")} << 32 | file.u32(52, "ucode_start_addr_lo");
    fw.instructions = file.region(ucode_offset, ucode_size, "RS64 instructions (ucode_offset_bytes, ucode_size_bytes)");
    fw.data = file.region(data_offset, data_size, "RS64 data (data_offset_bytes, data_size_bytes)");
    return fw;
}

}  // namespace baregpu::fw::amd
