#include "firmware-loader/amd/rlc_toc.hpp"

#include <array>

namespace baregpu::fw::amd {

namespace {
constexpr uint64_t kEntryBytes = 8;
constexpr uint64_t kOffsetUnit = 8 * 4;     // RLC_TOC_OFFSET_DWUNIT dwords
constexpr uint64_t kSizeUnitX16 = 1024 * 4; // RLC_SIZE_MULTIPLE dwords
}  // namespace

std::string soc24_firmware_name(uint32_t id) {
    static constexpr std::array<const char*, 43> kNames = {
        "INVALID", "RLC_G_UCODE", "RLC_TOC", "RLCG_SCRATCH", "RLC_SRM_ARAM", "RLC_P_UCODE", "RLC_V_UCODE",
        "RLX6_UCODE", "RLX6_UCODE_CORE1", "RLX6_DRAM_BOOT", "RLX6_DRAM_BOOT_CORE1", "SDMA_UCODE_TH0",
        "SDMA_UCODE_TH1", "CP_PFP", "CP_ME", "CP_MEC", "RS64_MES_P0", "RS64_MES_P1", "RS64_PFP", "RS64_ME",
        "RS64_MEC", "RS64_MES_P0_STACK", "RS64_MES_P1_STACK", "RS64_PFP_P0_STACK", "RS64_PFP_P1_STACK",
        "RS64_ME_P0_STACK", "RS64_ME_P1_STACK", "RS64_MEC_P0_STACK", "RS64_MEC_P1_STACK", "RS64_MEC_P2_STACK",
        "RS64_MEC_P3_STACK", "RLC_SRM_DRAM_SR", "RLCG_SCRATCH_SR", "RLCP_SCRATCH_SR", "RLCV_SCRATCH_SR",
        "RLX6_DRAM_SR", "RLX6_DRAM_SR_CORE1", "RLCDEBUGLOG", "SRIOV_DEBUG", "SRIOV_CSA_RLC", "SRIOV_CSA_SDMA",
        "SRIOV_CSA_CP", "UMF_ZONE_PAD"};
    return id < kNames.size() ? kNames[id] : "id " + std::to_string(id);
}

RlcToc parse_rlc_toc(const ByteReader& file) {
    RlcToc toc;
    toc.header = parse_ucode_header(file);
    const UcodeHeader& h = toc.header;
    // Read as psp_firmware_header_v1_0 (psp_init_toc_microcode); real files say 1.0 with a 68-byte header.
    expect_header_version(file, h, 1, {0}, "RLC TOC (psp_firmware_header)");
    expect_header_size(file, h, 44, "psp_firmware_header_v1_0");
    toc.toc_version = file.u32(32, "sos.fw_version");
    file.expect(h.ucode_size_bytes % kEntryBytes == 0, "ucode_size_bytes", 20, "a multiple of 8 (whole TOC entries)",
                std::to_string(h.ucode_size_bytes));
    for (uint64_t at = h.ucode.offset; at < h.ucode.end(); at += kEntryBytes) {
        uint32_t dw0 = file.u32(at, "RLC_TABLE_OF_CONTENT_V2.DW0");
        uint32_t dw1 = file.u32(at + 4, "RLC_TABLE_OF_CONTENT_V2.DW1");
        RlcTocEntry e;
        e.id = dw0 >> 25;
        if (e.id == 0) break;
        e.offset = uint64_t{dw0 & 0x1ffffff} * kOffsetUnit;
        e.memory_destination = (dw1 >> 3) & 0x3;
        e.vfflr_image_code = (dw1 >> 5) & 0xf;
        bool size_x16 = (dw1 >> 12) & 1;
        e.size = uint64_t{dw1 >> 14} * (size_x16 ? kSizeUnitX16 : 4);
        toc.entries.push_back(e);
    }
    return toc;
}

}  // namespace baregpu::fw::amd
