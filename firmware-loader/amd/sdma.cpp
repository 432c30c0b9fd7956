#include "firmware-loader/amd/sdma.hpp"

namespace baregpu::fw::amd {

SdmaFirmware parse_sdma(const ByteReader& file) {
    SdmaFirmware fw;
    fw.header = parse_ucode_header(file);
    const UcodeHeader& h = fw.header;
    fw.ucode_feature_version = file.u32(32, "ucode_feature_version");
    switch (h.header_version_major) {
    case 1: {
        expect_header_version(file, h, 1, {0, 1}, "sdma_firmware_header");
        expect_header_size(file, h, h.header_version_minor == 1 ? 52 : 48,
                           "sdma_firmware_header_v1_" + std::to_string(h.header_version_minor));
        fw.ucode = h.ucode;
        uint32_t jt_offset = file.u32(40, "jt_offset");
        uint32_t jt_size = file.u32(44, "jt_size");
        if (jt_size != 0)
            fw.jump_table = file.region(h.ucode_array_offset_bytes + uint64_t{jt_offset} * 4, uint64_t{jt_size} * 4,
                                        "jump table (jt_offset, jt_size in dwords)");
        if (h.header_version_minor == 1) fw.digest_size = file.u32(48, "digest_size");
        return fw;
    }
    case 2: {
        expect_header_version(file, h, 2, {0}, "sdma_firmware_header");
        expect_header_size(file, h, 64, "sdma_firmware_header_v2_0");
        uint32_t ctx_size = file.u32(36, "ctx_ucode_size_bytes");
        uint32_t ctl_offset = file.u32(48, "ctl_ucode_offset");
        uint32_t ctl_size = file.u32(52, "ctl_ucode_size_bytes");
        fw.ucode = file.region(h.ucode_array_offset_bytes, ctx_size, "SDMA TH0 (ucode_array_offset_bytes, ctx_ucode_size_bytes)");
        fw.ctl_ucode = file.region(ctl_offset, ctl_size, "SDMA TH1 (ctl_ucode_offset, ctl_ucode_size_bytes)");
        return fw;
    }
    default: {
        expect_header_version(file, h, 3, {0}, "sdma_firmware_header");
        expect_header_size(file, h, 44, "sdma_firmware_header_v3_0");
        uint32_t offset = file.u32(36, "ucode_offset_bytes");
        uint32_t size = file.u32(40, "ucode_size_bytes");
        fw.ucode = file.region(offset, size, "SDMA RS64 image (ucode_offset_bytes, ucode_size_bytes)");
        return fw;
    }
    }
}

}  // namespace baregpu::fw::amd
