// The AMD parsers on inputs the real files do not cover: the older header versions (built in
// memory from the public layouts in amdgpu_ucode.h), and malformed files, each of which must be
// refused with a FirmwareError that names the file, the field, its offset, what was expected and
// what was found.
#include "firmware-loader/amd/discovery.hpp"
#include "firmware-loader/amd/gfx.hpp"
#include "firmware-loader/amd/imu.hpp"
#include "firmware-loader/amd/psp.hpp"
#include "firmware-loader/amd/psp_toc.hpp"
#include "firmware-loader/amd/rlc.hpp"
#include "firmware-loader/amd/rlc_toc.hpp"
#include "firmware-loader/amd/sdma.hpp"
#include "firmware-loader/amd/smc.hpp"
#include "tests/firmware/firmware_files.hpp"
#include "tests/firmware/synthetic_ucode.hpp"

#include <catch2/catch.hpp>

using namespace baregpu;
using namespace baregpu::fw;
using namespace baregpu::fw::amd;
using test::UcodeBuilder;

namespace {

// Runs parse and returns the FirmwareError it must throw.
template <typename Parse>
FirmwareError refusal(Parse parse) {
    try {
        parse();
    } catch (const FirmwareError& e) {
        return e;
    }
    FAIL("the parser accepted the input");
    throw std::logic_error("unreachable");
}

ByteReader named(const std::vector<std::byte>& bytes) { return ByteReader(bytes, "synthetic.bin"); }

}  // namespace

TEST_CASE("psp v1.0: SYS_DRV runs up to SOS, SOS after it (offsets from the ucode array)", "[amd][synthetic]") {
    UcodeBuilder b(1024, 1, 0, 44, 256, 768);
    b.put32(32, 0x55).put32(36, 300).put32(40, 400);  // sos {fw_version, offset_bytes, size_bytes}
    PspFirmware fw = parse_psp_sos(named(b.bytes()));
    REQUIRE(fw.binaries.size() == 2);
    CHECK(fw.binaries[0].name == "SYS_DRV");
    CHECK(fw.binaries[0].bytes.offset == 256);
    CHECK(fw.binaries[0].bytes.size() == 300);
    CHECK(fw.binaries[1].name == "SOS");
    CHECK(fw.binaries[1].fw_version == 0x55);
    CHECK(fw.binaries[1].bytes.offset == 556);
    CHECK(fw.binaries[1].bytes.size() == 400);
}

TEST_CASE("psp v1.1 and v1.3: TOC, KDB, SPL, RL descriptors; absent ones (size 0) are skipped", "[amd][synthetic]") {
    UcodeBuilder b(2048, 1, 3, 116, 256, 1792);
    b.put32(36, 100).put32(40, 100);    // sos at +100
    b.put32(48, 200).put32(52, 64);     // toc at +200
    b.put32(60, 264).put32(64, 32);     // kdb
    b.put32(72, 296).put32(76, 16);     // spl
    b.put32(84, 0).put32(88, 0);        // rl absent
    PspFirmware fw = parse_psp_sos(named(b.bytes()));
    std::vector<std::string> names;
    for (const auto& bin : fw.binaries) names.push_back(bin.name);
    CHECK(names == std::vector<std::string>{"SYS_DRV", "SOS", "TOC", "KDB", "SPL"});
    CHECK(fw.find(PspFwType::toc)->bytes.offset == 456);
    CHECK(fw.find(PspFwType::spl)->bytes.size() == 16);
}

TEST_CASE("ta v1.0: the five fixed descriptors", "[amd][synthetic]") {
    UcodeBuilder b(1024, 1, 0, 92, 256, 768);
    b.put32(32, 7).put32(36, 0).put32(40, 100);   // xgmi
    b.put32(56, 9).put32(60, 100).put32(64, 50);  // hdcp
    PspFirmware fw = parse_psp_ta(named(b.bytes()));
    REQUIRE(fw.binaries.size() == 2);
    CHECK(fw.find(TaFwType::xgmi)->fw_version == 7);
    CHECK(fw.find(TaFwType::hdcp)->bytes.offset == 356);
    CHECK(fw.find(TaFwType::ras) == nullptr);
}

TEST_CASE("gfx v1.0 and sdma v1.1: jump tables in dwords from the ucode array", "[amd][synthetic]") {
    UcodeBuilder g(1024, 1, 0, 44, 256, 768);
    g.put32(32, 3).put32(36, 16).put32(40, 8);
    GfxFirmware gfx = parse_gfx(named(g.bytes()));
    CHECK_FALSE(gfx.rs64);
    REQUIRE(gfx.jump_table.has_value());
    CHECK(gfx.jump_table->offset == 256 + 64);
    CHECK(gfx.jump_table->size() == 32);

    UcodeBuilder s(1024, 1, 1, 52, 256, 768);
    s.put32(40, 4).put32(44, 2).put32(48, 0x20);
    SdmaFirmware sdma = parse_sdma(named(s.bytes()));
    CHECK(sdma.digest_size == 0x20);
    CHECK(sdma.jump_table->offset == 256 + 16);
}

TEST_CASE("rlc v2.4 tap delays and v2.5 (which extends v2.2) second-core images", "[amd][synthetic]") {
    UcodeBuilder v24(4096, 2, 4, 244, 256, 256);
    for (uint32_t at = 72; at < 244; at += 8) v24.put32(at + 4, 512);  // every list/image: offset 512, size 0
    v24.put32(204, 64).put32(208, 1024);  // global_tap_delays
    RlcFirmware a = parse_rlc(named(v24.bytes()));
    REQUIRE(a.find("global_tap_delays") != nullptr);
    CHECK(a.find("global_tap_delays")->bytes.offset == 1024);
    CHECK(a.find("se3_tap_delays") != nullptr);

    UcodeBuilder v25(4096, 2, 5, 188, 256, 256);
    v25.put32(172, 128).put32(176, 2048).put32(180, 64).put32(184, 3072);
    RlcFirmware b = parse_rlc(named(v25.bytes()));
    CHECK(b.find("RLC_1 IRAM")->bytes.offset == 2048);
    CHECK(b.find("RLC_1 DRAM")->bytes.size() == 64);
    CHECK(b.find("RLCP") == nullptr);  // v2.5 is not v2.3 + more
}

TEST_CASE("smc v1.0: code and start address only", "[amd][synthetic]") {
    UcodeBuilder b(512, 1, 0, 36, 256, 256);
    b.put32(32, 0x20000);
    SmcFirmware fw = parse_smc(named(b.bytes()));
    CHECK(fw.ucode_start_addr == 0x20000);
    CHECK(fw.pptables.empty());
}

TEST_CASE("malformed ucode headers are refused with the field, offset, expectation and finding", "[amd][malformed]") {
    SECTION("size_bytes is not the file's length") {
        UcodeBuilder b(512, 1, 0, 36, 256, 256);
        b.put32(0, 513);
        FirmwareError e = refusal([&] { parse_smc(named(b.bytes())); });
        CHECK(e.file() == "synthetic.bin");
        CHECK(e.field() == "size_bytes");
        CHECK(e.offset() == 0);
        CHECK(e.expected() == "512 (the file's length)");
        CHECK(e.found() == "513");
        CHECK_THAT(e.what(), Catch::Contains("synthetic.bin: size_bytes at offset 0: expected 512"));
    }
    SECTION("a file shorter than the common header") {
        std::vector<std::byte> tiny(20);
        FirmwareError e = refusal([&] { parse_imu(named(tiny)); });
        CHECK(e.field() == "common_firmware_header");
        CHECK(e.found() == "20 bytes");
    }
    SECTION("the ucode array runs past the end") {
        UcodeBuilder b(512, 1, 0, 48, 256, 257);
        FirmwareError e = refusal([&] { parse_imu(named(b.bytes())); });
        CHECK(e.field() == "ucode_array_offset_bytes + ucode_size_bytes");
        CHECK(e.offset() == 256);
        CHECK_THAT(e.found(), Catch::Contains("ending at 513"));
    }
    SECTION("an unknown header version") {
        UcodeBuilder b(512, 2, 7, 60, 256, 256);
        FirmwareError e = refusal([&] { parse_gfx(named(b.bytes())); });
        CHECK(e.field() == "header_version_major.minor");
        CHECK(e.found() == "2.7");
        CHECK_THAT(e.expected(), Catch::Contains("2.0"));
    }
    SECTION("a header_size_bytes too small for its version") {
        UcodeBuilder b(512, 1, 0, 40, 256, 256);
        FirmwareError e = refusal([&] { parse_imu(named(b.bytes())); });
        CHECK(e.field() == "header_size_bytes");
        CHECK(e.expected() == "at least 48 for imu_firmware_header_v1_0");
    }
    SECTION("an image offset whose sum with the array offset overflows 32 bits stays a clean refusal") {
        UcodeBuilder b(512, 1, 0, 48, 256, 256);
        b.put32(32, 16).put32(36, 0xffffff80);  // IRAM at 256 + 0xffffff80
        FirmwareError e = refusal([&] { parse_imu(named(b.bytes())); });
        CHECK_THAT(e.field(), Catch::Contains("IMU IRAM"));
    }
}

TEST_CASE("malformed PSP packaging is refused", "[amd][malformed]") {
    SECTION("more descriptors than fit before the ucode array") {
        UcodeBuilder b(1024, 2, 0, 36, 64, 960);
        b.put32(32, 3);  // 36 + 3*16 = 84 > 64
        FirmwareError e = refusal([&] { parse_psp_sos(named(b.bytes())); });
        CHECK(e.field() == "psp_fw_bin descriptors");
        CHECK(e.found() == "they end at 84");
    }
    SECTION("a count beyond UCODE_MAX_PSP_PACKAGING") {
        UcodeBuilder b(1024, 2, 0, 36, 256, 768);
        b.put32(32, 0xffffffff);
        FirmwareError e = refusal([&] { parse_psp_sos(named(b.bytes())); });
        CHECK(e.field() == "psp_fw_bin_count");
        CHECK(e.expected() == "1 to 13");
    }
    SECTION("a binary outside the file") {
        UcodeBuilder b(1024, 2, 0, 36, 256, 768);
        b.put32(32, 1).put32(36, 1).put32(44, 700).put32(48, 100);  // 256 + 700 + 100 > 1024
        FirmwareError e = refusal([&] { parse_psp_sos(named(b.bytes())); });
        CHECK_THAT(e.field(), Catch::Contains("psp_fw_bin[0] (SOS)"));
    }
    SECTION("a PSP binary without the $PS1 cookie") {
        std::vector<std::byte> blob(512);
        ByteReader file(blob, "toc.bin");
        FirmwareError e = refusal([&] { parse_psp_signed_binary(file, file.region(0, 512, "blob")); });
        CHECK(e.offset() == 0x10);
        CHECK(e.expected() == "0x31535024");
        CHECK(e.found() == "0x0");
    }
    SECTION("a PSP binary whose body is longer than the binary") {
        std::vector<std::byte> blob(512);
        blob[0x10] = std::byte{0x24}, blob[0x11] = std::byte{0x50}, blob[0x12] = std::byte{0x53}, blob[0x13] = std::byte{0x31};
        blob[0x15] = std::byte{0x02};  // 512 > 256
        ByteReader file(blob, "toc.bin");
        FirmwareError e = refusal([&] { parse_psp_signed_binary(file, file.region(0, 512, "blob")); });
        CHECK(e.field() == "PSP binary body length");
        CHECK(e.found() == "512");
    }
}

TEST_CASE("malformed SMU, RLC TOC and discovery tables are refused", "[amd][malformed]") {
    SECTION("a pptable count that is absurd") {
        UcodeBuilder b(1024, 2, 1, 44, 256, 256);
        b.put32(36, 1000000).put32(40, 512);
        CHECK(refusal([&] { parse_smc(named(b.bytes())); }).field() == "pptable_count");
    }
    SECTION("a pptable entry table past the end") {
        UcodeBuilder b(1024, 2, 1, 44, 256, 256);
        b.put32(36, 2).put32(40, 1010);
        CHECK_THAT(refusal([&] { parse_smc(named(b.bytes())); }).field(),
                   Catch::Contains("pptable_entry_offset"));
    }
    SECTION("an RLC TOC whose size is not whole entries") {
        UcodeBuilder b(512, 1, 0, 68, 256, 20);
        CHECK(refusal([&] { parse_rlc_toc(named(b.bytes())); }).field() == "ucode_size_bytes");
    }
    SECTION("discovery: a wrong checksum, then a wrong signature") {
        REQUIRE_FIRMWARE();
        auto bytes = test::firmware_bytes("amdgpu/vega10_ip_discovery.bin");
        auto bad = bytes;
        bad[200] ^= std::byte{1};
        FirmwareError e = refusal([&] { parse_discovery(test::reader(bad, "vega10_ip_discovery.bin")); });
        CHECK(e.field() == "binary_checksum");
        bad = bytes;
        bad[0] = std::byte{0};
        CHECK(refusal([&] { parse_discovery(test::reader(bad, "vega10_ip_discovery.bin")); }).field() ==
              "binary_signature");
    }
}
