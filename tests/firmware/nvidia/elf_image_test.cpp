// GspImage / ElfImage on a synthetic ELF64 built here from the public layouts (Linux
// include/uapi/linux/elf.h: Elf64_Ehdr 64 bytes, Elf64_Shdr 64 bytes), since the real
// gsp-*.bin is not in firmware/, and on malformed variants of it.
#include "firmware-loader/nvidia/describe.hpp"
#include "firmware-loader/nvidia/elf_image.hpp"
#include "tests/firmware/nvidia/nv_test_support.hpp"
#include "tests/firmware/nvidia/synthetic_elf.hpp"

#include <catch2/catch.hpp>

#include <limits>
#include <string>
#include <vector>

namespace nv = baregpu::fw::nv;
using baregpu::test::nv::Bytes;
using baregpu::test::nv::reader_for;
using baregpu::test::nv::require_firmware_error;

namespace {

using baregpu::test::nv::build_elf64;
using baregpu::test::nv::Elf64;
using baregpu::test::nv::gsp_like;
using baregpu::test::nv::Section;

}  // namespace

TEST_CASE("nvidia: synthetic GSP-RM ELF64 parses into .fwimage and its signature sections", "[nvidia][elf]") {
    const Elf64 e = gsp_like();
    const auto file = reader_for(e.bytes.b, "gsp-test.bin");
    const nv::GspImage g = nv::parse_gsp_image(file);
    CHECK(g.elf.is_64bit());
    CHECK(g.elf.e_machine() == 0xf3);
    REQUIRE(g.elf.sections().size() == 6);
    CHECK(g.fwimage.offset == e.data_offset[0]);
    CHECK(g.fwimage.size() == 0x1000);
    CHECK(g.fwimage.bytes[0] == std::byte{0xaa});
    REQUIRE(g.signatures.size() == 2);
    CHECK(g.signatures[0].name == ".fwsignature_ad10x");
    CHECK(g.signatures[0].region.offset == e.data_offset[2]);
    CHECK(g.signatures[0].region.size() == 0x1000);
    CHECK(g.signatures[1].name == ".fwsignature_gb20x");
    CHECK(g.signatures[1].region.offset == e.data_offset[3]);
    CHECK(g.signatures[1].region.size() == 0x800);
    REQUIRE(g.elf.find(".fwversion") != nullptr);
    CHECK(g.elf.find(".fwversion")->region.offset == e.data_offset[1]);
    CHECK(g.elf.find(".nothere") == nullptr);
    CHECK(g.elf.sections().back().name == ".shstrtab");

    const auto d = nv::describe_file(file, "gsp-test.bin");
    REQUIRE(d.has_value());
    CHECK(d->format == "GSP-RM ELF64 image");
    CHECK(d->parts.size() == 3);
}

TEST_CASE("nvidia: malformed ELF images give a FirmwareError naming the field", "[nvidia][elf]") {
    auto parse = [](const Bytes& b) { return nv::parse_gsp_image(reader_for(b.b, "gsp-bad.bin")); };
    const Elf64 good = gsp_like();
    REQUIRE_NOTHROW(parse(good.bytes));

    SECTION("bad magic") {
        Bytes b = good.bytes;
        b.u8(1, 'e');
        require_firmware_error([&] { parse(b); }, "EI_MAG");
    }
    SECTION("class neither 32 nor 64 bit") {
        Bytes b = good.bytes;
        b.u8(4, 3);
        require_firmware_error([&] { parse(b); }, "EI_CLASS");
    }
    SECTION("big-endian") {
        Bytes b = good.bytes;
        b.u8(5, 2);
        require_firmware_error([&] { parse(b); }, "EI_DATA");
    }
    SECTION("section header table past the end of the file") {
        Bytes b = good.bytes;
        b.u64(40, good.bytes.b.size() - 64);
        require_firmware_error([&] { parse(b); }, "section header table");
    }
    SECTION("e_shoff so large that the table end overflows") {
        Bytes b = good.bytes;
        b.u64(40, std::numeric_limits<uint64_t>::max() - 8);
        require_firmware_error([&] { parse(b); }, "section header table");
    }
    SECTION("section header table overlapping the ELF header") {
        Bytes b = good.bytes;
        b.u64(40, 8);
        require_firmware_error([&] { parse(b); }, "e_shoff");
    }
    SECTION("wrong e_shentsize") {
        Bytes b = good.bytes;
        b.u16(58, 40);
        require_firmware_error([&] { parse(b); }, "e_shentsize");
    }
    SECTION("e_shnum of 0 (extended numbering)") {
        Bytes b = good.bytes;
        b.u16(60, 0);
        require_firmware_error([&] { parse(b); }, "e_shnum");
    }
    SECTION("e_shstrndx outside the table") {
        Bytes b = good.bytes;
        b.u16(62, good.shnum);
        require_firmware_error([&] { parse(b); }, "e_shstrndx");
    }
    SECTION("e_shstrndx naming a section that is not a string table") {
        Bytes b = good.bytes;
        b.u16(62, 1);
        require_firmware_error([&] { parse(b); }, "sh_type");
    }
    SECTION("sh_name past the string table") {
        Bytes b = good.bytes;
        b.u32(good.shdr(1), static_cast<uint32_t>(good.shstrtab_size));
        require_firmware_error([&] { parse(b); }, "sh_name");
    }
    SECTION("section name that runs off the end of the string table") {
        Bytes b = good.bytes;
        // Overwrite the string table's final NUL: ".shstrtab" no longer ends inside it.
        b.u8(good.shstrtab_offset + good.shstrtab_size - 1, 'x');
        require_firmware_error([&] { parse(b); }, "name");
    }
    SECTION("section data past the end of the file") {
        Bytes b = good.bytes;
        b.u64(good.shdr(1) + 32, good.bytes.b.size());
        require_firmware_error([&] { parse(b); }, "sh_offset/sh_size");
    }
    SECTION("section offset + size overflows 64 bits") {
        Bytes b = good.bytes;
        b.u64(good.shdr(3) + 24, 16).u64(good.shdr(3) + 32, std::numeric_limits<uint64_t>::max());
        require_firmware_error([&] { parse(b); }, "sh_offset/sh_size");
    }
    SECTION("string table past the end of the file") {
        Bytes b = good.bytes;
        b.u64(good.shdr(good.shnum - 1) + 24, good.bytes.b.size() - 4);
        require_firmware_error([&] { parse(b); }, ".shstrtab");
    }
    SECTION("no .fwimage section") {
        Bytes b = good.bytes;
        b.u8(good.shstrtab_offset + 1, '_');  // ".fwimage" becomes "_fwimage"
        require_firmware_error([&] { parse(b); }, ".fwimage");
        // describe_file has no format left to try for such an ELF.
        require_firmware_error([&] { (void)nv::describe_file(reader_for(b.b, "x.bin"), "x.bin"); }, "ELF sections");
    }
    SECTION("ELF header cut short") {
        Bytes b = good.bytes;
        b.b.resize(40);
        require_firmware_error([&] { parse(b); }, "ELF header");
    }
}

TEST_CASE("nvidia: every truncation of the synthetic ELF64 is a FirmwareError", "[nvidia][elf]") {
    const Elf64 e = gsp_like();
    for (size_t len = 0; len < e.bytes.b.size(); ++len) {
        // An exact-size copy, so the sanitizer build catches any read past the end.
        const std::vector<std::byte> cut(e.bytes.b.begin(), e.bytes.b.begin() + static_cast<std::ptrdiff_t>(len));
        INFO("length " << len);
        CHECK_THROWS_AS(nv::parse_gsp_image(reader_for(cut, "gsp-cut.bin")), baregpu::FirmwareError);
    }
}
