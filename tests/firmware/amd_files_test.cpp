// Every AMD file in firmware/ decoded field by field. The expected values were read from
// the files' bytes (xxd and a struct.unpack script, not our parser) against the public layouts:
// Linux drivers/gpu/drm/amd/amdgpu/amdgpu_ucode.h (common_firmware_header and the per-IP headers),
// amdgpu_rlc.h (RLC_TABLE_OF_CONTENT_V2), include/discovery.h, drivers/platform/x86/amd/pmf/pmf.h
// (the "$PS1" cookie).
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
#include "tests/firmware/firmware_files.hpp"

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>

using namespace baregpu;
using namespace baregpu::fw;
using namespace baregpu::fw::amd;

namespace {

struct Common {
    const char* file;
    uint32_t header_size;
    uint16_t major, minor, ip_major;
    uint32_t ucode_version, ucode_size, crc32;
    CrcResult crc;
};

// size_bytes is the file's length and ucode_array_offset_bytes is 256 in every file, checked below.
constexpr Common kCommon[] = {
    {"amdgpu/gc_11_0_0_imu.bin", 48, 1, 0, 11, 0xb1f4b00, 132096, 0xf184e425, CrcResult::payload},
    {"amdgpu/gc_11_0_0_me.bin", 60, 2, 0, 11, 0x956, 314256, 0xe1bcdaa3, CrcResult::payload},
    {"amdgpu/gc_11_0_0_mec.bin", 60, 2, 0, 11, 0xa28, 406272, 0xf8888634, CrcResult::payload},
    {"amdgpu/gc_11_0_0_mes1.bin", 72, 1, 0, 11, 0, 217888, 0xa1358c8a, CrcResult::payload},
    {"amdgpu/gc_11_0_0_mes_2.bin", 72, 1, 0, 11, 0, 256816, 0x2bf6b71b, CrcResult::payload},
    {"amdgpu/gc_11_0_0_pfp.bin", 60, 2, 0, 11, 0x9e2, 230224, 0xcfc5b548, CrcResult::payload},
    {"amdgpu/gc_11_0_0_rlc.bin", 204, 2, 3, 11, 0x80, 25088, 0x33f7b26b, CrcResult::mismatch},
    {"amdgpu/gc_12_0_1_imu.bin", 48, 1, 0, 12, 0xc302b00, 132096, 0xa6464d97, CrcResult::payload},
    {"amdgpu/gc_12_0_1_me.bin", 60, 2, 0, 12, 0xb0e, 419520, 0xc7f4d730, CrcResult::payload},
    {"amdgpu/gc_12_0_1_mec.bin", 60, 2, 0, 12, 0xc3a, 447200, 0xf8949667, CrcResult::payload},
    {"amdgpu/gc_12_0_1_mes.bin", 72, 1, 0, 12, 0, 643280, 0x668230b6, CrcResult::payload},
    {"amdgpu/gc_12_0_1_mes1.bin", 72, 1, 0, 12, 0, 611664, 0xc89a9268, CrcResult::payload},
    {"amdgpu/gc_12_0_1_pfp.bin", 60, 2, 0, 12, 0xb40, 351760, 0x6a9592fe, CrcResult::payload},
    {"amdgpu/gc_12_0_1_rlc.bin", 172, 2, 2, 12, 0xbe7da0, 25088, 0x95d38e59, CrcResult::mismatch},
    {"amdgpu/gc_12_0_1_toc.bin", 68, 1, 0, 12, 0xb, 1792, 0x2fc9dbdc, CrcResult::first_480_bytes},
    {"amdgpu/gc_12_0_1_uni_mes.bin", 72, 1, 0, 12, 0, 721056, 0xf86d7003, CrcResult::payload},
    {"amdgpu/psp_13_0_0_sos.bin", 36, 2, 0, 13, 0x310033, 268048, 0xc4dd5456, CrcResult::payload},
    {"amdgpu/psp_13_0_0_ta.bin", 36, 2, 0, 13, 0, 259072, 0x7f543724, CrcResult::payload},
    {"amdgpu/psp_14_0_3_sos.bin", 36, 2, 0, 14, 0x3a0d14, 435376, 0xc6faa83f, CrcResult::payload},
    {"amdgpu/psp_14_0_3_ta.bin", 36, 2, 0, 14, 0, 270368, 0xebd7be12, CrcResult::payload},
    {"amdgpu/sdma_6_0_0.bin", 64, 2, 0, 6, 0x18, 34304, 0xa9464a1e, CrcResult::payload},
    {"amdgpu/sdma_7_0_1.bin", 44, 3, 0, 7, 0x77917c, 46848, 0x8fe8c855, CrcResult::payload},
    {"amdgpu/smu_13_0_0.bin", 44, 2, 1, 13, 0x4e8100, 261632, 0xf7484d91, CrcResult::mismatch},
    {"amdgpu/smu_14_0_3.bin", 44, 2, 0, 14, 0x684a00, 327168, 0x02851efb, CrcResult::first_480_bytes},
};

void check_region(const Region& r, uint64_t offset, uint64_t size) {
    CHECK(r.offset == offset);
    CHECK(r.size() == size);
}

}  // namespace

TEST_CASE("every amdgpu ucode file's common header decodes to the values in its bytes", "[amd][files]") {
    REQUIRE_FIRMWARE();
    for (const Common& c : kCommon) {
        INFO(c.file);
        auto bytes = test::firmware_bytes(c.file);
        auto file = test::reader(bytes, c.file);
        UcodeHeader h = parse_ucode_header(file);
        CHECK(h.size_bytes == bytes.size());
        CHECK(h.header_size_bytes == c.header_size);
        CHECK(h.header_version_major == c.major);
        CHECK(h.header_version_minor == c.minor);
        CHECK(h.ip_version_major == c.ip_major);
        CHECK(h.ip_version_minor == 0);  // coarse in every real file
        CHECK(h.ucode_version == c.ucode_version);
        CHECK(h.ucode_size_bytes == c.ucode_size);
        CHECK(h.ucode_array_offset_bytes == 256);
        CHECK(h.crc32 == c.crc32);
        CHECK(h.crc == c.crc);
        check_region(h.ucode, 256, c.ucode_size);
    }
}

TEST_CASE("PSP sOS v2.0: the table of binaries, and the PSP TOC inside it", "[amd][files]") {
    REQUIRE_FIRMWARE();
    struct Bin {
        PspFwType type;
        uint32_t version, offset, size;  // offset relative to the ucode array (256)
    };
    SECTION("psp_13_0_0_sos (Navi31): 6 binaries") {
        auto bytes = test::firmware_bytes("amdgpu/psp_13_0_0_sos.bin");
        PspFirmware fw = parse_psp_sos(test::reader(bytes, "psp_13_0_0_sos.bin"));
        const Bin want[] = {{PspFwType::sys_drv, 0x310033, 0, 157584},  {PspFwType::sos, 0x310033, 157584, 99200},
                            {PspFwType::toc, 0xc, 256784, 2304},         {PspFwType::kdb, 0x4003100, 259088, 5888},
                            {PspFwType::spl, 0x10031c0, 264976, 672},    {PspFwType::rl, 0x7001c00, 265648, 2400}};
        REQUIRE(fw.binaries.size() == std::size(want));
        for (size_t i = 0; i < std::size(want); ++i) {
            INFO(i);
            CHECK(fw.binaries[i].type == static_cast<uint32_t>(want[i].type));
            CHECK(fw.binaries[i].fw_version == want[i].version);
            check_region(fw.binaries[i].bytes, 256 + want[i].offset, want[i].size);
        }
        // The last binary ends exactly at the end of the file.
        CHECK(fw.binaries.back().bytes.end() == bytes.size());
        const PspBinary* toc = fw.find(PspFwType::toc);
        REQUIRE(toc != nullptr);
        CHECK(toc->name == "TOC");
        PspSignedBinary signed_toc = parse_psp_signed_binary(test::reader(bytes, "psp_13_0_0_sos.bin"), toc->bytes);
        check_region(signed_toc.header, 256 + 256784, 256);
        check_region(signed_toc.body, 256 + 256784 + 256, 1792);  // "$PS1" at +0x10, 0x700 at +0x14
        check_region(signed_toc.signature, 256 + 256784 + 256 + 1792, 256);
    }
    SECTION("psp_14_0_3_sos (Navi48): 11 binaries") {
        auto bytes = test::firmware_bytes("amdgpu/psp_14_0_3_sos.bin");
        PspFirmware fw = parse_psp_sos(test::reader(bytes, "psp_14_0_3_sos.bin"));
        const Bin want[] = {
            {PspFwType::kdb, 0x703b0001, 0, 6816},           {PspFwType::sys_drv, 0x3a0d14, 6816, 78272},
            {PspFwType::sos, 0x3a0d14, 85088, 125472},       {PspFwType::soc_drv, 0x3a0d14, 210560, 103792},
            {PspFwType::intf_drv, 0x3a0d14, 314352, 37280},  {PspFwType::dbg_drv, 0x3a0d14, 351632, 53344},
            {PspFwType::toc, 0, 404976, 2304},               {PspFwType::ipkeymgr_drv, 0x3a0d14, 407280, 12848},
            {PspFwType::spl, 0x1003a00, 420128, 832},        {PspFwType::ras_drv, 0x3a0d14, 420960, 12704},
            {PspFwType::rl, 0, 433664, 1712}};
        REQUIRE(fw.binaries.size() == std::size(want));
        for (size_t i = 0; i < std::size(want); ++i) {
            INFO(i);
            CHECK(fw.binaries[i].type == static_cast<uint32_t>(want[i].type));
            CHECK(fw.binaries[i].fw_version == want[i].version);
            check_region(fw.binaries[i].bytes, 256 + want[i].offset, want[i].size);
        }
        CHECK(fw.find(PspFwType::ipkeymgr_drv)->name == "IPKEYMGR_DRV");
        PspSignedBinary signed_toc = parse_psp_signed_binary(test::reader(bytes, "psp_14_0_3_sos.bin"),
                                                             fw.find(PspFwType::toc)->bytes);
        CHECK(signed_toc.body.size() == 1792);
        CHECK(signed_toc.signature.size() == 256);
    }
}

TEST_CASE("PSP TA v2.0: ASD, HDCP, DTM, RAS", "[amd][files]") {
    REQUIRE_FIRMWARE();
    struct Bin {
        TaFwType type;
        uint32_t version, offset, size;
    };
    const std::pair<const char*, std::array<Bin, 4>> files[] = {
        {"amdgpu/psp_13_0_0_ta.bin",
         {{{TaFwType::asd, 553648367, 0, 196864}, {TaFwType::hdcp, 385876038, 196864, 28928},
           {TaFwType::dtm, 301989913, 225792, 8448}, {TaFwType::ras, 452985349, 234240, 24832}}}},
        {"amdgpu/psp_14_0_3_ta.bin",
         {{{TaFwType::asd, 553648367, 0, 227072}, {TaFwType::hdcp, 385876038, 227072, 25232},
           {TaFwType::dtm, 301989913, 252304, 5456}, {TaFwType::ras, 456785921, 257760, 12608}}}},
    };
    for (const auto& [name, want] : files) {
        INFO(name);
        auto bytes = test::firmware_bytes(name);
        PspFirmware fw = parse_psp_ta(test::reader(bytes, name));
        REQUIRE(fw.binaries.size() == want.size());
        for (size_t i = 0; i < want.size(); ++i) {
            CHECK(fw.binaries[i].type == static_cast<uint32_t>(want[i].type));
            CHECK(fw.binaries[i].fw_version == want[i].version);
            check_region(fw.binaries[i].bytes, 256 + want[i].offset, want[i].size);
        }
        CHECK(fw.binaries.back().bytes.end() == bytes.size());
    }
}

TEST_CASE("SMU: v2.1 with six soft PPTables (Navi31), v2.0 with one (Navi48)", "[amd][files]") {
    REQUIRE_FIRMWARE();
    {
        auto bytes = test::firmware_bytes("amdgpu/smu_13_0_0.bin");
        SmcFirmware fw = parse_smc(test::reader(bytes, "smu_13_0_0.bin"));
        CHECK(fw.ucode_start_addr == 131072);
        check_region(fw.code, 256, 261632);
        // pptable_count 6 at pptable_entry_offset 261888; {id, offset, size} each, offsets absolute.
        const uint32_t want[][3] = {{3664, 261960, 4804}, {36641, 266764, 5360}, {3683, 272124, 4804},
                                    {36831, 276928, 5360}, {3715, 282288, 4804}, {37151, 287092, 5360}};
        REQUIRE(fw.pptables.size() == 6);
        for (size_t i = 0; i < 6; ++i) {
            CHECK(fw.pptables[i].id == want[i][0]);
            check_region(fw.pptables[i].bytes, want[i][1], want[i][2]);
        }
        CHECK(fw.pptables.back().bytes.end() == bytes.size());
    }
    {
        auto bytes = test::firmware_bytes("amdgpu/smu_14_0_3.bin");
        SmcFirmware fw = parse_smc(test::reader(bytes, "smu_14_0_3.bin"));
        CHECK(fw.ucode_start_addr == 131072);
        REQUIRE(fw.pptables.size() == 1);
        check_region(fw.pptables[0].bytes, 327424, 5812);
        CHECK(fw.pptables[0].bytes.end() == bytes.size());
    }
}

TEST_CASE("CP PFP/ME/MEC: gfx v2.0 (RS64) code and data parts", "[amd][files]") {
    REQUIRE_FIRMWARE();
    struct Want {
        const char* file;
        uint32_t ucode_size, data_size, data_offset;
    };
    const Want files[] = {
        {"amdgpu/gc_11_0_0_pfp.bin", 90960, 139264, 91216},  {"amdgpu/gc_11_0_0_me.bin", 174992, 139264, 175248},
        {"amdgpu/gc_11_0_0_mec.bin", 267008, 139264, 267264}, {"amdgpu/gc_12_0_1_pfp.bin", 89616, 262144, 89872},
        {"amdgpu/gc_12_0_1_me.bin", 157376, 262144, 157632},  {"amdgpu/gc_12_0_1_mec.bin", 185056, 262144, 185312},
    };
    for (const Want& w : files) {
        INFO(w.file);
        auto bytes = test::firmware_bytes(w.file);
        GfxFirmware fw = parse_gfx(test::reader(bytes, w.file));
        CHECK(fw.rs64);
        CHECK(fw.ucode_feature_version == 29);
        check_region(fw.instructions, 256, w.ucode_size);
        REQUIRE(fw.data.has_value());
        check_region(*fw.data, w.data_offset, w.data_size);
        CHECK(fw.data->end() == bytes.size());  // the data part ends the file
        CHECK(fw.ucode_start_addr == (uint64_t{0x70000} << 32 | 0x3000));
        CHECK_FALSE(fw.jump_table.has_value());
    }
}

TEST_CASE("RLC: v2.3 (Navi31) and v2.2 (Navi48) lists and images at absolute offsets", "[amd][files]") {
    REQUIRE_FIRMWARE();
    struct Want {
        const char* name;
        uint64_t offset, size;
    };
    auto check = [](const RlcFirmware& fw, std::initializer_list<Want> want) {
        for (const Want& w : want) {
            INFO(w.name);
            const RlcRegion* r = fw.find(w.name);
            REQUIRE(r != nullptr);
            check_region(r->bytes, w.offset, w.size);
        }
    };
    {
        auto bytes = test::firmware_bytes("amdgpu/gc_11_0_0_rlc.bin");
        RlcFirmware fw = parse_rlc(test::reader(bytes, "gc_11_0_0_rlc.bin"));
        CHECK(fw.ucode_feature_version == 1);
        CHECK(fw.reg_restore_list_size == 314);
        CHECK(fw.reg_list_format_start == 315);
        CHECK(fw.starting_offsets_start == 379);
        // Zero-size lists that point at the end of the ucode.
        check(fw, {{"RLC_G", 256, 25088},
                   {"reg_list_format", 25344, 0},
                   {"reg_list", 25344, 0},
                   {"save_restore_list_cntl", 25344, 0},
                   {"save_restore_list_gpm", 25344, 2560},
                   {"save_restore_list_srm", 27904, 36640},
                   {"IRAM", 64544, 66048},
                   {"DRAM", 130592, 33280},
                   {"RLCP", 163872, 8704},
                   {"RLCV", 172576, 12800}});
        CHECK(fw.find("RLCP")->version == 25);
        CHECK(fw.find("RLCV")->version == 34);
        CHECK(fw.find("RLCV")->bytes.end() == bytes.size());
    }
    {
        auto bytes = test::firmware_bytes("amdgpu/gc_12_0_1_rlc.bin");
        RlcFirmware fw = parse_rlc(test::reader(bytes, "gc_12_0_1_rlc.bin"));
        CHECK(fw.ucode_feature_version == 1000);
        check(fw, {{"RLC_G", 256, 25088},
                   {"save_restore_list_gpm", 25344, 2560},
                   {"save_restore_list_srm", 27904, 23616},
                   {"IRAM", 51520, 66048},
                   {"DRAM", 117568, 33280}});
        CHECK(fw.find("RLCP") == nullptr);  // v2.2 has no RLCP/RLCV
        CHECK(fw.find("DRAM")->bytes.end() == bytes.size());
    }
}

TEST_CASE("MES v1.0: instructions and data with their load addresses; version 0 is a version", "[amd][files]") {
    REQUIRE_FIRMWARE();
    struct Want {
        const char* file;
        uint32_t ucode_size, data_size, data_offset;
    };
    const Want files[] = {
        {"amdgpu/gc_11_0_0_mes_2.bin", 125744, 131072, 126000}, {"amdgpu/gc_11_0_0_mes1.bin", 86816, 131072, 87072},
        {"amdgpu/gc_12_0_1_mes.bin", 118992, 524288, 119248},   {"amdgpu/gc_12_0_1_mes1.bin", 87376, 524288, 87632},
        {"amdgpu/gc_12_0_1_uni_mes.bin", 196768, 524288, 197024},
    };
    for (const Want& w : files) {
        INFO(w.file);
        auto bytes = test::firmware_bytes(w.file);
        MesFirmware fw = parse_mes(test::reader(bytes, w.file));
        CHECK(fw.mes_ucode_version == 0);
        CHECK(fw.mes_ucode_data_version == 0);
        check_region(fw.instructions, 256, w.ucode_size);
        check_region(fw.data, w.data_offset, w.data_size);
        CHECK(fw.data.end() == bytes.size());
        CHECK(fw.uc_start_addr == 0xfffffffff0005000ull);  // xxd -s 56: 0050 00f0 ffff ffff
        CHECK(fw.data_start_addr == 0xfffffffff0100000ull);  // 0000 10f0 ffff ffff
    }
}

TEST_CASE("IMU v1.0: IRAM then DRAM, offsets relative to the ucode array", "[amd][files]") {
    REQUIRE_FIRMWARE();
    for (const char* name : {"amdgpu/gc_11_0_0_imu.bin", "amdgpu/gc_12_0_1_imu.bin"}) {
        INFO(name);
        auto bytes = test::firmware_bytes(name);
        ImuFirmware fw = parse_imu(test::reader(bytes, name));
        check_region(fw.iram, 256, 66048);
        check_region(fw.dram, 256 + 66048, 66048);
        CHECK(fw.dram.end() == bytes.size());
    }
}

TEST_CASE("SDMA: v2.0 TH0 + TH1 (Navi31), v3.0 one image (Navi48)", "[amd][files]") {
    REQUIRE_FIRMWARE();
    {
        auto bytes = test::firmware_bytes("amdgpu/sdma_6_0_0.bin");
        SdmaFirmware fw = parse_sdma(test::reader(bytes, "sdma_6_0_0.bin"));
        CHECK(fw.ucode_feature_version == 60);
        check_region(fw.ucode, 256, 17408);
        REQUIRE(fw.ctl_ucode.has_value());
        check_region(*fw.ctl_ucode, 17664, 16896);
        CHECK(fw.ctl_ucode->end() == bytes.size());
    }
    {
        auto bytes = test::firmware_bytes("amdgpu/sdma_7_0_1.bin");
        SdmaFirmware fw = parse_sdma(test::reader(bytes, "sdma_7_0_1.bin"));
        CHECK(fw.ucode_feature_version == 1081577852);
        check_region(fw.ucode, 256, 46848);
        CHECK_FALSE(fw.ctl_ucode.has_value());
    }
}

TEST_CASE("RLC autoload TOC (gc_12_0_1_toc): 36 entries, ids past the enum, zero-size pads", "[amd][files]") {
    REQUIRE_FIRMWARE();
    auto bytes = test::firmware_bytes("amdgpu/gc_12_0_1_toc.bin");
    RlcToc toc = parse_rlc_toc(test::reader(bytes, "gc_12_0_1_toc.bin"));
    REQUIRE(toc.entries.size() == 36);
    // First entries: RLC_G_UCODE at 0 (24 KiB), RLC_TOC at 24576 (1792 B), RLCG_SCRATCH, RLC_SRM_ARAM, RLX6_UCODE.
    const uint64_t first[][3] = {{1, 0, 24576}, {2, 24576, 1792}, {3, 26368, 2048}, {4, 28416, 40960}, {7, 69376, 65536}};
    for (size_t i = 0; i < std::size(first); ++i) {
        CHECK(toc.entries[i].id == first[i][0]);
        CHECK(toc.entries[i].offset == first[i][1]);
        CHECK(toc.entries[i].size == first[i][2]);
    }
    const RlcTocEntry& last = toc.entries.back();
    CHECK(last.id == 42);  // UMF_ZONE_PAD, zero size
    CHECK(last.offset == 24117248);
    CHECK(last.size == 0);
    CHECK(last.memory_destination == 3);
    CHECK(soc24_firmware_name(42) == "UMF_ZONE_PAD");
    bool past_enum = false;
    for (const RlcTocEntry& e : toc.entries) past_enum |= e.id >= 43;
    CHECK(past_enum);
    CHECK(soc24_firmware_name(44) == "id 44");
}

TEST_CASE("IP discovery binaries: signatures, checksums, dies and IP versions", "[amd][files]") {
    REQUIRE_FIRMWARE();
    struct Want {
        const char* file;
        uint16_t binary_size, ips;
        uint8_t gc_major, gc_minor, gc_revision;
    };
    const Want files[] = {
        {"amdgpu/vega10_ip_discovery.bin", 656, 22, 9, 0, 1},
        {"amdgpu/vega20_ip_discovery.bin", 564, 19, 9, 4, 0},
        {"amdgpu/aldebaran_ip_discovery.bin", 732, 22, 9, 4, 2},
    };
    for (const Want& w : files) {
        INFO(w.file);
        auto bytes = test::firmware_bytes(w.file);
        Discovery d = parse_discovery(test::reader(bytes, w.file));
        CHECK(d.version_major == 1);
        CHECK(d.binary_size == w.binary_size);
        CHECK(d.table_version == 2);
        REQUIRE(d.dies.size() == 1);
        CHECK(d.dies[0].ips.size() == w.ips);
        const DiscoveredIp* gc = d.find(11);
        REQUIRE(gc != nullptr);
        CHECK(gc->major == w.gc_major);
        CHECK(gc->minor == w.gc_minor);
        CHECK(gc->revision == w.gc_revision);
        CHECK(hw_id_name(gc->hw_id) == "GC");
        CHECK(d.dies[0].ips.front().hw_id == 35);  // ATHUB is listed first in all three
    }
}

TEST_CASE("the kind of each amdgpu file is known from its name", "[amd][files]") {
    std::vector<std::byte> none;
    ByteReader empty(none, "x");
    CHECK(kind_of(empty, "psp_13_0_0_sos.bin") == FileKind::psp_sos);
    CHECK(kind_of(empty, "psp_13_0_0_sos_kicker.bin") == FileKind::psp_sos);
    CHECK(kind_of(empty, "psp_14_0_3_ta.bin.zst") == FileKind::psp_ta);
    CHECK(kind_of(empty, "smu_13_0_0.bin") == FileKind::smc);
    CHECK(kind_of(empty, "gc_11_0_0_mec.bin") == FileKind::gfx);
    CHECK(kind_of(empty, "gc_11_0_0_me.bin") == FileKind::gfx);
    CHECK(kind_of(empty, "gc_11_0_0_rlc_1.bin") == FileKind::rlc);
    CHECK(kind_of(empty, "gc_11_0_0_mes_2.bin") == FileKind::mes);
    CHECK(kind_of(empty, "gc_12_0_1_uni_mes.bin") == FileKind::mes);
    CHECK(kind_of(empty, "gc_12_0_1_imu.bin") == FileKind::imu);
    CHECK(kind_of(empty, "gc_12_0_1_toc.bin") == FileKind::rlc_toc);
    CHECK(kind_of(empty, "sdma_7_0_1.bin") == FileKind::sdma);
    CHECK(kind_of(empty, "raven_ip_discovery.bin") == FileKind::discovery);
    CHECK_FALSE(kind_of(empty, "bootloader-570.144.bin").has_value());
    CHECK_FALSE(kind_of(empty, "dcn_3_2_0_dmcub.bin").has_value());
}

TEST_CASE("a PSP component of a type Linux does not know is described with a warning: it would not be loaded") {
    auto bytes = test::firmware_bytes("amdgpu/psp_13_0_0_sos.bin");
    // The SPL descriptor (fw_type 5, version 0x10031c0, offset 264976, 672 bytes) gets fw_type 0x40000005.
    const uint32_t spl[4] = {5, 0x10031c0, 264976, 672};
    auto at = std::search(bytes.begin(), bytes.end(), reinterpret_cast<const std::byte*>(spl),
                          reinterpret_cast<const std::byte*>(spl) + sizeof spl);
    REQUIRE(at != bytes.end());
    CHECK(describe(test::reader(bytes, "psp_13_0_0_sos.bin"), FileKind::psp_sos).warnings.empty());
    const uint32_t unknown = 0x40000005;
    std::memcpy(&*at, &unknown, 4);
    Description d = describe(test::reader(bytes, "psp_13_0_0_sos.bin"), FileKind::psp_sos);
    // (The header's CRC no longer matches either: a warning of its own.)
    CHECK(std::count_if(d.warnings.begin(), d.warnings.end(), [](const std::string& w) {
              return w.find("fw_type 1073741829") != std::string::npos && w.find("not loaded") != std::string::npos;
          }) == 1);
}
