// A synthetic VBIOS built from the public layouts, for the VBIOS tests and as a fuzzing seed:
//   PCI expansion ROM header (0x55AA, PCI Data Structure pointer at 0x18) and the PCI Data
//   Structure ("PCIR", vendor +4, device +6, length +0xa, image length in 512-byte blocks +0x10,
//   code type +0x14, last-image bit 7 of +0x15): PCI Firmware Specification 3.x.
//   NPDE (16-byte aligned after PCIR; subimage length +8, last image +0xa), BIT header
//   (0xB8FF "BIT\0", BcdVersion, HeaderSize, TokenSize, TokenEntries, Checksum), BIT tokens
//   {Id, DataVersion, DataSize, DataPtr}, falcon-data token 'p' v2 {FalconUcodeTablePtr}, the
//   falcon ucode table {Version, HeaderSize, EntrySize, EntryCount} + {AppID, TargetID, DescPtr},
//   FALCON_UCODE_DESC_V3 (44 bytes) + RSA-3K signatures + IMEM + DMEM: Linux nova-core
//   drivers/gpu/nova-core/vbios.rs and firmware.rs (torvalds/linux 0cc83fc23debf3e2df19c4510a77fe2d60ab2693).
#pragma once

#include "tests/firmware/nvidia/nv_test_support.hpp"

#include <cstdint>

namespace baregpu::test::nv {

// One image: ROM header + PCIR at pcir, NPDE after it when npde_blocks != 0.
inline void put_image(Bytes& b, uint64_t base, uint64_t pcir, uint16_t vendor, uint8_t code_type, uint16_t pcir_blocks,
               bool pcir_last, uint16_t npde_blocks, bool npde_last) {
    b.u8(base, 0x55).u8(base + 1, 0xaa).u16(base + 0x18, pcir);
    const uint64_t p = base + pcir;
    b.str(p, "PCIR").u16(p + 4, vendor).u16(p + 6, 0x2684).u16(p + 0xa, 0x18).u8(p + 0xc, 0);
    b.u8(p + 0xd, 0).u8(p + 0xe, 0).u8(p + 0xf, 3);  // class code: display controller
    b.u16(p + 0x10, pcir_blocks).u16(p + 0x12, 1).u8(p + 0x14, code_type).u8(p + 0x15, pcir_last ? 0x80 : 0);
    if (npde_blocks != 0) {
        const uint64_t n = base + ((pcir + 0x18 + 0xf) & ~uint64_t{0xf});
        b.str(n, "NPDE").u16(n + 4, 0x101).u16(n + 6, 0x10).u16(n + 8, npde_blocks).u8(n + 0xa, npde_last ? 0x80 : 0);
    }
}

// A ROM shaped like a real board's: PC-AT (BIT table), EFI, FWSEC. The BIT pointers count as
// if the FWSEC image followed the PC-AT image directly (nova-core setup_falcon_data).
struct Rom {
    Bytes bytes;
    static constexpr uint64_t kPcAt = 0x0, kPcAtSize = 0x400;
    static constexpr uint64_t kEfi = 0x400, kEfiSize = 0x200;
    static constexpr uint64_t kFwsec = 0x600, kFwsecSize = 0xa00;  // NPDE says 5 blocks, PCIR says 1
    static constexpr uint64_t kBit = 0x100;
    static constexpr uint64_t kTokens = kBit + 12;
    static constexpr uint64_t kFalconData = 0x1a0;
    static constexpr uint64_t kTableRel = 0x80;  // in the FWSEC image
    static constexpr uint64_t kTable = kFwsec + kTableRel;
    static constexpr uint64_t kEntries = kTable + 6;  // HeaderSize 6
    static constexpr uint64_t kDescRel = 0x100;
    static constexpr uint64_t kDesc = kFwsec + kDescRel;
    static constexpr uint64_t kDescSize = 44 + 2 * 384;  // descriptor + two signatures
    static constexpr uint64_t kImemSize = 0x200, kDmemSize = 0x200;
};

inline Rom build_rom() {
    Rom r;
    Bytes& b = r.bytes;
    b.fit(Rom::kFwsec + Rom::kFwsecSize);
    put_image(b, Rom::kPcAt, 0x40, 0x10de, 0x00, 2, false, 2, false);
    put_image(b, Rom::kEfi, 0x1c, 0x10de, 0x03, 1, false, 1, false);
    put_image(b, Rom::kFwsec, 0x20, 0x10de, 0xe0, 1, false, 5, true);

    // BIT header and three tokens; 'p' is the second.
    b.u8(Rom::kBit, 0xff).u8(Rom::kBit + 1, 0xb8).str(Rom::kBit + 2, "BIT").u8(Rom::kBit + 5, 0);
    b.u16(Rom::kBit + 6, 0x0100).u8(Rom::kBit + 8, 12).u8(Rom::kBit + 9, 6).u8(Rom::kBit + 10, 3).u8(Rom::kBit + 11, 0);
    const uint64_t t = Rom::kTokens;
    b.u8(t, 'I').u8(t + 1, 1).u16(t + 2, 4).u16(t + 4, 0x190);
    b.u8(t + 6, 'p').u8(t + 7, 2).u16(t + 8, 4).u16(t + 10, Rom::kFalconData);
    b.u8(t + 12, 'B').u8(t + 13, 1).u16(t + 14, 4).u16(t + 16, 0x198);
    b.u32(Rom::kFalconData, Rom::kPcAtSize + Rom::kTableRel);

    // Falcon ucode table: version 1, HeaderSize 6 (two bytes past the four we know, to check
    // that HeaderSize is honoured), EntrySize 6, three entries.
    b.u8(Rom::kTable, 1).u8(Rom::kTable + 1, 6).u8(Rom::kTable + 2, 6).u8(Rom::kTable + 3, 3);
    const uint32_t desc_ptr = static_cast<uint32_t>(Rom::kPcAtSize + Rom::kDescRel);
    b.u8(Rom::kEntries, 0x05).u8(Rom::kEntries + 1, 0).u32(Rom::kEntries + 2, 0x12345);  // FIRMWARE_SEC_LIC
    b.u8(Rom::kEntries + 6, 0x45).u8(Rom::kEntries + 7, 0).u32(Rom::kEntries + 8, desc_ptr);    // FWSEC_DBG
    b.u8(Rom::kEntries + 12, 0x85).u8(Rom::kEntries + 13, 0).u32(Rom::kEntries + 14, desc_ptr);  // FWSEC_PROD

    // FALCON_UCODE_DESC_V3: hdr = size << 16 | version 3 << 8 | flags 1.
    const uint64_t d = Rom::kDesc;
    b.u32(d, (Rom::kDescSize << 16) | (3 << 8) | 1).u32(d + 4, Rom::kImemSize + Rom::kDmemSize);
    b.u32(d + 8, 0x40).u32(d + 0xc, 0x10).u32(d + 0x10, 0).u32(d + 0x14, Rom::kImemSize).u32(d + 0x18, 0);
    b.u32(d + 0x1c, 0).u32(d + 0x20, Rom::kDmemSize).u16(d + 0x24, 0x4).u8(d + 0x26, 9).u8(d + 0x27, 2);
    b.u16(d + 0x28, 0x3).u16(d + 0x2a, 0);
    b.fill(d + 44, 2 * 384, 0x5e);
    b.fill(d + Rom::kDescSize, Rom::kImemSize, 0xc0);
    b.fill(d + Rom::kDescSize + Rom::kImemSize, Rom::kDmemSize, 0xda);
    return r;
}

}  // namespace baregpu::test::nv
