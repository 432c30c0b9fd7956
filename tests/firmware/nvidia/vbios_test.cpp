// The VBIOS reader on synthetic ROMs built here from the public layouts:
//   PCI expansion ROM header (0x55AA, PCI Data Structure pointer at 0x18) and the PCI Data
//   Structure ("PCIR", vendor +4, device +6, length +0xa, image length in 512-byte blocks +0x10,
//   code type +0x14, last-image bit 7 of +0x15): PCI Firmware Specification 3.x.
//   NPDE (16-byte aligned after PCIR; subimage length +8, last image +0xa), BIT header
//   (0xB8FF "BIT\0", BcdVersion, HeaderSize, TokenSize, TokenEntries, Checksum), BIT tokens
//   {Id, DataVersion, DataSize, DataPtr}, falcon-data token 'p' v2 {FalconUcodeTablePtr}, the
//   falcon ucode table {Version, HeaderSize, EntrySize, EntryCount} + {AppID, TargetID, DescPtr},
//   FALCON_UCODE_DESC_V3 (44 bytes) + RSA-3K signatures + IMEM + DMEM: Linux nova-core
//   drivers/gpu/nova-core/vbios.rs and firmware.rs (torvalds/linux 0cc83fc23debf3e2df19c4510a77fe2d60ab2693).
#include "firmware-loader/nvidia/describe.hpp"
#include "firmware-loader/nvidia/vbios.hpp"
#include "tests/firmware/nvidia/nv_test_support.hpp"
#include "tests/firmware/nvidia/synthetic_vbios.hpp"

#include <catch2/catch.hpp>

#include <random>
#include <string>

namespace nv = baregpu::fw::nv;
using baregpu::test::nv::Bytes;
using baregpu::test::nv::reader_for;
using baregpu::test::nv::require_firmware_error;

namespace {

using baregpu::test::nv::build_rom;
using baregpu::test::nv::put_image;
using baregpu::test::nv::Rom;

nv::Vbios parse(const Bytes& b) { return nv::parse_vbios(reader_for(b.b, "vbios.rom")); }

}  // namespace

TEST_CASE("nvidia: VBIOS reader finds FWSEC in a synthetic PC-AT + EFI + FWSEC ROM", "[nvidia][vbios]") {
    const Rom r = build_rom();
    const nv::Vbios vb = parse(r.bytes);

    REQUIRE(vb.images.size() == 3);
    CHECK(vb.images[0].bytes.offset == Rom::kPcAt);
    CHECK(vb.images[0].bytes.size() == Rom::kPcAtSize);
    CHECK(vb.images[0].code_type == 0x00);
    CHECK(vb.images[0].vendor_id == 0x10de);
    CHECK(vb.images[1].bytes.offset == Rom::kEfi);
    CHECK(vb.images[1].bytes.size() == Rom::kEfiSize);
    CHECK(vb.images[1].code_type == 0x03);
    CHECK(vb.images[2].bytes.offset == Rom::kFwsec);
    CHECK(vb.images[2].code_type == 0xe0);
    CHECK(vb.images[2].pcir_image_length == 1);
    CHECK(vb.images[2].has_npde);
    CHECK(vb.images[2].bytes.size() == Rom::kFwsecSize);  // NPDE's length, not PCIR's
    CHECK(vb.images[2].last);                               // NPDE's flag; PCIR's bit is clear
    CHECK_FALSE(vb.images[0].last);

    CHECK(vb.bit_offset == Rom::kBit);
    CHECK(vb.bit_bcd_version == 0x0100);
    REQUIRE(vb.tokens.size() == 3);
    CHECK(vb.tokens[1].id == 'p');
    CHECK(vb.falcon_ucode_table_pointer == Rom::kPcAtSize + Rom::kTableRel);
    CHECK(vb.falcon_ucode_table_offset == Rom::kTable);
    CHECK(vb.table_entry_count == 3);

    const nv::Fwsec& f = vb.fwsec;
    CHECK(f.application_id == 0x85);  // PROD preferred over the DBG entry before it
    CHECK(f.descriptor.offset == Rom::kDesc);
    CHECK(f.descriptor.size() == 44);
    CHECK(f.desc.version() == 3);
    CHECK(f.desc.header_size() == Rom::kDescSize);
    CHECK(f.desc.signature_count == 2);
    CHECK(f.desc.engine_id_mask == 0x4);
    CHECK(f.desc.ucode_id == 9);
    CHECK(f.desc.interface_offset == 0x10);
    CHECK(f.desc.pkc_data_offset == 0x40);
    CHECK(f.signatures.offset == Rom::kDesc + 44);
    CHECK(f.signatures.size() == 2 * 384);
    CHECK(f.imem.offset == Rom::kDesc + Rom::kDescSize);
    CHECK(f.imem.size() == Rom::kImemSize);
    CHECK(f.imem.bytes[0] == std::byte{0xc0});
    CHECK(f.dmem.offset == Rom::kDesc + Rom::kDescSize + Rom::kImemSize);
    CHECK(f.dmem.size() == Rom::kDmemSize);
    CHECK(f.dmem.bytes.back() == std::byte{0xda});

    const auto d = nv::describe_file(reader_for(r.bytes.b, "vbios.rom"), "vbios.rom");
    REQUIRE(d.has_value());
    CHECK(d->format.starts_with("NVIDIA VBIOS"));
}

TEST_CASE("nvidia: VBIOS with two images, FWSEC inside the NVIDIA PC-AT image", "[nvidia][vbios]") {
    // Image 0: a foreign EFI image without BIT; image 1: NVIDIA's PC-AT image holding the BIT
    // table, the falcon ucode table and the descriptor, all addressed from its own start.
    Bytes b(0x200 + 0x1000);
    put_image(b, 0, 0x1c, 0x8086, 0x03, 1, false, 0, false);
    const uint64_t base = 0x200;
    put_image(b, base, 0x40, 0x10de, 0x00, 8, true, 0, false);
    const uint64_t bit = base + 0x80;
    b.u8(bit, 0xff).u8(bit + 1, 0xb8).str(bit + 2, "BIT").u8(bit + 5, 0);
    b.u16(bit + 6, 0x0100).u8(bit + 8, 12).u8(bit + 9, 6).u8(bit + 10, 1);
    b.u8(bit + 12, 'p').u8(bit + 13, 2).u16(bit + 14, 4).u16(bit + 16, 0xc0);
    b.u32(base + 0xc0, 0x100);  // table at image offset 0x100
    b.u8(base + 0x100, 1).u8(base + 0x101, 4).u8(base + 0x102, 6).u8(base + 0x103, 1);
    b.u8(base + 0x104, 0x45).u32(base + 0x106, 0x200);  // DBG only
    const uint64_t d = base + 0x200;
    b.u32(d, (44u << 16) | (3 << 8)).u32(d + 0x14, 0x100).u32(d + 0x20, 0x80).u32(d + 0xc, 0);
    const nv::Vbios vb = parse(b);
    REQUIRE(vb.images.size() == 2);
    CHECK(vb.images[0].vendor_id == 0x8086);
    CHECK(vb.images[1].bytes.offset == 0x200);
    CHECK(vb.images[1].last);
    CHECK(vb.bit_offset == bit);
    CHECK(vb.falcon_ucode_table_offset == base + 0x100);
    CHECK(vb.fwsec.application_id == 0x45);
    CHECK(vb.fwsec.descriptor.offset == d);
    CHECK(vb.fwsec.signatures.size() == 0);
    CHECK(vb.fwsec.imem.offset == d + 44);
    CHECK(vb.fwsec.imem.size() == 0x100);
    CHECK(vb.fwsec.dmem.offset == d + 44 + 0x100);
    CHECK(vb.fwsec.dmem.size() == 0x80);
}

TEST_CASE("nvidia: malformed VBIOS images give a FirmwareError naming the field", "[nvidia][vbios]") {
    const Rom good = build_rom();
    REQUIRE_NOTHROW(parse(good.bytes));
    Bytes b = good.bytes;

    SECTION("truncated inside the FWSEC image") {
        b.b.resize(Rom::kFwsec + 0x300);
        require_firmware_error([&] { parse(b); }, "ROM image 2 NPDE subimage length");
    }
    SECTION("bad ROM signature on the second image") {
        b.u16(Rom::kEfi, 0xab55);
        require_firmware_error([&] { parse(b); }, "ROM image 1 signature");
    }
    SECTION("PCIR pointer past the end of the file") {
        b.u16(Rom::kPcAt + 0x18, 0xfff0);
        require_firmware_error([&] { parse(b); }, "ROM image 0 PCI Data Structure");
    }
    SECTION("PCIR pointer outside its own image") {
        // Points at the EFI image's PCIR, which is valid on its own but not this image's.
        b.u16(Rom::kPcAt + 0x18, Rom::kEfi + 0x1c);
        b.u16(Rom::kEfi + 0x1c + 0x10, 1);
        require_firmware_error([&] { parse(b); }, "ROM image 0 PCI Data Structure pointer");
    }
    SECTION("NVIDIA's alternative signature is accepted on later images only") {
        b.u16(Rom::kEfi, 0x4e56);
        CHECK_NOTHROW(parse(b));
        b.u16(Rom::kPcAt, 0x4e56);
        require_firmware_error([&] { parse(b); }, "ROM image 0 signature");
    }
    SECTION("bad PCIR signature") {
        b.str(Rom::kEfi + 0x1c, "PCIX");
        require_firmware_error([&] { parse(b); }, "ROM image 1 PCIR signature");
    }
    SECTION("image length 0") {
        b.u16(Rom::kEfi + 0x1c + 0x10, 0);
        require_firmware_error([&] { parse(b); }, "ROM image 1 PCIR image length");
    }
    SECTION("no image carries the last-image flag") {
        b.u8(Rom::kFwsec + 0x40 + 0xa, 0);  // the FWSEC image's NPDE last-image byte
        require_firmware_error([&] { parse(b); }, "ROM image 2 last-image indicator");
    }
    SECTION("an endless chain of images") {
        Bytes chain;
        for (uint64_t i = 0; i < 40; ++i) put_image(chain, i * 512, 0x20, 0x10de, 0x03, 1, false, 0, false);
        require_firmware_error([&] { parse(chain); }, "ROM image 16");
    }
    SECTION("no BIT header") {
        b.u8(Rom::kBit + 2, 'X');
        require_firmware_error([&] { parse(b); }, "BIT header");
    }
    SECTION("BIT token table running past the PC-AT image") {
        b.u8(Rom::kBit + 10, 255);
        require_firmware_error([&] { parse(b); }, "BIT header TokenEntries");
    }
    SECTION("BIT TokenSize too small") {
        b.u8(Rom::kBit + 9, 4);
        require_firmware_error([&] { parse(b); }, "BIT header TokenSize");
    }
    SECTION("no falcon-data token") {
        b.u8(Rom::kTokens + 6, 'q');
        require_firmware_error([&] { parse(b); }, "BIT token 'p'");
    }
    SECTION("falcon-data token of another version") {
        b.u8(Rom::kTokens + 7, 1);
        require_firmware_error([&] { parse(b); }, "BIT token 'p' (falcon data) DataVersion");
    }
    SECTION("falcon-data pointer outside the PC-AT image") {
        b.u16(Rom::kTokens + 10, 0x3fe);
        require_firmware_error([&] { parse(b); }, "BIT token 'p' (falcon data) DataPtr");
    }
    SECTION("falcon ucode table pointer past every image") {
        b.u32(Rom::kFalconData, 0x00ffffff);
        require_firmware_error([&] { parse(b); }, "FalconUcodeTablePtr");
    }
    SECTION("falcon ucode table longer than its image") {
        b.u8(Rom::kTable + 2, 255).u8(Rom::kTable + 3, 255);
        require_firmware_error([&] { parse(b); }, "falcon ucode table EntryCount");
    }
    SECTION("falcon ucode table EntrySize too small") {
        b.u8(Rom::kTable + 2, 5);
        require_firmware_error([&] { parse(b); }, "falcon ucode table EntrySize");
    }
    SECTION("FWSEC application missing") {
        b.u8(Rom::kEntries + 6, 0x46).u8(Rom::kEntries + 12, 0x86);
        require_firmware_error([&] { parse(b); }, "falcon ucode table ApplicationID");
    }
    SECTION("descriptor pointer that loops back to the table") {
        b.u32(Rom::kEntries + 14, static_cast<uint32_t>(Rom::kPcAtSize + Rom::kTableRel));
        require_firmware_error([&] { parse(b); }, "FALCON_UCODE_DESC_V3.hdr version");
    }
    SECTION("descriptor pointer past every image") {
        b.u32(Rom::kEntries + 14, 0xfffffff0);
        require_firmware_error([&] { parse(b); }, "DescPtr");
    }
    SECTION("descriptor too small for its signatures") {
        b.u8(Rom::kDesc + 0x27, 3);
        require_firmware_error([&] { parse(b); }, "FALCON_UCODE_DESC_V3.hdr size");
    }
    SECTION("IMEM past the end of the FWSEC image") {
        b.u32(Rom::kDesc + 0x14, 0x10000);
        require_firmware_error([&] { parse(b); }, "FALCON_UCODE_DESC_V3.IMEMLoadSize");
    }
    SECTION("DMEM past the end of the FWSEC image") {
        b.u32(Rom::kDesc + 0x20, 0xffffffff);
        require_firmware_error([&] { parse(b); }, "FALCON_UCODE_DESC_V3.DMEMLoadSize");
    }
    SECTION("interface table outside DMEM") {
        b.u32(Rom::kDesc + 0xc, Rom::kDmemSize);
        require_firmware_error([&] { parse(b); }, "FALCON_UCODE_DESC_V3.InterfaceOffset");
    }
    SECTION("signature patch slot outside DMEM") {
        b.u32(Rom::kDesc + 0x8, Rom::kDmemSize - 0x10);
        require_firmware_error([&] { parse(b); }, "FALCON_UCODE_DESC_V3.PKCDataOffset");
    }
}

TEST_CASE("nvidia: every truncation and seeded mutations of the synthetic ROM", "[nvidia][vbios]") {
    const Rom r = build_rom();
    for (size_t len = 0; len < r.bytes.b.size(); ++len) {
        const std::vector<std::byte> cut(r.bytes.b.begin(), r.bytes.b.begin() + static_cast<std::ptrdiff_t>(len));
        INFO("length " << len);
        CHECK_THROWS_AS(nv::parse_vbios(reader_for(cut, "vbios-cut.rom")), baregpu::FirmwareError);
    }
    // Mutations of the header bytes (not the payload fill) either parse or fail cleanly.
    std::mt19937_64 rng(0x5eed);
    const uint64_t header_end = Rom::kDesc + 44;
    for (int i = 0; i < 5000; ++i) {
        std::vector<std::byte> m = r.bytes.b;
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < flips; ++k) m[rng() % header_end] = static_cast<std::byte>(rng());
        try {
            (void)nv::parse_vbios(reader_for(m, "vbios-mut.rom"));
        } catch (const baregpu::FirmwareError&) {
        }
    }
}
