#include "firmware-loader/amd/psp.hpp"

#include <array>

namespace baregpu::fw::amd {

namespace {

constexpr uint64_t kDescriptorArray = 36;   // psp/ta_firmware_header_v2_0: common (32) + bin count (4)
constexpr uint64_t kDescriptorBytes = 16;   // psp_fw_bin_desc: fw_type, fw_version, offset_bytes, size_bytes
constexpr uint64_t kLegacyBytes = 12;       // psp_fw_legacy_bin_desc: fw_version, offset_bytes, size_bytes
// UCODE_MAX_PSP_PACKAGING (amdgpu_ucode.h): the descriptors that fit in the 256-byte header union.
constexpr uint32_t kMaxDescriptors = (256 - 32 - 4) / 16;

std::string type_name(uint32_t type, const char* name) {
    return name != nullptr ? std::string(name) : "type " + std::to_string(type);
}

// A blob that starts offset_bytes after the ucode array (the descriptors' offsets are relative to
// ucode_array_offset_bytes: parse_sos_bin_descriptor).
Region blob(const ByteReader& file, const UcodeHeader& h, uint32_t offset, uint32_t size, const std::string& what) {
    uint64_t start = file.add(h.ucode_array_offset_bytes, offset, what + " offset_bytes", 24);
    return file.region(start, size, what + " (ucode_array_offset_bytes + offset_bytes, size_bytes)");
}

// psp_fw_bin_desc[count] right after the count (v2.0 of both psp and ta headers).
std::vector<PspBinary> read_table(const ByteReader& file, const UcodeHeader& h, bool ta) {
    uint32_t count = file.u32(32, ta ? "ta_fw_bin_count" : "psp_fw_bin_count");
    file.expect(count >= 1 && count <= kMaxDescriptors, ta ? "ta_fw_bin_count" : "psp_fw_bin_count", 32,
                "1 to " + std::to_string(kMaxDescriptors), std::to_string(count));
    uint64_t table_end = kDescriptorArray + count * kDescriptorBytes;
    file.expect(table_end <= h.ucode_array_offset_bytes, "psp_fw_bin descriptors", kDescriptorArray,
                "to end before the ucode array at " + std::to_string(h.ucode_array_offset_bytes),
                "they end at " + std::to_string(table_end));
    std::vector<PspBinary> out;
    for (uint32_t i = 0; i < count; ++i) {
        uint64_t at = kDescriptorArray + i * kDescriptorBytes;
        PspBinary b;
        b.type = file.u32(at, "psp_fw_bin[].fw_type");
        b.fw_version = file.u32(at + 4, "psp_fw_bin[].fw_version");
        uint32_t offset = file.u32(at + 8, "psp_fw_bin[].offset_bytes");
        uint32_t size = file.u32(at + 12, "psp_fw_bin[].size_bytes");
        b.name = ta ? type_name(b.type, b.type <= 7 ? to_string(static_cast<TaFwType>(b.type)) : nullptr)
                    : type_name(b.type, b.type <= 12 ? to_string(static_cast<PspFwType>(b.type)) : nullptr);
        b.bytes = blob(file, h, offset, size, "psp_fw_bin[" + std::to_string(i) + "] (" + b.name + ")");
        out.push_back(std::move(b));
    }
    return out;
}

struct Legacy {
    uint64_t at;      // where the psp_fw_legacy_bin_desc sits in the header
    uint32_t type;    // what it describes
    const char* name;
};

// Fixed descriptors {fw_version, offset_bytes, size_bytes} in a header of header_bytes (named
// what); a zero size means "not in this file".
void read_legacy(const ByteReader& file, const UcodeHeader& h, std::span<const Legacy> descs, uint32_t header_bytes,
                 const std::string& what, PspFirmware& out) {
    expect_header_size(file, h, header_bytes, what);
    file.expect(h.ucode_array_offset_bytes >= header_bytes, "ucode_array_offset_bytes", 24,
                "at least " + std::to_string(header_bytes) + " (past the " + what + ")",
                std::to_string(h.ucode_array_offset_bytes));
    for (const Legacy& d : descs) {
        uint32_t version = file.u32(d.at, std::string(d.name) + ".fw_version");
        uint32_t offset = file.u32(d.at + 4, std::string(d.name) + ".offset_bytes");
        uint32_t size = file.u32(d.at + 8, std::string(d.name) + ".size_bytes");
        if (size == 0) continue;
        out.binaries.push_back({d.type, d.name, version, blob(file, h, offset, size, d.name)});
    }
}

// The v2.0 header both sOS and TA files use: the common header, a count and a descriptor table.
// False when the file is not v2.x (the caller reads the v1 layout).
bool read_v2(const ByteReader& file, PspFirmware& fw, const char* header) {
    const UcodeHeader& h = fw.header;
    if (h.header_version_major != 2) return false;
    expect_header_version(file, h, 2, {0}, header);
    expect_header_size(file, h, 36, std::string(header) + "_v2_0");
    fw.binaries = read_table(file, h, fw.kind == PspFirmware::Kind::ta);
    return true;
}

}  // namespace

const char* to_string(PspFwType type) {
    static constexpr std::array<const char*, 13> kNames = {"UNKNOWN", "SOS", "SYS_DRV", "KDB", "TOC", "SPL", "RL",
                                                           "SOC_DRV", "INTF_DRV", "DBG_DRV", "RAS_DRV",
                                                           "IPKEYMGR_DRV", "SPDM_DRV"};
    auto i = static_cast<uint32_t>(type);
    return i < kNames.size() ? kNames[i] : "?";
}

const char* to_string(TaFwType type) {
    static constexpr std::array<const char*, 8> kNames = {"UNKNOWN", "ASD", "XGMI", "RAS", "HDCP", "DTM", "RAP",
                                                          "SECUREDISPLAY"};
    auto i = static_cast<uint32_t>(type);
    return i < kNames.size() ? kNames[i] : "?";
}

const PspBinary* PspFirmware::find_type(Kind of, uint32_t type) const {
    if (kind != of) return nullptr;
    for (const PspBinary& b : binaries)
        if (b.type == type) return &b;
    return nullptr;
}

PspFirmware parse_psp_sos(const ByteReader& file) {
    PspFirmware fw;
    fw.kind = PspFirmware::Kind::sos;
    fw.header = parse_ucode_header(file);
    const UcodeHeader& h = fw.header;
    if (read_v2(file, fw, "psp_firmware_header")) return fw;
    expect_header_version(file, h, 1, {0, 1, 2, 3}, "psp_firmware_header");
    // v1.x: SYS_DRV sits at the start of the ucode array and runs up to SOS (psp_init_sos_base_fw),
    // so sos.offset_bytes doubles as the sys driver's size.
    uint32_t sos_offset = file.u32(36, "sos.offset_bytes");
    if (sos_offset != 0)
        fw.binaries.push_back({static_cast<uint32_t>(PspFwType::sys_drv), "SYS_DRV", file.u32(32, "sos.fw_version"),
                               blob(file, h, 0, sos_offset, "SYS_DRV")});
    static constexpr Legacy kV10[] = {{32, 1, "SOS"}};
    static constexpr Legacy kV11[] = {{32, 1, "SOS"}, {44, 4, "TOC"}, {56, 3, "KDB"}};
    static constexpr Legacy kV12[] = {{32, 1, "SOS"}, {44, 0, "RES"}, {56, 3, "KDB"}};
    // v1.3 = v1.1 + spl, rl, sys_drv_aux, sos_aux.
    static constexpr Legacy kV13[] = {{32, 1, "SOS"}, {44, 4, "TOC"}, {56, 3, "KDB"}, {68, 5, "SPL"},
                                      {80, 6, "RL"},  {92, 2, "SYS_DRV_AUX"}, {104, 1, "SOS_AUX"}};
    std::span<const Legacy> descs;
    uint32_t header_bytes = 0;
    switch (h.header_version_minor) {
    case 0: descs = kV10; header_bytes = 44; break;
    case 1: descs = kV11; header_bytes = 68; break;
    case 2: descs = kV12; header_bytes = 68; break;
    default: descs = kV13; header_bytes = 116; break;
    }
    read_legacy(file, h, descs, header_bytes, "psp_firmware_header_v1_" + std::to_string(h.header_version_minor), fw);
    return fw;
}

PspFirmware parse_psp_ta(const ByteReader& file) {
    PspFirmware fw;
    fw.kind = PspFirmware::Kind::ta;
    fw.header = parse_ucode_header(file);
    const UcodeHeader& h = fw.header;
    if (read_v2(file, fw, "ta_firmware_header")) return fw;
    expect_header_version(file, h, 1, {0}, "ta_firmware_header");
    // ta_firmware_header_v1_0: five psp_fw_legacy_bin_desc after the common header.
    static constexpr Legacy kV10[] = {{32, 2, "XGMI"}, {44, 3, "RAS"}, {56, 4, "HDCP"}, {68, 5, "DTM"},
                                      {80, 7, "SECUREDISPLAY"}};
    read_legacy(file, h, kV10, 92, "ta_firmware_header_v1_0", fw);
    return fw;
}

}  // namespace baregpu::fw::amd
