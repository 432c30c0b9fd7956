// The NVIDIA VBIOS as read from the ROM (BAR0 + 0x300000): a chain of PCI expansion-ROM images
// (PC-AT, EFI, FWSEC, ...). The PC-AT image holds the BIT table; its falcon-data token points
// at the falcon ucode table, whose FWSEC entry points at a FALCON_UCODE_DESC_V3 followed by
// the signatures and the IMEM/DMEM image that FWSEC-FRTS runs from (nova-core vbios.rs, below;
// tinygrad nv/ip.py NV_FLCN walks the same chain).
#pragma once

#include "firmware-loader/byte_reader.hpp"

#include <cstdint>
#include <vector>

namespace baregpu::fw::nv {

// PCI Firmware Specification 3.x, "PCI Expansion ROM" header and PCI Data Structure; NVIDIA's
// NPDE extension, BIT header/tokens and the falcon ucode table as Linux nova-core
// drivers/gpu/nova-core/vbios.rs documents them (torvalds/linux
// 0cc83fc23debf3e2df19c4510a77fe2d60ab2693) and nouveau nvkm/subdev/bios/bit.c.
inline constexpr uint16_t kRomSignature = 0xaa55;       // bytes 55 AA at image offset 0
// Signatures nova-core (PciRomHeader::new) also accepts on NVIDIA images after the first.
inline constexpr uint16_t kRomSignatureNv = 0x4e56;     // "VN"
inline constexpr uint16_t kRomSignatureAlt = 0xbb77;
inline constexpr uint64_t kRomPcirPointer = 0x18;       // u16: offset of the PCI Data Structure
inline constexpr uint32_t kPcirSignature = 0x52494350;  // "PCIR"
inline constexpr uint32_t kNpdsSignature = 0x5344504e;  // "NPDS": NVIDIA's variant, same layout
inline constexpr uint32_t kNpdeSignature = 0x4544504e;  // "NPDE"
inline constexpr uint64_t kRomBlock = 512;               // image lengths count 512-byte blocks
inline constexpr uint8_t kLastImageBit = 0x80;          // bit 7 of the last-image indicator

// PCIR code types (nova-core BiosImageType).
inline constexpr uint8_t kCodeTypePcAt = 0x00;
inline constexpr uint8_t kCodeTypeEfi = 0x03;
inline constexpr uint8_t kCodeTypeNbsi = 0x70;
inline constexpr uint8_t kCodeTypeFwsec = 0xe0;

inline constexpr uint16_t kBitHeaderId = 0xb8ff;       // BIT_HEADER_V1_00.Id
inline constexpr uint32_t kBitSignature = 0x00544942;  // "BIT\0"
inline constexpr uint8_t kBitTokenFalconData = 0x70;   // 'p': BIT_TOKEN_FALCON_DATA
inline constexpr uint8_t kAppIdFwsecDbg = 0x45;        // FALCON_UCODE_ENTRY_APPID_FWSEC_DBG
inline constexpr uint8_t kAppIdFwsecProd = 0x85;       // FALCON_UCODE_ENTRY_APPID_FWSEC_PROD
inline constexpr uint64_t kFalconUcodeDescV3Size = 44;  // sizeof(FALCON_UCODE_DESC_V3)
inline constexpr uint64_t kRsa3kSignatureSize = 384;    // BCRT30_RSA3K_SIG_SIZE
inline constexpr uint64_t kMaxRomImages = 16;           // real ROMs have 4 or 5; bounds the walk

struct RomImage {
    Region bytes;  // the whole image
    uint16_t vendor_id = 0;
    uint16_t device_id = 0;
    uint8_t code_type = 0;
    uint16_t pcir_image_length = 0;  // 512-byte blocks
    bool has_npde = false;
    uint16_t npde_subimage_length = 0;  // 512-byte blocks; the image length when present
    bool last = false;
};

struct BitToken {
    uint8_t id = 0;
    uint8_t data_version = 0;
    uint16_t data_size = 0;
    uint16_t data_offset = 0;  // from the start of the PC-AT image
};

// FALCON_UCODE_DESC_V3 (44 bytes).
struct FalconUcodeDescV3 {
    uint32_t hdr = 0;  // bits 15:8 version (3), bits 31:16 size of descriptor + signatures
    uint32_t stored_size = 0;
    uint32_t pkc_data_offset = 0;   // in DMEM: where the chosen signature is patched
    uint32_t interface_offset = 0;  // in DMEM: the application interface table
    uint32_t imem_phys_base = 0;
    uint32_t imem_load_size = 0;
    uint32_t imem_virt_base = 0;
    uint32_t dmem_phys_base = 0;
    uint32_t dmem_load_size = 0;
    uint16_t engine_id_mask = 0;
    uint8_t ucode_id = 0;
    uint8_t signature_count = 0;
    uint16_t signature_versions = 0;
    uint16_t header_size() const { return static_cast<uint16_t>(hdr >> 16); }
    uint8_t version() const { return static_cast<uint8_t>(hdr >> 8); }
};

struct Fwsec {
    uint8_t application_id = 0;  // kAppIdFwsecProd, or kAppIdFwsecDbg when there is no PROD entry
    uint32_t rom_address = 0;    // the table entry's pointer, in the ROM's address space
    FalconUcodeDescV3 desc;
    Region descriptor;  // the 44 bytes
    Region signatures;  // signature_count RSA-3K signatures
    Region imem;        // imem_load_size bytes right after the descriptor and signatures
    Region dmem;        // dmem_load_size bytes after IMEM
};

struct Vbios {
    std::vector<RomImage> images;
    uint64_t bit_offset = 0;  // file offset of the BIT header
    uint16_t bit_bcd_version = 0;
    uint8_t bit_header_size = 0;
    uint8_t bit_token_size = 0;
    std::vector<BitToken> tokens;
    uint32_t falcon_ucode_table_pointer = 0;  // ROM address from the falcon-data token
    uint64_t falcon_ucode_table_offset = 0;   // file offset it maps to
    uint8_t table_version = 0;
    uint8_t table_entry_count = 0;
    Fwsec fwsec;
};

// Walks the images, finds the BIT header in the PC-AT image and follows the chain to FWSEC.
// Every pointer is checked against the image it lands in; every loop is bounded by a count
// stored in the ROM (at most 255) or by kMaxRomImages.
Vbios parse_vbios(const ByteReader& file);

}  // namespace baregpu::fw::nv
