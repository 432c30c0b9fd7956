#include "firmware-loader/amd/describe.hpp"

#include "firmware-loader/amd/discovery.hpp"
#include "firmware-loader/amd/gfx.hpp"
#include "firmware-loader/amd/imu.hpp"
#include "firmware-loader/amd/mes.hpp"
#include "firmware-loader/amd/psp.hpp"
#include "firmware-loader/amd/psp_toc.hpp"
#include "firmware-loader/amd/rlc.hpp"
#include "firmware-loader/amd/rlc_toc.hpp"
#include "firmware-loader/amd/sdma.hpp"
#include "firmware-loader/amd/smc.hpp"

#include <string>

namespace baregpu::fw::amd {

namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.substr(s.size() - p.size()) == p; }

// "gc_11_0_0_mec.bin.zst" -> "gc_11_0_0_mec"; "psp_13_0_0_sos_kicker.bin" -> "psp_13_0_0_sos".
std::string_view stem(std::string_view name) {
    for (std::string_view ext : {".zst", ".xz"})
        if (ends_with(name, ext)) name.remove_suffix(ext.size());
    if (ends_with(name, ".bin")) name.remove_suffix(4);
    if (ends_with(name, "_kicker")) name.remove_suffix(7);
    return name;
}

Description& common(Description& d, const UcodeHeader& h, const std::string& format) {
    d.format = format + " v" + h.version();
    d.num("size_bytes", h.size_bytes).num("header_size_bytes", h.header_size_bytes).text("header_version", h.version());
    d.text("ip_version", std::to_string(h.ip_version_major) + "." + std::to_string(h.ip_version_minor));
    d.hex("ucode_version", h.ucode_version).num("ucode_size_bytes", h.ucode_size_bytes);
    d.num("ucode_array_offset_bytes", h.ucode_array_offset_bytes).hex("crc32", h.crc32);
    d.text("crc32_check", to_string(h.crc));
    if (h.crc == CrcResult::mismatch)
        d.warnings.push_back("crc32 " + hex(h.crc32) + " matches no range of the file (Linux does not check it either)");
    return d;
}

void add(Description& d, const std::string& name, const Region& r) { d.part(name, r.offset, r.size()); }

Description describe_psp(const ByteReader& file, bool ta) {
    PspFirmware fw = ta ? parse_psp_ta(file) : parse_psp_sos(file);
    Description d;
    common(d, fw.header, ta ? "amdgpu ta_firmware_header" : "amdgpu psp_firmware_header");
    d.num("binaries", fw.binaries.size());
    for (const PspBinary& b : fw.binaries) {
        Part& p = d.part(b.name, b.bytes.offset, b.bytes.size());
        p.num("fw_type", b.type);
        // Linux skips such a component with "Unsupported PSP FW type" / "Unsupported TA type"
        // (amdgpu_psp.c parse_sos_bin_descriptor, parse_ta_bin_descriptor): it is never loaded.
        const uint32_t last = ta ? static_cast<uint32_t>(TaFwType::securedisplay) : static_cast<uint32_t>(PspFwType::spdm_drv);
        if (b.type == 0 || b.type > last) {
            d.warnings.push_back(b.name + ": fw_type " + std::to_string(b.type) + " is not a " + (ta ? "TA" : "PSP") +
                                 " firmware type Linux knows; the component is not loaded");
        }
        p.hex("fw_version", b.fw_version);
        if (!ta && b.type == static_cast<uint32_t>(PspFwType::toc)) {
            PspSignedBinary toc = parse_psp_signed_binary(file, b.bytes);
            p.text("cookie", "$PS1");
            p.num("body_bytes", toc.body.size());
            p.num("signature_bytes", toc.signature.size());
        }
    }
    return d;
}

Description describe_psp_toc_file(const ByteReader& file) {
    UcodeHeader h = parse_ucode_header(file);
    expect_header_version(file, h, 1, {0, 1, 2, 3}, "psp_firmware_header");
    PspSignedBinary toc = parse_psp_signed_binary(file, h.ucode);
    Description d;
    common(d, h, "amdgpu PSP TOC (psp_firmware_header)");
    add(d, "TOC header", toc.header);
    add(d, "TOC body", toc.body);
    add(d, "TOC signature", toc.signature);
    return d;
}

Description describe_smc(const ByteReader& file) {
    SmcFirmware fw = parse_smc(file);
    Description d;
    common(d, fw.header, "amdgpu smc_firmware_header");
    d.hex("ucode_start_addr", fw.ucode_start_addr).num("pptables", fw.pptables.size());
    add(d, "code", fw.code);
    for (const SmcPptable& p : fw.pptables) {
        Part& part = d.part("pptable " + std::to_string(p.id), p.bytes.offset, p.bytes.size());
        part.num("id", p.id);
    }
    return d;
}

Description describe_gfx(const ByteReader& file) {
    GfxFirmware fw = parse_gfx(file);
    Description d;
    common(d, fw.header, fw.rs64 ? "amdgpu gfx_firmware_header (RS64)" : "amdgpu gfx_firmware_header (F32)");
    d.num("ucode_feature_version", fw.ucode_feature_version);
    add(d, "instructions", fw.instructions);
    if (fw.jump_table) add(d, "jump_table", *fw.jump_table);
    if (fw.data) add(d, "data", *fw.data);
    if (fw.rs64) d.hex("ucode_start_addr", fw.ucode_start_addr);
    return d;
}

Description describe_rlc(const ByteReader& file) {
    RlcFirmware fw = parse_rlc(file);
    Description d;
    common(d, fw.header, "amdgpu rlc_firmware_header");
    d.num("ucode_feature_version", fw.ucode_feature_version);
    d.num("save_and_restore_offset", fw.save_and_restore_offset);
    d.num("clear_state_descriptor_offset", fw.clear_state_descriptor_offset);
    d.num("avail_scratch_ram_locations", fw.avail_scratch_ram_locations);
    d.num("reg_restore_list_size", fw.reg_restore_list_size);
    d.num("reg_list_format_start", fw.reg_list_format_start);
    d.num("reg_list_format_separate_start", fw.reg_list_format_separate_start);
    d.num("starting_offsets_start", fw.starting_offsets_start);
    d.num("reg_list_format_direct_reg_list_length", fw.reg_list_format_direct_reg_list_length);
    for (const RlcRegion& r : fw.regions) {
        Part& p = d.part(r.name, r.bytes.offset, r.bytes.size());
        if (r.version != 0 || r.feature_version != 0) {
            p.hex("version", r.version);
            p.num("feature_version", r.feature_version);
        }
    }
    return d;
}

Description describe_rlc_toc(const ByteReader& file) {
    RlcToc toc = parse_rlc_toc(file);
    Description d;
    common(d, toc.header, "amdgpu RLC autoload TOC (psp_firmware_header)");
    d.num("toc_version", toc.toc_version).num("entries", toc.entries.size());
    for (const RlcTocEntry& e : toc.entries) {
        // Parts describe the autoload buffer, not the file: offsets are into that buffer.
        Part& p = d.part(soc24_firmware_name(e.id), e.offset, e.size);
        p.num("id", e.id);
        p.num("memory_destination", e.memory_destination);
        p.num("vfflr_image_code", e.vfflr_image_code);
    }
    return d;
}

Description describe_mes(const ByteReader& file) {
    MesFirmware fw = parse_mes(file);
    Description d;
    common(d, fw.header, "amdgpu mes_firmware_header");
    d.hex("mes_ucode_version", fw.mes_ucode_version).hex("mes_ucode_data_version", fw.mes_ucode_data_version);
    d.hex("uc_start_addr", fw.uc_start_addr).hex("data_start_addr", fw.data_start_addr);
    add(d, "instructions", fw.instructions);
    add(d, "data", fw.data);
    return d;
}

Description describe_imu(const ByteReader& file) {
    ImuFirmware fw = parse_imu(file);
    Description d;
    common(d, fw.header, "amdgpu imu_firmware_header");
    add(d, "IRAM", fw.iram);
    add(d, "DRAM", fw.dram);
    return d;
}

Description describe_sdma(const ByteReader& file) {
    SdmaFirmware fw = parse_sdma(file);
    Description d;
    common(d, fw.header, "amdgpu sdma_firmware_header");
    d.num("ucode_feature_version", fw.ucode_feature_version);
    add(d, fw.ctl_ucode ? "TH0 (context)" : "ucode", fw.ucode);
    if (fw.ctl_ucode) add(d, "TH1 (control)", *fw.ctl_ucode);
    if (fw.jump_table) add(d, "jump_table", *fw.jump_table);
    if (fw.header.header_version_major == 1 && fw.header.header_version_minor == 1) d.num("digest_size", fw.digest_size);
    return d;
}

Description describe_discovery(const ByteReader& file) {
    Discovery disc = parse_discovery(file);
    Description d;
    d.format = "amdgpu IP discovery binary v" + std::to_string(disc.version_major) + "." +
               std::to_string(disc.version_minor) + ", IP table v" + std::to_string(disc.table_version);
    d.num("binary_size", disc.binary_size).num("table_version", disc.table_version).num("dies", disc.dies.size());
    d.text("checksums", "valid");
    for (const DiscoveryDie& die : disc.dies)
        for (const DiscoveredIp& ip : die.ips) {
            // Parts here are IP blocks: offset = first register base (dwords), size = instance.
            Part& p = d.part(hw_id_name(ip.hw_id), ip.base_addresses.empty() ? 0 : ip.base_addresses.front(), 0);
            p.num("die", die.die_id);
            p.num("hw_id", ip.hw_id);
            p.num("instance", ip.instance);
            p.text("version", ip.version());
            p.num("base_addresses", ip.base_addresses.size());
        }
    return d;
}

}  // namespace

const char* to_string(FileKind kind) {
    switch (kind) {
    case FileKind::psp_sos: return "psp-sos";
    case FileKind::psp_ta: return "psp-ta";
    case FileKind::psp_toc: return "psp-toc";
    case FileKind::smc: return "smc";
    case FileKind::gfx: return "gfx";
    case FileKind::rlc: return "rlc";
    case FileKind::rlc_toc: return "rlc-toc";
    case FileKind::mes: return "mes";
    case FileKind::imu: return "imu";
    case FileKind::sdma: return "sdma";
    case FileKind::discovery: return "discovery";
    }
    return "?";
}

std::optional<FileKind> kind_of(const ByteReader& file, std::string_view basename) {
    std::string_view s = stem(basename);
    if (ends_with(s, "_ip_discovery") || s == "ip_discovery") return FileKind::discovery;
    if (file.size() >= 4 && file.u32(0, "signature") == Discovery::kBinarySignature) return FileKind::discovery;
    if (starts_with(s, "psp_") || starts_with(s, "psp")) {
        if (ends_with(s, "_sos")) return FileKind::psp_sos;
        if (ends_with(s, "_ta")) return FileKind::psp_ta;
        if (ends_with(s, "_toc")) return FileKind::psp_toc;
    }
    if (starts_with(s, "smu_")) return FileKind::smc;
    if (starts_with(s, "sdma")) return FileKind::sdma;
    if (starts_with(s, "gc_")) {
        for (std::string_view t : {"_pfp", "_me", "_mec", "_mec2", "_ce"})
            if (ends_with(s, t)) return FileKind::gfx;
        if (ends_with(s, "_rlc") || ends_with(s, "_rlc_1")) return FileKind::rlc;
        if (ends_with(s, "_mes") || ends_with(s, "_mes1") || ends_with(s, "_mes_2") || ends_with(s, "_uni_mes"))
            return FileKind::mes;
        if (ends_with(s, "_imu")) return FileKind::imu;
        if (ends_with(s, "_toc")) return FileKind::rlc_toc;
    }
    return std::nullopt;
}

Description describe(const ByteReader& file, FileKind kind) {
    switch (kind) {
    case FileKind::psp_sos: return describe_psp(file, false);
    case FileKind::psp_ta: return describe_psp(file, true);
    case FileKind::psp_toc: return describe_psp_toc_file(file);
    case FileKind::smc: return describe_smc(file);
    case FileKind::gfx: return describe_gfx(file);
    case FileKind::rlc: return describe_rlc(file);
    case FileKind::rlc_toc: return describe_rlc_toc(file);
    case FileKind::mes: return describe_mes(file);
    case FileKind::imu: return describe_imu(file);
    case FileKind::sdma: return describe_sdma(file);
    case FileKind::discovery: return describe_discovery(file);
    }
    return {};
}

std::optional<Description> describe_file(const ByteReader& file, std::string_view basename) {
    auto kind = kind_of(file, basename);
    if (!kind) return std::nullopt;
    return describe(file, *kind);
}

}  // namespace baregpu::fw::amd
