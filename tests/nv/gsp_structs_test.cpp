// Byte layouts the GSP boot hands to firmware, checked against offsets re-typed from the public
// headers (open-gpu-kernel-modules 570.144): gsp_fw_wpr_meta.h (GspFwWprMeta), libos_init_args.h /
// gsp_init_args.h (LibOS regions, GSP_ARGUMENTS_CACHED), kernel_gsp.c (radix3), kernel_gsp_frts_tu102.c
// (FWSEC DMEMMAPPER and FWSECLIC_FRTS_CMD), kern_fsp_cot_payload.h / fsp_mctp_format.h (FSP COT).
#include "drivers/nv/fsp_cot.hpp"
#include "drivers/nv/fwsec.hpp"
#include "drivers/nv/libos_args.hpp"
#include "drivers/nv/radix3.hpp"
#include "drivers/nv/wpr_meta.hpp"
#include "drivers/sim/nvgpu/vbios_image.hpp"
#include "firmware-loader/nvidia/vbios.hpp"

#include "base/error.hpp"

#include <catch2/catch.hpp>

#include <cstring>

namespace gsp_structs_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;

namespace {
template <typename T>
T at(std::span<const std::byte> b, size_t off) {
    T v;
    std::memcpy(&v, b.data() + off, sizeof(T));
    return v;
}
}  // namespace

TEST_CASE("GspFwWprMeta encodes every field at its gsp_fw_wpr_meta.h offset", "[nv][wpr-meta]") {
    nv::GspFwWprMeta m;
    m.sysmemAddrOfRadix3Elf = 0x1111, m.sizeOfRadix3Elf = 0x2222, m.sysmemAddrOfBootloader = 0x3333;
    m.sizeOfBootloader = 0x4444, m.bootloaderManifestOffset = 0x5555, m.sysmemAddrOfSignature = 0x6666;
    m.sizeOfSignature = 0x7777, m.gspFwWprStart = 0x8888, m.frtsOffset = 0x9999, m.fbSize = 0xaaaa;
    m.vgaWorkspaceSize = 0xbbbb, m.bootCount = 0xcccc;
    const auto e = m.encode();
    const std::span<const std::byte> b(e);
    CHECK(e.size() == 256);
    CHECK(at<uint64_t>(b, 0) == 0xdc3aae21371a60b3ull);
    CHECK(at<uint64_t>(b, 8) == 1);
    CHECK(at<uint64_t>(b, 16) == 0x1111);
    CHECK(at<uint64_t>(b, 24) == 0x2222);
    CHECK(at<uint64_t>(b, 32) == 0x3333);
    CHECK(at<uint64_t>(b, 40) == 0x4444);
    CHECK(at<uint64_t>(b, 64) == 0x5555);
    CHECK(at<uint64_t>(b, 72) == 0x6666);  // the first-boot union's sysmemAddrOfSignature
    CHECK(at<uint64_t>(b, 80) == 0x7777);
    CHECK(at<uint64_t>(b, 112) == 0x8888);
    CHECK(at<uint64_t>(b, 152) == 0x9999);
    CHECK(at<uint64_t>(b, 176) == 0xaaaa);
    CHECK(at<uint64_t>(b, 192) == 0xbbbb);
    CHECK(at<uint64_t>(b, 200) == 0xcccc);
    CHECK(at<uint64_t>(b, 248) == 0);  // verified: the booter's to set
}

TEST_CASE("the Ada WPR layout is top-down, aligned, and agrees with FWSEC-FRTS", "[nv][wpr-meta]") {
    for (uint64_t fb : {uint64_t{512} << 20, uint64_t{24} << 30}) {
        nv::GspFwWprMeta m;
        nv::layout_ada(m, fb, 0x9000, 0x3000000);
        CHECK(m.vgaWorkspaceOffset == fb - (1u << 20));
        CHECK(m.frtsOffset == fb - (2u << 20));
        CHECK(m.frtsSize == (1u << 20));
        CHECK(m.bootBinOffset + m.sizeOfBootloader <= m.frtsOffset);
        CHECK(m.gspFwOffset % 0x10000 == 0);
        CHECK(m.gspFwOffset + m.sizeOfRadix3Elf <= m.bootBinOffset);
        CHECK(m.gspFwHeapOffset % (1u << 20) == 0);
        CHECK(m.gspFwHeapOffset + m.gspFwHeapSize <= m.gspFwOffset);
        CHECK(m.gspFwWprStart % (1u << 20) == 0);
        CHECK(m.gspFwWprStart + 0x1000 <= m.gspFwHeapOffset);
        CHECK(m.nonWprHeapOffset + m.nonWprHeapSize == m.gspFwWprStart);
        CHECK(m.gspFwWprEnd == m.frtsOffset + m.frtsSize);  // FRTS at the top of WPR (kernel_gsp_tu102.c)
    }
    nv::GspFwWprMeta small;
    REQUIRE_THROWS_AS(nv::layout_ada(small, 64u << 20, 0x9000, 0x3000000), Error);
}

TEST_CASE("radix3 has three levels of bus addresses over the image's pages", "[nv][radix3]") {
    // 600 data pages: level 2 needs 2 pages, level 1 one, level 0 one.
    const uint64_t image_bytes = 600 * 0x1000 - 100;
    CHECK(nv::radix3_bytes(image_bytes) == (1 + 1 + 2 + 600) * 0x1000);
    std::vector<std::byte> image(image_bytes);
    for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<std::byte>(i * 13);
    std::vector<std::byte> mem(0x1000 + nv::radix3_bytes(image_bytes));
    const uint64_t base = 0x40000000;
    pci::DmaBuffer buf("test", mem, pci::PageSize::k4K, {BusAddress{base}}, [] {});
    const BusAddress l0 = nv::write_radix3(buf, 0x1000, image);
    CHECK(l0.value() == base + 0x1000);
    const std::span<const std::byte> m(mem);
    CHECK(at<uint64_t>(m, 0x1000) == base + 0x2000);       // level 0 -> level 1 page
    CHECK(at<uint64_t>(m, 0x1000 + 8) == 0);
    CHECK(at<uint64_t>(m, 0x2000) == base + 0x3000);       // level 1 -> the two level-2 pages
    CHECK(at<uint64_t>(m, 0x2008) == base + 0x4000);
    CHECK(at<uint64_t>(m, 0x3000) == base + 0x5000);       // level 2 -> data page 0
    CHECK(at<uint64_t>(m, 0x3000 + 599 * 8) == base + 0x5000 + 599 * 0x1000);
    CHECK(std::memcmp(mem.data() + 0x5000, image.data(), image.size()) == 0);
}

TEST_CASE("LibOS regions and RMARGS at their libos_init_args.h / gsp_init_args.h offsets", "[nv][libos]") {
    CHECK(nv::libos_id8("RMARGS") == 0x524d41524753ull);  // ASCII, big-endian packed
    std::vector<std::byte> out(0x1000, std::byte{0xff});
    const nv::LibosRegion r[] = {{"LOGINIT", 0x1000, 0x10000}, {"RMARGS", 0x2000, 0x1000}};
    nv::encode_libos_args(out, r);
    const std::span<const std::byte> b(out);
    CHECK(at<uint64_t>(b, 32) == nv::libos_id8("RMARGS"));
    CHECK(at<uint64_t>(b, 40) == 0x2000);
    CHECK(at<uint64_t>(b, 48) == 0x1000);
    CHECK(at<uint8_t>(b, 56) == 1);  // LIBOS_MEMORY_REGION_CONTIGUOUS
    CHECK(at<uint8_t>(b, 57) == 1);  // LIBOS_MEMORY_REGION_LOC_SYSMEM
    CHECK(at<uint64_t>(b, 64) == 0);  // the list ends
    std::vector<std::byte> rm(0x1000);
    nv::encode_gsp_arguments_cached(rm, {0xabc000, 129, 0x1000, 0x41000});
    const std::span<const std::byte> a(rm);
    CHECK(at<uint64_t>(a, 0) == 0xabc000);
    CHECK(at<uint32_t>(a, 8) == 129);
    CHECK(at<uint64_t>(a, 16) == 0x1000);
    CHECK(at<uint64_t>(a, 24) == 0x41000);
    CHECK(at<uint8_t>(a, 48) == 1);  // bDmemStack
    CHECK(nv::queue_page_list_bytes(0x80000) == 0x1000);  // 128 queue pages + 1 list page fit one page of entries
}

TEST_CASE("FWSEC-FRTS patching writes the FRTS command into a copy of DMEM", "[nv][fwsec]") {
    const auto rom = sim::nvgpu::make_vbios(0x2684);
    const fw::nv::Vbios vb = fw::nv::parse_vbios(fw::ByteReader(rom.rom, "vbios"));
    const uint64_t fb = uint64_t{24} << 30;
    const nv::FwsecFrts f = nv::prepare_fwsec_frts(vb, fb, "vbios");
    const std::span<const std::byte> d(f.dmem);
    CHECK(f.frts_offset == fb - (2u << 20));
    CHECK(at<uint32_t>(d, rom.dmem_mapper_offset + 44) == 0x15);  // init_cmd = FRTS
    const size_t c = rom.cmd_in_buffer_offset;
    CHECK(at<uint32_t>(d, c) == 1);
    CHECK(at<uint32_t>(d, c + 4) == 24);
    CHECK(at<uint32_t>(d, c + 20) == 2);                           // FWSECLIC_READ_VBIOS_STRUCT_FLAGS
    CHECK(at<uint32_t>(d, c + 24) == 1);
    CHECK(at<uint32_t>(d, c + 28) == 20);
    CHECK(at<uint32_t>(d, c + 32) == static_cast<uint32_t>(f.frts_offset >> 12));
    CHECK(at<uint32_t>(d, c + 36) == 0x100);                       // 1 MiB in 4 KiB
    CHECK(at<uint32_t>(d, c + 40) == 2);                           // FWSECLIC_FRTS_REGION_MEDIA_FB
    CHECK(std::memcmp(f.dmem.data() + rom.pkc_data_offset, rom.signature().data(), 384) == 0);
    CHECK(rom.dmem()[rom.dmem_mapper_offset + 44] == std::byte{0});  // the ROM itself untouched

    // No DMEMMAPPER entry: a FirmwareError naming it.
    auto broken = rom;
    broken.rom[rom.dmem_offset + rom.interface_offset + 12] = std::byte{0x7};  // entry id 4 -> 7
    const fw::nv::Vbios vb2 = fw::nv::parse_vbios(fw::ByteReader(broken.rom, "vbios"));
    REQUIRE_THROWS_MATCHES(nv::prepare_fwsec_frts(vb2, fb, "vbios"), FirmwareError,
                           Catch::Matchers::Predicate<FirmwareError>([](const FirmwareError& e) {
                               return e.field().find("DMEMMAPPER") != std::string::npos;
                           }, "names DMEMMAPPER"));
}

TEST_CASE("the FSP COT message has the MCTP/NVDM headers and NVDM_PAYLOAD_COT offsets", "[nv][fsp-cot]") {
    std::vector<std::byte> hash(48, std::byte{0x11}), key(384, std::byte{0x22}), sig(384, std::byte{0x33});
    nv::FspCotPayload p;
    p.gsp_fmc_sysmem_offset = 0x1000000, p.frts_vidmem_offset = 0x1c00000, p.frts_vidmem_size = 0x100000;
    p.hash384 = hash, p.public_key = key, p.signature = sig, p.gsp_boot_args_sysmem_offset = 0x2000000;
    const auto m = nv::encode_fsp_cot_message(p);
    const std::span<const std::byte> b(m);
    CHECK(m.size() == 868);
    CHECK(at<uint32_t>(b, 0) == 0xc0000000u);                  // SOM | EOM
    CHECK(at<uint32_t>(b, 4) == (0x7eu | 0x10deu << 8 | 0x14u << 24));
    CHECK(at<uint16_t>(b, 8) == 2);
    CHECK(at<uint16_t>(b, 10) == 860);
    CHECK(at<uint64_t>(b, 8 + 4) == 0x1000000);
    CHECK(at<uint64_t>(b, 8 + 24) == 0x1c00000);
    CHECK(at<uint32_t>(b, 8 + 32) == 0x100000);
    CHECK(b[8 + 36] == std::byte{0x11});
    CHECK(b[8 + 83] == std::byte{0x11});
    CHECK(b[8 + 84] == std::byte{0x22});
    CHECK(b[8 + 468] == std::byte{0x33});
    CHECK(at<uint64_t>(b, 8 + 852) == 0x2000000);
    p.hash384 = std::span(hash).first(47);
    REQUIRE_THROWS_AS(nv::encode_fsp_cot_message(p), Error);
}

}  // namespace gsp_structs_test
