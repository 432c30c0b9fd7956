#include "firmware-loader/amd/rlc.hpp"

namespace baregpu::fw::amd {

namespace {

// A {size, offset} pair of u32s at size_at / offset_at (absolute offsets).
void sized(const ByteReader& file, RlcFirmware& fw, const char* name, uint64_t size_at, uint64_t offset_at,
           uint32_t version = 0, uint32_t feature = 0) {
    uint32_t size = file.u32(size_at, std::string(name) + " size_bytes");
    uint32_t offset = file.u32(offset_at, std::string(name) + " offset_bytes");
    fw.regions.push_back({name, version, feature, file.region(offset, size, std::string(name) + " (offset_bytes, size_bytes)")});
}

// {ucode_ver, feature_ver, size_bytes, offset_bytes} at at (the v2.1 list machines, v2.3 cores).
void versioned(const ByteReader& file, RlcFirmware& fw, const char* name, uint64_t at) {
    uint32_t version = file.u32(at, std::string(name) + " ucode_ver");
    uint32_t feature = file.u32(at + 4, std::string(name) + " feature_ver");
    sized(file, fw, name, at + 8, at + 12, version, feature);
}

}  // namespace

const RlcRegion* RlcFirmware::find(std::string_view name) const {
    for (const RlcRegion& r : regions)
        if (r.name == name) return &r;
    return nullptr;
}

RlcFirmware parse_rlc(const ByteReader& file) {
    RlcFirmware fw;
    fw.header = parse_ucode_header(file);
    const UcodeHeader& h = fw.header;
    fw.ucode_feature_version = file.u32(32, "ucode_feature_version");
    fw.regions.push_back({"RLC_G", h.ucode_version, fw.ucode_feature_version, h.ucode});
    if (h.header_version_major == 1) {
        expect_header_version(file, h, 1, {0}, "rlc_firmware_header");
        expect_header_size(file, h, 52, "rlc_firmware_header_v1_0");
        fw.save_and_restore_offset = file.u32(36, "save_and_restore_offset");
        fw.clear_state_descriptor_offset = file.u32(40, "clear_state_descriptor_offset");
        fw.avail_scratch_ram_locations = file.u32(44, "avail_scratch_ram_locations");
        return fw;
    }
    expect_header_version(file, h, 2, {0, 1, 2, 3, 4, 5}, "rlc_firmware_header");
    const uint16_t minor = h.header_version_minor;
    // Header sizes of v2.0 .. v2.5 (v2.5 = v2.2 + four words).
    static constexpr uint32_t kHeaderBytes[] = {104, 156, 172, 204, 244, 188};
    expect_header_size(file, h, kHeaderBytes[minor], "rlc_firmware_header_v2_" + std::to_string(minor));

    fw.save_and_restore_offset = file.u32(44, "save_and_restore_offset");
    fw.clear_state_descriptor_offset = file.u32(48, "clear_state_descriptor_offset");
    fw.avail_scratch_ram_locations = file.u32(52, "avail_scratch_ram_locations");
    fw.reg_restore_list_size = file.u32(56, "reg_restore_list_size");
    fw.reg_list_format_start = file.u32(60, "reg_list_format_start");
    fw.reg_list_format_separate_start = file.u32(64, "reg_list_format_separate_start");
    fw.starting_offsets_start = file.u32(68, "starting_offsets_start");
    uint32_t jt_offset = file.u32(36, "jt_offset");
    uint32_t jt_size = file.u32(40, "jt_size");
    if (jt_size != 0)
        fw.regions.push_back({"jump_table", 0, 0,
                              file.region(h.ucode_array_offset_bytes + uint64_t{jt_offset} * 4, uint64_t{jt_size} * 4,
                                          "jump table (jt_offset, jt_size in dwords)")});
    sized(file, fw, "reg_list_format", 72, 76);
    sized(file, fw, "reg_list", 80, 84);
    sized(file, fw, "reg_list_format_separate", 88, 92);
    sized(file, fw, "reg_list_separate", 96, 100);
    if (minor >= 1) {
        fw.reg_list_format_direct_reg_list_length = file.u32(104, "reg_list_format_direct_reg_list_length");
        versioned(file, fw, "save_restore_list_cntl", 108);
        versioned(file, fw, "save_restore_list_gpm", 124);
        versioned(file, fw, "save_restore_list_srm", 140);
    }
    if (minor >= 2) {
        sized(file, fw, "IRAM", 156, 160);
        sized(file, fw, "DRAM", 164, 168);
    }
    if (minor == 5) {
        sized(file, fw, "RLC_1 IRAM", 172, 176);
        sized(file, fw, "RLC_1 DRAM", 180, 184);
        return fw;
    }
    if (minor >= 3) {
        versioned(file, fw, "RLCP", 172);
        versioned(file, fw, "RLCV", 188);
    }
    if (minor >= 4) {
        sized(file, fw, "global_tap_delays", 204, 208);
        sized(file, fw, "se0_tap_delays", 212, 216);
        sized(file, fw, "se1_tap_delays", 220, 224);
        sized(file, fw, "se2_tap_delays", 228, 232);
        sized(file, fw, "se3_tap_delays", 236, 240);
    }
    return fw;
}

}  // namespace baregpu::fw::amd
