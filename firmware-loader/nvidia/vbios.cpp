#include "firmware-loader/nvidia/vbios.hpp"

#include "base/checked.hpp"
#include "firmware-loader/nvidia/subregion.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <string>

namespace baregpu::fw::nv {

namespace {

// PCI Data Structure field offsets (PCI Firmware Specification, "PCI Data Structure Format").
constexpr uint64_t kPcirSize = 0x18;
constexpr uint64_t kPcirVendorId = 0x04;
constexpr uint64_t kPcirDeviceId = 0x06;
constexpr uint64_t kPcirLength = 0x0a;
constexpr uint64_t kPcirImageLength = 0x10;
constexpr uint64_t kPcirCodeType = 0x14;
constexpr uint64_t kPcirLastImage = 0x15;
// NPDE (nova-core NpdeStruct): 16-byte aligned right after the PCI Data Structure.
constexpr uint64_t kNpdeSize = 0x0b;
constexpr uint64_t kNpdeSubimageLength = 0x08;
constexpr uint64_t kNpdeLastImage = 0x0a;
// BIT_HEADER_V1_00 and BIT_TOKEN_V1_00.
constexpr uint64_t kBitHeaderSize = 12;
constexpr uint64_t kBitTokenSize = 6;
// BIT_DATA_FALCON_DATA_V2 {u32 FalconUcodeTablePtr}.
constexpr uint8_t kFalconDataVersion = 2;
// Falcon ucode table: header {version, header_size, entry_size, entry_count}, entries
// {u8 ApplicationID, u8 TargetID, u32 DescPtr}.
constexpr uint64_t kUcodeTableHeaderSize = 4;
constexpr uint64_t kUcodeTableEntrySize = 6;
// FALCON_APPLICATION_INTERFACE_HEADER_V1 {version, header_size, entry_size, entry_count}.
constexpr uint64_t kAppInterfaceHeaderSize = 4;

std::string image_name(size_t index) { return "ROM image " + std::to_string(index); }

RomImage read_image(const ByteReader& file, uint64_t off, size_t index) {
    const std::string name = image_name(index);
    RomImage img;
    // The first image must carry the PCI signature (it is how describe_file recognises a ROM).
    const uint16_t rom_sig = file.u16(off, name + " signature");
    file.expect(rom_sig == kRomSignature || (index != 0 && (rom_sig == kRomSignatureNv || rom_sig == kRomSignatureAlt)),
                name + " signature", off, index == 0 ? hex(kRomSignature) : "0xaa55, 0x4e56 or 0xbb77", hex(rom_sig));
    const uint16_t pcir_ptr = file.u16(off + kRomPcirPointer, name + " PCI Data Structure pointer");
    const uint64_t pcir = file.add(off, pcir_ptr, name + " PCI Data Structure pointer", off + kRomPcirPointer);
    file.region(pcir, kPcirSize, name + " PCI Data Structure");
    const uint32_t sig = file.u32(pcir, name + " PCIR signature");
    file.expect(sig == kPcirSignature || sig == kNpdsSignature, name + " PCIR signature", pcir,
                "\"PCIR\" (" + hex(kPcirSignature) + ") or \"NPDS\"", hex(sig));
    img.vendor_id = file.u16(pcir + kPcirVendorId, name + " PCIR vendor id");
    img.device_id = file.u16(pcir + kPcirDeviceId, name + " PCIR device id");
    const uint16_t pcir_len = file.u16(pcir + kPcirLength, name + " PCIR length");
    img.pcir_image_length = file.u16(pcir + kPcirImageLength, name + " PCIR image length");
    file.expect(img.pcir_image_length != 0, name + " PCIR image length", pcir + kPcirImageLength,
                "a non-zero count of 512-byte blocks", "0");
    img.code_type = file.u8(pcir + kPcirCodeType, name + " PCIR code type");
    const uint8_t pcir_last = file.u8(pcir + kPcirLastImage, name + " PCIR last-image indicator");

    // NVIDIA's extension overrides the length and the last-image flag when present (nova-core
    // BiosImage::image_size_bytes / is_last). Its absence is normal for non-NVIDIA images.
    const uint64_t npde_rel = (uint64_t{pcir_ptr} + pcir_len + 0xf) & ~uint64_t{0xf};
    const uint64_t npde = off + npde_rel;
    uint8_t last = pcir_last;
    if (npde <= file.size() && kNpdeSize <= file.size() - npde && file.u32(npde, name + " NPDE") == kNpdeSignature) {
        const uint16_t sub = file.u16(npde + kNpdeSubimageLength, name + " NPDE subimage length");
        if (sub != 0) {
            img.has_npde = true;
            img.npde_subimage_length = sub;
            last = file.u8(npde + kNpdeLastImage, name + " NPDE last-image indicator");
        }
    }
    const uint64_t blocks = img.has_npde ? img.npde_subimage_length : img.pcir_image_length;
    const uint64_t size = blocks * kRomBlock;
    file.expect(uint64_t{pcir_ptr} + kPcirSize <= size, name + " PCI Data Structure pointer", off + kRomPcirPointer,
                "a structure inside the " + hex(size) + "-byte image", hex(pcir_ptr));
    img.bytes = file.region(off, size, name + (img.has_npde ? " NPDE subimage length" : " PCIR image length"));
    img.last = (last & kLastImageBit) != 0 || img.code_type == kCodeTypeNbsi;  // nova-core: NBSI ends the chain
    return img;
}

std::vector<RomImage> walk_images(const ByteReader& file) {
    std::vector<RomImage> images;
    uint64_t off = 0;
    for (;;) {
        if (images.size() == kMaxRomImages)
            file.fail(image_name(images.size()), off,
                      "the last-image indicator within " + std::to_string(kMaxRomImages) + " images",
                      "another image");
        images.push_back(read_image(file, off, images.size()));
        const RomImage& img = images.back();
        if (img.last) return images;
        off = img.bytes.end();  // images are whole 512-byte blocks, so off stays aligned
        if (off == file.size())
            file.fail(image_name(images.size() - 1) + " last-image indicator", img.bytes.offset,
                      "bit 7 set on the final image", "clear, and the file ends after it");
    }
}

// Where a ROM address from the BIT table lands. The pointers count as if the FWSEC images
// followed the PC-AT image directly (the EFI image sits between them on real boards): nouveau
// nvbios_addr() and nova-core FwSecBiosBuilder::setup_falcon_data() both rebase them so.
struct Located {
    Region image;
    uint64_t offset;  // inside image
};

Located locate(const ByteReader& file, const std::vector<RomImage>& images, size_t pcat, uint32_t address,
               std::string_view field, uint64_t at) {
    const Region& base = images[pcat].bytes;
    if (address < base.size()) return {base, address};
    uint64_t rel = address - base.size();
    for (size_t i = pcat + 1; i < images.size(); ++i) {
        if (images[i].code_type != kCodeTypeFwsec) continue;
        if (rel < images[i].bytes.size()) return {images[i].bytes, rel};
        rel -= images[i].bytes.size();
    }
    file.fail(field, at, "an address inside the PC-AT image or the FWSEC images after it", hex(address));
}

std::optional<uint64_t> find_bit(const Region& image) {
    static constexpr std::array<std::byte, 6> kPattern{std::byte{0xff}, std::byte{0xb8}, std::byte{'B'},
                                                       std::byte{'I'},  std::byte{'T'},  std::byte{0}};
    const auto it = std::search(image.bytes.begin(), image.bytes.end(), kPattern.begin(), kPattern.end());
    if (it == image.bytes.end()) return std::nullopt;
    return static_cast<uint64_t>(it - image.bytes.begin());
}

FalconUcodeDescV3 read_desc_v3(const ByteReader& file, uint64_t at) {
    const std::string s = "FALCON_UCODE_DESC_V3.";
    FalconUcodeDescV3 d;
    d.hdr = file.u32(at + 0x00, s + "hdr");
    d.stored_size = file.u32(at + 0x04, s + "StoredSize");
    d.pkc_data_offset = file.u32(at + 0x08, s + "PKCDataOffset");
    d.interface_offset = file.u32(at + 0x0c, s + "InterfaceOffset");
    d.imem_phys_base = file.u32(at + 0x10, s + "IMEMPhysBase");
    d.imem_load_size = file.u32(at + 0x14, s + "IMEMLoadSize");
    d.imem_virt_base = file.u32(at + 0x18, s + "IMEMVirtBase");
    d.dmem_phys_base = file.u32(at + 0x1c, s + "DMEMPhysBase");
    d.dmem_load_size = file.u32(at + 0x20, s + "DMEMLoadSize");
    d.engine_id_mask = file.u16(at + 0x24, s + "EngineIdMask");
    d.ucode_id = file.u8(at + 0x26, s + "UcodeId");
    d.signature_count = file.u8(at + 0x27, s + "SignatureCount");
    d.signature_versions = file.u16(at + 0x28, s + "SignatureVersions");
    return d;
}

}  // namespace

Vbios parse_vbios(const ByteReader& file) {
    Vbios vb;
    vb.images = walk_images(file);

    // The BIT table lives in the PC-AT (legacy x86) image.
    const auto pcat_it = std::find_if(vb.images.begin(), vb.images.end(),
                                      [](const RomImage& i) { return i.code_type == kCodeTypePcAt; });
    if (pcat_it == vb.images.end())
        file.fail("PCIR code type", 0, "a PC-AT image (code type 0x00) holding the BIT table",
                  std::to_string(vb.images.size()) + " images, none of that type");
    const size_t pcat = static_cast<size_t>(pcat_it - vb.images.begin());
    const Region& pc = vb.images[pcat].bytes;

    const auto bit_rel = find_bit(pc);
    if (!bit_rel)
        file.fail("BIT header", pc.offset, "the BIT header (0xB8FF \"BIT\\0\") in the PC-AT image", "no such bytes");
    const Region bit = subregion(file, pc, *bit_rel, kBitHeaderSize, "BIT header", pc.offset + *bit_rel);
    vb.bit_offset = bit.offset;
    file.expect_eq(file.u32(bit.offset + 2, "BIT header signature"), kBitSignature, "BIT header signature",
                   bit.offset + 2);
    vb.bit_bcd_version = file.u16(bit.offset + 6, "BIT header BcdVersion");
    vb.bit_header_size = file.u8(bit.offset + 8, "BIT header HeaderSize");
    vb.bit_token_size = file.u8(bit.offset + 9, "BIT header TokenSize");
    const uint8_t token_entries = file.u8(bit.offset + 10, "BIT header TokenEntries");
    file.expect(vb.bit_header_size >= kBitHeaderSize, "BIT header HeaderSize", bit.offset + 8,
                "at least " + std::to_string(kBitHeaderSize), std::to_string(vb.bit_header_size));
    file.expect(vb.bit_token_size >= kBitTokenSize, "BIT header TokenSize", bit.offset + 9,
                "at least " + std::to_string(kBitTokenSize), std::to_string(vb.bit_token_size));
    const Region tokens = subregion(file, pc, *bit_rel + vb.bit_header_size, uint64_t{vb.bit_token_size} * token_entries,
                                    "BIT header TokenEntries", bit.offset + 10);

    const BitToken* falcon = nullptr;
    vb.tokens.reserve(token_entries);
    for (uint64_t i = 0; i < token_entries; ++i) {
        const uint64_t at = tokens.offset + i * vb.bit_token_size;
        const std::string s = "BIT token " + std::to_string(i);
        vb.tokens.push_back(BitToken{file.u8(at, s + " Id"), file.u8(at + 1, s + " DataVersion"),
                                     file.u16(at + 2, s + " DataSize"), file.u16(at + 4, s + " DataPtr")});
    }
    for (const auto& t : vb.tokens)
        if (t.id == kBitTokenFalconData) {
            falcon = &t;
            break;
        }
    if (falcon == nullptr)
        file.fail("BIT token 'p' (falcon data)", tokens.offset, "a token with id 0x70",
                  std::to_string(token_entries) + " tokens, none with that id");
    const uint64_t falcon_at = tokens.offset + static_cast<uint64_t>(falcon - vb.tokens.data()) * vb.bit_token_size;
    file.expect(falcon->data_version == kFalconDataVersion && falcon->data_size >= 4,
                "BIT token 'p' (falcon data) DataVersion/DataSize", falcon_at + 1,
                "version 2 (BIT_DATA_FALCON_DATA_V2) with at least 4 bytes",
                "version " + std::to_string(falcon->data_version) + ", " + std::to_string(falcon->data_size) + " bytes");
    const Region falcon_data =
        subregion(file, pc, falcon->data_offset, 4, "BIT token 'p' (falcon data) DataPtr", falcon_at + 4);
    vb.falcon_ucode_table_pointer = file.u32(falcon_data.offset, "BIT_DATA_FALCON_DATA_V2.FalconUcodeTablePtr");

    // The falcon ucode table.
    const Located table = locate(file, vb.images, pcat, vb.falcon_ucode_table_pointer,
                                 "BIT_DATA_FALCON_DATA_V2.FalconUcodeTablePtr", falcon_data.offset);
    const Region th = subregion(file, table.image, table.offset, kUcodeTableHeaderSize, "falcon ucode table header",
                                falcon_data.offset);
    vb.falcon_ucode_table_offset = th.offset;
    vb.table_version = file.u8(th.offset, "falcon ucode table Version");
    const uint8_t header_size = file.u8(th.offset + 1, "falcon ucode table HeaderSize");
    const uint8_t entry_size = file.u8(th.offset + 2, "falcon ucode table EntrySize");
    vb.table_entry_count = file.u8(th.offset + 3, "falcon ucode table EntryCount");
    file.expect(header_size >= kUcodeTableHeaderSize, "falcon ucode table HeaderSize", th.offset + 1,
                "at least " + std::to_string(kUcodeTableHeaderSize), std::to_string(header_size));
    file.expect(entry_size >= kUcodeTableEntrySize, "falcon ucode table EntrySize", th.offset + 2,
                "at least " + std::to_string(kUcodeTableEntrySize), std::to_string(entry_size));
    const Region entries = subregion(file, table.image, table.offset + header_size,
                                     uint64_t{entry_size} * vb.table_entry_count, "falcon ucode table EntryCount",
                                     th.offset + 3);

    // PROD is what a production board runs; DBG only where there is no PROD entry.
    std::optional<uint64_t> chosen;
    for (uint64_t i = 0; i < vb.table_entry_count; ++i) {
        const uint64_t at = entries.offset + i * entry_size;
        const uint8_t app = file.u8(at, "falcon ucode table entry " + std::to_string(i) + " ApplicationID");
        if (app == kAppIdFwsecProd) {
            chosen = at;
            break;
        }
        if (app == kAppIdFwsecDbg && !chosen) chosen = at;
    }
    if (!chosen)
        file.fail("falcon ucode table ApplicationID", entries.offset,
                  "an entry for FWSEC (0x85 FWSEC_PROD or 0x45 FWSEC_DBG)",
                  std::to_string(vb.table_entry_count) + " entries, none for FWSEC");
    Fwsec& fw = vb.fwsec;
    fw.application_id = file.u8(*chosen, "falcon ucode table ApplicationID");
    fw.rom_address = file.u32(*chosen + 2, "falcon ucode table DescPtr");

    // FALCON_UCODE_DESC_V3, then its signatures, then IMEM and DMEM.
    const Located desc = locate(file, vb.images, pcat, fw.rom_address, "falcon ucode table DescPtr", *chosen + 2);
    fw.descriptor = subregion(file, desc.image, desc.offset, kFalconUcodeDescV3Size, "FALCON_UCODE_DESC_V3", *chosen + 2);
    const uint64_t d = fw.descriptor.offset;
    fw.desc = read_desc_v3(file, d);
    file.expect(fw.desc.version() == 3, "FALCON_UCODE_DESC_V3.hdr version (bits 15:8)", d, "3",
                std::to_string(fw.desc.version()));
    const uint64_t sig_bytes = uint64_t{fw.desc.signature_count} * kRsa3kSignatureSize;
    file.expect(fw.desc.header_size() >= kFalconUcodeDescV3Size + sig_bytes, "FALCON_UCODE_DESC_V3.hdr size (bits 31:16)",
                d, "at least " + hex(kFalconUcodeDescV3Size + sig_bytes) + " (descriptor and " +
                       std::to_string(fw.desc.signature_count) + " signatures)",
                hex(fw.desc.header_size()));
    fw.signatures = subregion(file, desc.image, desc.offset + kFalconUcodeDescV3Size, sig_bytes,
                              "FALCON_UCODE_DESC_V3.SignatureCount", d + 0x27);
    const uint64_t ucode = desc.offset + fw.desc.header_size();
    fw.imem = subregion(file, desc.image, ucode, fw.desc.imem_load_size, "FALCON_UCODE_DESC_V3.IMEMLoadSize", d + 0x14);
    fw.dmem = subregion(file, desc.image, ucode + fw.desc.imem_load_size, fw.desc.dmem_load_size,
                        "FALCON_UCODE_DESC_V3.DMEMLoadSize", d + 0x20);
    // Both DMEM offsets are used to patch DMEM before FWSEC runs (nova-core fwsec.rs).
    file.expect(range_within(fw.desc.interface_offset, kAppInterfaceHeaderSize, fw.desc.dmem_load_size),
                "FALCON_UCODE_DESC_V3.InterfaceOffset", d + 0x0c,
                "an application interface header inside DMEM (" + hex(fw.desc.dmem_load_size) + " bytes)",
                hex(fw.desc.interface_offset));
    if (fw.desc.signature_count != 0)
        file.expect(range_within(fw.desc.pkc_data_offset, kRsa3kSignatureSize, fw.desc.dmem_load_size),
                    "FALCON_UCODE_DESC_V3.PKCDataOffset", d + 0x08,
                    "a signature slot inside DMEM (" + hex(fw.desc.dmem_load_size) + " bytes)",
                    hex(fw.desc.pkc_data_offset));
    return vb;
}

}  // namespace baregpu::fw::nv
