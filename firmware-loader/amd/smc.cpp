#include "firmware-loader/amd/smc.hpp"

namespace baregpu::fw::amd {

namespace {
constexpr uint64_t kPptableEntryBytes = 12;  // smc_soft_pptable_entry: id, ppt_offset_bytes, ppt_size_bytes
constexpr uint32_t kMaxPptables = 64;        // real files carry 1 to 6; more is a corrupt count
}  // namespace

SmcFirmware parse_smc(const ByteReader& file) {
    SmcFirmware fw;
    fw.header = parse_ucode_header(file);
    const UcodeHeader& h = fw.header;
    fw.code = h.ucode;
    if (h.header_version_major == 1) {
        expect_header_version(file, h, 1, {0}, "smc_firmware_header");
        expect_header_size(file, h, 36, "smc_firmware_header_v1_0");
        fw.ucode_start_addr = file.u32(32, "ucode_start_addr");
        return fw;
    }
    expect_header_version(file, h, 2, {0, 1}, "smc_firmware_header");
    expect_header_size(file, h, 44, "smc_firmware_header_v2_" + std::to_string(h.header_version_minor));
    fw.ucode_start_addr = file.u32(32, "ucode_start_addr");
    if (h.header_version_minor == 0) {
        uint32_t offset = file.u32(36, "ppt_offset_bytes");
        uint32_t size = file.u32(40, "ppt_size_bytes");
        fw.pptables.push_back({0, file.region(offset, size, "soft pptable (ppt_offset_bytes, ppt_size_bytes)")});
        return fw;
    }
    uint32_t count = file.u32(36, "pptable_count");
    uint32_t entries = file.u32(40, "pptable_entry_offset");
    file.expect(count <= kMaxPptables, "pptable_count", 36, "at most " + std::to_string(kMaxPptables),
                std::to_string(count));
    file.region(entries, count * kPptableEntryBytes, "smc_soft_pptable_entry table (pptable_entry_offset, pptable_count)");
    for (uint32_t i = 0; i < count; ++i) {
        uint64_t at = entries + i * kPptableEntryBytes;
        SmcPptable p;
        p.id = file.u32(at, "smc_soft_pptable_entry.id");
        uint32_t offset = file.u32(at + 4, "smc_soft_pptable_entry.ppt_offset_bytes");
        uint32_t size = file.u32(at + 8, "smc_soft_pptable_entry.ppt_size_bytes");
        p.bytes = file.region(offset, size, "soft pptable " + std::to_string(p.id) + " (ppt_offset_bytes, ppt_size_bytes)");
        fw.pptables.push_back(p);
    }
    return fw;
}

}  // namespace baregpu::fw::amd
