#include "firmware-loader/nvidia/describe.hpp"

#include "firmware-loader/nvidia/bin_header.hpp"
#include "firmware-loader/nvidia/elf_image.hpp"
#include "firmware-loader/nvidia/hs_header.hpp"
#include "firmware-loader/nvidia/riscv_ucode_desc.hpp"
#include "firmware-loader/nvidia/vbios.hpp"

#include <string>

namespace baregpu::fw::nv {

namespace {

void add_bin_header(Description& d, const BinHeader& b) {
    d.hex("bin_magic", b.bin_magic)
        .num("bin_ver", b.bin_ver)
        .hex("bin_size", b.bin_size)
        .hex("header_offset", b.header_offset)
        .hex("data_offset", b.data_offset)
        .hex("data_size", b.data_size);
    d.part("data", b.data.offset, b.data.size());
}

void add_region(Description& d, std::string name, const Region& r) {
    if (r.size() != 0) d.part(std::move(name), r.offset, r.size());
}

Description describe_hs(const ByteReader& file) {
    const HsHeaderV2 h = parse_hs_header_v2(file);
    Description d;
    d.format = "nvfw_bin_hdr + nvfw_hs_header_v2";
    add_bin_header(d, h.bin);
    d.hex("sig_prod_offset", h.sig_prod_offset)
        .hex("sig_prod_size", h.sig_prod_size)
        .hex("patch_loc", h.patch_loc)
        .hex("patch_sig", h.patch_sig)
        .num("num_sig", h.num_sig)
        .hex("signature_size", h.signature_size);
    if (h.meta) d.num("fuse_ver", h.meta->fuse_ver).num("engine_id", h.meta->engine_id).num("ucode_id", h.meta->ucode_id);
    d.hex("os_code_offset", h.os_code_offset)
        .hex("os_code_size", h.os_code_size)
        .hex("os_data_offset", h.os_data_offset)
        .hex("os_data_size", h.os_data_size)
        .num("num_apps", h.num_apps);
    d.part("signatures", h.signatures.offset, h.signatures.size());
    add_region(d, "os_code", h.os_code);
    add_region(d, "os_data", h.os_data);
    for (size_t i = 0; i < h.apps.size(); ++i) add_region(d, "app[" + std::to_string(i) + "]", h.apps[i].code);
    return d;
}

Description describe_riscv(const ByteReader& file) {
    const RiscvUcodeDesc r = parse_riscv_ucode_desc(file);
    Description d;
    d.format = "nvfw_bin_hdr + RM_RISCV_UCODE_DESC";
    add_bin_header(d, r.bin);
    d.num("version", r.version)
        .hex("bootloaderOffset", r.bootloaderOffset)
        .hex("bootloaderSize", r.bootloaderSize)
        .hex("bootloaderParamOffset", r.bootloaderParamOffset)
        .hex("bootloaderParamSize", r.bootloaderParamSize)
        .hex("riscvElfOffset", r.riscvElfOffset)
        .hex("riscvElfSize", r.riscvElfSize)
        .num("appVersion", r.appVersion)
        .hex("manifestOffset", r.manifestOffset)
        .hex("manifestSize", r.manifestSize)
        .hex("monitorDataOffset", r.monitorDataOffset)
        .hex("monitorDataSize", r.monitorDataSize)
        .hex("monitorCodeOffset", r.monitorCodeOffset)
        .hex("monitorCodeSize", r.monitorCodeSize)
        .flag("bIsMonitorEnabled", r.bIsMonitorEnabled != 0)
        .hex("swbromCodeOffset", r.swbromCodeOffset)
        .hex("swbromCodeSize", r.swbromCodeSize)
        .hex("swbromDataOffset", r.swbromDataOffset)
        .hex("swbromDataSize", r.swbromDataSize);
    if (r.fbReservedSize) d.hex("fbReservedSize", *r.fbReservedSize);
    if (r.bSignedAsCode) d.flag("bSignedAsCode", *r.bSignedAsCode != 0);
    add_region(d, "bootloader", r.bootloader);
    add_region(d, "bootloader_param", r.bootloader_param);
    add_region(d, "riscv_elf", r.riscv_elf);
    add_region(d, "manifest", r.manifest);
    add_region(d, "monitor_data", r.monitor_data);
    add_region(d, "monitor_code", r.monitor_code);
    add_region(d, "swbrom_code", r.swbrom_code);
    add_region(d, "swbrom_data", r.swbrom_data);
    return d;
}

// nvfw_bin_hdr names no sub-header type. RM_RISCV_UCODE_DESC fills the whole gap up to the
// data image (84 or 76 bytes); an HS header leaves its signatures and load header there.
bool carries_riscv_desc(const ByteReader& file, std::string_view basename) {
    const uint32_t header_offset = file.u32(0x0c, "nvfw_bin_hdr.header_offset");
    const uint32_t data_offset = file.u32(0x10, "nvfw_bin_hdr.data_offset");
    if (data_offset > header_offset) {
        const uint64_t gap = data_offset - header_offset;
        if (gap == kRiscvUcodeDescSize || gap == kRiscvUcodeDescShortSize) return true;
        if (gap >= kHsHeaderV2Size) return false;
    }
    return basename.starts_with("bootloader");
}

Description describe_elf(const ByteReader& file) {
    const ElfImage elf = ElfImage::parse(file);
    Description d;
    if (elf.find(".fwimage") != nullptr) {
        const GspImage g = parse_gsp_image(file);
        d.format = std::string("GSP-RM ELF") + (g.elf.is_64bit() ? "64" : "32") + " image";
        d.num("sections", g.elf.sections().size()).num("signature_sections", g.signatures.size());
        d.part(".fwimage", g.fwimage.offset, g.fwimage.size());
        for (const auto& s : g.signatures) d.part(s.name, s.region.offset, s.region.size());
        return d;
    }
    if (elf.find("image") != nullptr) {
        const FmcImage f = parse_fmc_image(file);
        d.format = std::string("FMC ELF") + (f.elf.is_64bit() ? "64" : "32") + " image";
        d.num("sections", f.elf.sections().size());
        d.part("hash", f.hash.offset, f.hash.size());
        d.part("signature", f.signature.offset, f.signature.size());
        d.part("publickey", f.publickey.offset, f.publickey.size());
        d.part("image", f.image.offset, f.image.size());
        return d;
    }
    file.fail("ELF sections", elf.e_shoff(), "a GSP-RM image (.fwimage) or an FMC (hash, signature, publickey, image)",
              std::to_string(elf.sections().size()) + " sections, neither set");
}

Description describe_vbios(const ByteReader& file) {
    const Vbios vb = parse_vbios(file);
    Description d;
    d.format = "NVIDIA VBIOS (PCI expansion ROM, BIT, FALCON_UCODE_DESC_V3)";
    d.num("images", vb.images.size())
        .hex("bit_offset", vb.bit_offset)
        .hex("bit_version", vb.bit_bcd_version)
        .num("bit_tokens", vb.tokens.size())
        .hex("falcon_ucode_table", vb.falcon_ucode_table_pointer)
        .num("falcon_ucode_table_entries", vb.table_entry_count)
        .text("fwsec", vb.fwsec.application_id == kAppIdFwsecProd ? "FWSEC_PROD" : "FWSEC_DBG")
        .hex("fwsec_desc", vb.fwsec.rom_address)
        .hex("StoredSize", vb.fwsec.desc.stored_size)
        .hex("IMEMLoadSize", vb.fwsec.desc.imem_load_size)
        .hex("DMEMLoadSize", vb.fwsec.desc.dmem_load_size)
        .num("SignatureCount", vb.fwsec.desc.signature_count)
        .hex("EngineIdMask", vb.fwsec.desc.engine_id_mask)
        .num("UcodeId", vb.fwsec.desc.ucode_id);
    for (size_t i = 0; i < vb.images.size(); ++i) {
        const RomImage& img = vb.images[i];
        Part& p = d.part("image " + std::to_string(i), img.bytes.offset, img.bytes.size());
        p.fields.push_back({"vendor_id", uint64_t{img.vendor_id}, Field::Style::hex});
        p.fields.push_back({"device_id", uint64_t{img.device_id}, Field::Style::hex});
        p.fields.push_back({"code_type", uint64_t{img.code_type}, Field::Style::hex});
        p.fields.push_back({"last", img.last, Field::Style::decimal});
    }
    d.part("FWSEC descriptor", vb.fwsec.descriptor.offset, vb.fwsec.descriptor.size());
    add_region(d, "FWSEC signatures", vb.fwsec.signatures);
    add_region(d, "FWSEC IMEM", vb.fwsec.imem);
    add_region(d, "FWSEC DMEM", vb.fwsec.dmem);
    return d;
}

}  // namespace

std::optional<Description> describe_file(const ByteReader& file, std::string_view basename) {
    if (has_elf_magic(file)) return describe_elf(file);
    if (file.size() >= 4 && file.u32(0, "magic") == kBinHdrMagic)
        return carries_riscv_desc(file, basename) ? describe_riscv(file) : describe_hs(file);
    if (file.size() >= 2 && file.u16(0, "magic") == kRomSignature) return describe_vbios(file);
    return std::nullopt;
}

}  // namespace baregpu::fw::nv
