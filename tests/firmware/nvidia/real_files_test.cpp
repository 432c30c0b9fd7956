// Every NVIDIA file in firmware/, decoded field by field. The expected values were read
// from the files with a python struct.unpack script over the public layouts, not from our
// parser:
//   nvfw_bin_hdr           nouveau include/nvfw/fw.h (torvalds/linux)
//   nvfw_hs_header_v2,
//   nvfw_hs_load_header_v2 nouveau include/nvfw/hs.h (torvalds/linux 254a142007114cad7b0a901215c1558e4315d46f)
//   RM_RISCV_UCODE_DESC    NVIDIA/open-gpu-kernel-modules src/nvidia/arch/nvalloc/common/inc/rmRiscvUcode.h
//                          (90eb10774f1c53d2364eacf9fa8f0c7a92b1b824)
//   Elf32_Ehdr/Elf32_Shdr  Linux include/uapi/linux/elf.h (values cross-checked with readelf -S -W)
#include "firmware-loader/nvidia/describe.hpp"
#include "firmware-loader/nvidia/elf_image.hpp"
#include "firmware-loader/nvidia/hs_header.hpp"
#include "firmware-loader/nvidia/riscv_ucode_desc.hpp"
#include "tests/firmware/nvidia/nv_test_support.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

namespace nv = baregpu::fw::nv;
using baregpu::test::nv::firmware_file;
using baregpu::test::nv::reader_for;

namespace {

struct HsFile {
    const char* path;
    uint64_t file_size;
    uint32_t bin_size, data_size;
    uint32_t patch_loc;  // the value at file offset 0x33c
    uint32_t os_data_offset, os_data_size;
    uint32_t app0_size;
    uint32_t ucode_id;  // third meta-data word
};

// All five share header_offset 0x18, data_offset 0x378, the HS header words
// {0x3c, 0x300, 0x33c, 0x340, 0x344, 0xc, 0x350, 0x354, 0x24}, *patch_sig = 0, *num_sig = 2,
// meta {1, 1, ucode_id}, os_code {0, 0x100}, num_apps 1, app[0].offset 0x100.
const HsFile kHsFiles[] = {
    {"nvidia/ad102/gsp/booter_load-535.113.01.bin", 55928, 0xdb00, 0xd700, 0x7710, 0x7700, 0x6000, 0x7600, 3},
    {"nvidia/ad102/gsp/booter_load-570.144.bin", 57720, 0xe200, 0xde00, 0x7e10, 0x7e00, 0x6000, 0x7d00, 3},
    {"nvidia/ad102/gsp/booter_unload-535.113.01.bin", 39800, 0x9c00, 0x9800, 0x4910, 0x4900, 0x4e00, 0x4800, 3},
    {"nvidia/ad102/gsp/booter_unload-570.144.bin", 41592, 0xa300, 0x9f00, 0x5010, 0x5000, 0x4e00, 0x4f00, 3},
    {"nvidia/ad102/gsp/scrubber-570.144.bin", 8312, 0x2100, 0x1d00, 0x1a00, 0x1a00, 0x300, 0x1900, 0xd},
};

struct RiscvFile {
    const char* path;
    uint64_t file_size;
    uint32_t bin_size, data_size;
    uint32_t words[21];  // RM_RISCV_UCODE_DESC at file offset 0x18, in declaration order
};

const RiscvFile kRiscvFiles[] = {
    {"nvidia/ad102/gsp/bootloader-535.113.01.bin", 32876, 0x8100, 0x8000,
     {5, 0x7000, 0x458, 0x7458, 0x10, 0, 0, 0, 0, 0x800, 0x800, 0x4000, 0x4800, 0x2500, 1, 0, 0, 0, 0, 0x8000, 0}},
    {"nvidia/ad102/gsp/bootloader-570.144.bin", 36972, 0x9100, 0x9000,
     {5, 0x8000, 0x880, 0x8880, 0x10, 0, 0, 0, 0, 0x800, 0x800, 0x4000, 0x4800, 0x2900, 1, 0, 0, 0, 0, 0x9000, 0}},
    // gb202: no bootloader and fbReservedSize 0.
    {"nvidia/gb202/gsp/bootloader-570.144.bin", 200812, 0x31100, 0x31000,
     {5, 0, 0, 0, 0, 0, 0, 0, 0, 0xa00, 0xa00, 0xa800, 0xb200, 0x25800, 1, 0, 0, 0, 0, 0, 0}},
};

std::string file_name_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }

}  // namespace

TEST_CASE("nvidia: booter and scrubber nvfw_bin_hdr + nvfw_hs_header_v2 fields", "[nvidia][firmware]") {
    for (const HsFile& f : kHsFiles) {
        DYNAMIC_SECTION(f.path) {
            auto bytes = firmware_file(f.path);
            if (!bytes) return;
            REQUIRE(bytes->size() == f.file_size);
            const auto file = reader_for(*bytes, file_name_of(f.path));
            const nv::HsHeaderV2 h = nv::parse_hs_header_v2(file);

            CHECK(h.bin.bin_magic == 0x10de);
            CHECK(h.bin.bin_ver == 1);
            CHECK(h.bin.bin_size == f.bin_size);
            CHECK(h.bin.bin_size == f.data_size + 0x400);  // not the file size
            CHECK(h.bin.header_offset == 0x18);
            CHECK(h.bin.data_offset == 0x378);
            CHECK(h.bin.data_size == f.data_size);
            CHECK(h.bin.data.offset == 0x378);
            CHECK(h.bin.data.end() == f.file_size);  // the file ends where the data image does

            CHECK(h.sig_prod_offset == 0x3c);
            CHECK(h.sig_prod_size == 0x300);
            CHECK(h.patch_loc_offset == 0x33c);
            CHECK(h.patch_sig_offset == 0x340);
            CHECK(h.meta_data_offset == 0x344);
            CHECK(h.meta_data_size == 0xc);
            CHECK(h.num_sig_offset == 0x350);
            CHECK(h.header_offset == 0x354);
            CHECK(h.header_size == 0x24);
            CHECK(h.patch_loc == f.patch_loc);
            CHECK(h.patch_sig == 0);
            CHECK(h.num_sig == 2);
            CHECK(h.signature_size == 384);  // 0x300 / 2: one RSA-3K signature each
            REQUIRE(h.meta.has_value());
            CHECK(h.meta->fuse_ver == 1);
            CHECK(h.meta->engine_id == 1);
            CHECK(h.meta->ucode_id == f.ucode_id);
            CHECK(h.signatures.offset == 0x3c);
            CHECK(h.signatures.size() == 0x300);
            CHECK(h.signature(1).offset == 0x3c + 384);
            CHECK(h.signature(1).size() == 384);

            CHECK(h.os_code_offset == 0);
            CHECK(h.os_code_size == 0x100);
            CHECK(h.os_data_offset == f.os_data_offset);
            CHECK(h.os_data_size == f.os_data_size);
            CHECK(h.num_apps == 1);
            REQUIRE(h.apps.size() == 1);
            CHECK(h.apps[0].offset == 0x100);
            CHECK(h.apps[0].size == f.app0_size);
            // Regions are file offsets: data image start + offset in the image.
            CHECK(h.os_code.offset == 0x378);
            CHECK(h.os_code.size() == 0x100);
            CHECK(h.os_data.offset == 0x378 + f.os_data_offset);
            CHECK(h.os_data.size() == f.os_data_size);
            CHECK(h.apps[0].code.offset == 0x478);
            CHECK(h.apps[0].code.size() == f.app0_size);

            const auto d = nv::describe_file(file, file_name_of(f.path));
            REQUIRE(d.has_value());
            CHECK(d->format == "nvfw_bin_hdr + nvfw_hs_header_v2");
        }
    }
}

TEST_CASE("nvidia: bootloader nvfw_bin_hdr + RM_RISCV_UCODE_DESC fields", "[nvidia][firmware]") {
    for (const RiscvFile& f : kRiscvFiles) {
        DYNAMIC_SECTION(f.path) {
            auto bytes = firmware_file(f.path);
            if (!bytes) return;
            REQUIRE(bytes->size() == f.file_size);
            const auto file = reader_for(*bytes, file_name_of(f.path));
            const nv::RiscvUcodeDesc d = nv::parse_riscv_ucode_desc(file);

            CHECK(d.bin.bin_magic == 0x10de);
            CHECK(d.bin.bin_ver == 1);
            CHECK(d.bin.bin_size == f.bin_size);
            CHECK(d.bin.bin_size == f.data_size + 0x100);  // not the file size
            CHECK(d.bin.header_offset == 0x18);
            CHECK(d.bin.data_offset == 0x6c);  // 0x18 + 84: the descriptor fills the gap
            CHECK(d.bin.data_size == f.data_size);
            CHECK(d.bin.data.end() == f.file_size);

            const uint32_t* w = f.words;
            CHECK(d.version == w[0]);
            CHECK(d.bootloaderOffset == w[1]);
            CHECK(d.bootloaderSize == w[2]);
            CHECK(d.bootloaderParamOffset == w[3]);
            CHECK(d.bootloaderParamSize == w[4]);
            CHECK(d.riscvElfOffset == w[5]);
            CHECK(d.riscvElfSize == w[6]);
            CHECK(d.appVersion == w[7]);
            CHECK(d.manifestOffset == w[8]);
            CHECK(d.manifestSize == w[9]);
            CHECK(d.monitorDataOffset == w[10]);
            CHECK(d.monitorDataSize == w[11]);
            CHECK(d.monitorCodeOffset == w[12]);
            CHECK(d.monitorCodeSize == w[13]);
            CHECK(d.bIsMonitorEnabled == w[14]);
            CHECK(d.swbromCodeOffset == w[15]);
            CHECK(d.swbromCodeSize == w[16]);
            CHECK(d.swbromDataOffset == w[17]);
            CHECK(d.swbromDataSize == w[18]);
            REQUIRE(d.fbReservedSize.has_value());
            CHECK(*d.fbReservedSize == w[19]);
            REQUIRE(d.bSignedAsCode.has_value());
            CHECK(*d.bSignedAsCode == w[20]);

            CHECK(d.monitor_code.offset == 0x6c + w[12]);
            CHECK(d.monitor_code.size() == w[13]);
            CHECK(d.manifest.offset == 0x6c + w[8]);
            CHECK(d.bootloader.offset == 0x6c + w[1]);
            CHECK(d.bootloader.size() == w[2]);

            const auto desc = nv::describe_file(file, file_name_of(f.path));
            REQUIRE(desc.has_value());
            CHECK(desc->format == "nvfw_bin_hdr + RM_RISCV_UCODE_DESC");
        }
    }
}

TEST_CASE("nvidia: gb202 FMC ELF32 sections", "[nvidia][firmware]") {
    const std::string path = "nvidia/gb202/gsp/fmc-570.144.bin";
    auto bytes = firmware_file(path);
    if (!bytes) return;
    REQUIRE(bytes->size() == 199820);
    const auto file = reader_for(*bytes, file_name_of(path));
    const nv::FmcImage f = nv::parse_fmc_image(file);

    CHECK_FALSE(f.elf.is_64bit());
    CHECK(f.elf.e_shoff() == 0x34);  // right after the 52-byte Elf32_Ehdr
    CHECK(f.elf.e_shstrndx() == 1);
    REQUIRE(f.elf.sections().size() == 6);
    struct Want {
        const char* name;
        uint32_t type;
        uint64_t offset, size;
    };
    const Want want[] = {{"", 0, 0, 0},           {".shstrtab", 3, 0x124, 0x2a}, {"hash", 1, 0x150, 0x30},
                         {"signature", 1, 0x180, 0x60}, {"publickey", 1, 0x1e0, 0x61}, {"image", 1, 0x244, 0x30a48}};
    for (size_t i = 0; i < 6; ++i) {
        INFO("section " << i);
        CHECK(f.elf.sections()[i].name == want[i].name);
        CHECK(f.elf.sections()[i].type == want[i].type);
        CHECK(f.elf.sections()[i].region.offset == want[i].offset);
        CHECK(f.elf.sections()[i].region.size() == want[i].size);
    }
    CHECK(f.hash.offset == 0x150);
    CHECK(f.hash.size() == 0x30);
    CHECK(f.signature.offset == 0x180);
    CHECK(f.signature.size() == 0x60);
    CHECK(f.publickey.offset == 0x1e0);
    CHECK(f.publickey.size() == 0x61);
    CHECK(f.image.offset == 0x244);
    CHECK(f.image.size() == 0x30a48);
    CHECK(f.image.end() == 199820);  // the image is the last thing in the file

    const auto d = nv::describe_file(file, file_name_of(path));
    REQUIRE(d.has_value());
    CHECK(d->format == "FMC ELF32 image");
}

TEST_CASE("nvidia: describe_file claims only NVIDIA magics", "[nvidia][firmware]") {
    using baregpu::test::nv::Bytes;
    Bytes amd(64);
    amd.u32(0, 64).u32(4, 32);  // looks like an AMD common_firmware_header, not an NVIDIA format
    CHECK_FALSE(nv::describe_file(reader_for(amd.b, "psp.bin"), "psp.bin").has_value());
    Bytes tiny(1);
    CHECK_FALSE(nv::describe_file(reader_for(tiny.b, "x.bin"), "x.bin").has_value());
    std::vector<std::byte> empty;
    CHECK_FALSE(nv::describe_file(reader_for(empty, "x.bin"), "x.bin").has_value());
    // The magic alone is a claim: a bare nvfw_bin_hdr magic is a malformed NVIDIA file.
    Bytes bin(4);
    bin.u32(0, 0x10de);
    CHECK_THROWS_AS(nv::describe_file(reader_for(bin.b, "booter_load.bin"), "booter_load.bin"), baregpu::FirmwareError);
}

TEST_CASE("nvidia: every NVIDIA file in the firmware directory is checked above and describes", "[nvidia][firmware]") {
    const char* dir = std::getenv("BAREGPU_TEST_FIRMWARE_DIR");
    if (dir == nullptr || !std::filesystem::is_directory(std::filesystem::path(dir) / "nvidia")) {
        WARN("skipped: BAREGPU_TEST_FIRMWARE_DIR is not set or has no nvidia/ folder");
        return;
    }
    std::set<std::string> known;
    for (const HsFile& f : kHsFiles) known.insert(f.path);
    for (const RiscvFile& f : kRiscvFiles) known.insert(f.path);
    known.insert("nvidia/gb202/gsp/fmc-570.144.bin");
    size_t seen = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(std::filesystem::path(dir) / "nvidia")) {
        if (!entry.is_regular_file()) continue;
        const std::string rel = std::filesystem::relative(entry.path(), dir).string();
        INFO(rel);
        // A new file needs its hand-read values in one of the tables above.
        CHECK(known.count(rel) == 1);
        auto bytes = firmware_file(rel);
        if (!bytes) continue;
        CHECK(nv::describe_file(reader_for(*bytes, file_name_of(rel)), file_name_of(rel)).has_value());
        ++seen;
    }
    CHECK(seen == known.size());
}
