// libFuzzer targets for every firmware parser in one executable, the parser named by
// BAREGPU_FUZZ_PARSER (one link instead of nineteen: tests/firmware/fuzz/meson.build). Every input must
// give a FirmwareError or a parse whose regions all lie inside the input; ASan and UBSan (built in)
// catch any read outside it. How to run them: firmware-loader/README.md.
#include "base/error.hpp"
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
#include "firmware-loader/identify.hpp"
#include "firmware-loader/nvidia/bin_header.hpp"
#include "firmware-loader/nvidia/elf_image.hpp"
#include "firmware-loader/nvidia/hs_header.hpp"
#include "firmware-loader/nvidia/riscv_ucode_desc.hpp"
#include "firmware-loader/nvidia/vbios.hpp"
#include "firmware-loader/search_path.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace {

using namespace baregpu;
using namespace baregpu::fw;

const std::byte* g_begin;
const std::byte* g_end;

// A region a parser returns must be inside the input: a bounds check the parser forgot would
// show here even where ASan cannot see it (a view of a larger buffer).
void inside(const Region& r) {
    if (r.size() == 0) return;
    if (r.bytes.data() < g_begin || r.bytes.data() + r.size() > g_end) std::abort();
}

using Target = void (*)(const ByteReader&);

struct Parser {
    std::string_view name;
    Target run;
};

// Names as run_fuzzers.py and the corpus directories know them.
constexpr Parser kParsers[] = {
    {"psp_sos", [](const ByteReader& file) {
        for (const auto& b : amd::parse_psp_sos(file).binaries) inside(b.bytes);
    }},
    {"psp_ta", [](const ByteReader& file) {
        for (const auto& b : amd::parse_psp_ta(file).binaries) inside(b.bytes);
    }},
    {"psp_signed_binary", [](const ByteReader& file) {
        auto p = amd::parse_psp_signed_binary(file, file.region(0, file.size(), "input"));
        inside(p.header), inside(p.body), inside(p.signature);
    }},
    {"smc", [](const ByteReader& file) {
        auto fw = amd::parse_smc(file);
        inside(fw.code);
        for (const auto& p : fw.pptables) inside(p.bytes);
    }},
    {"gfx", [](const ByteReader& file) {
        auto fw = amd::parse_gfx(file);
        inside(fw.instructions);
        if (fw.data) inside(*fw.data);
        if (fw.jump_table) inside(*fw.jump_table);
    }},
    {"rlc", [](const ByteReader& file) {
        for (const auto& r : amd::parse_rlc(file).regions) inside(r.bytes);
    }},
    {"rlc_toc", [](const ByteReader& file) {
        (void)amd::parse_rlc_toc(file);
    }},
    {"mes", [](const ByteReader& file) {
        auto fw = amd::parse_mes(file);
        inside(fw.instructions), inside(fw.data);
    }},
    {"imu", [](const ByteReader& file) {
        auto fw = amd::parse_imu(file);
        inside(fw.iram), inside(fw.dram);
    }},
    {"sdma", [](const ByteReader& file) {
        auto fw = amd::parse_sdma(file);
        inside(fw.ucode);
        if (fw.ctl_ucode) inside(*fw.ctl_ucode);
    }},
    {"discovery", [](const ByteReader& file) {
        inside(amd::parse_discovery(file).ip_table);
    }},
    {"nv_elf", [](const ByteReader& file) {
        (void)nv::parse_gsp_image(file);
    }},
    {"nv_fmc", [](const ByteReader& file) {
        (void)nv::parse_fmc_image(file);
    }},
    {"nv_bin_header", [](const ByteReader& file) {
        (void)nv::parse_bin_header(file);
    }},
    {"nv_hs_header", [](const ByteReader& file) {
        (void)nv::parse_hs_header_v2(file);
    }},
    {"nv_riscv_desc", [](const ByteReader& file) {
        (void)nv::parse_riscv_ucode_desc(file);
    }},
    {"nv_vbios", [](const ByteReader& file) {
        (void)nv::parse_vbios(file);
    }},
    {"describe", [](const ByteReader& file) {
        // The fwinfo path: the first byte picks which linux-firmware name the rest is read as.
        static const char* const kNames[] = {"psp_13_0_0_sos.bin", "psp_13_0_0_ta.bin", "smu_13_0_0.bin",
                                             "gc_11_0_0_mec.bin",  "gc_11_0_0_rlc.bin", "gc_12_0_1_toc.bin",
                                             "gc_11_0_0_mes1.bin", "gc_11_0_0_imu.bin", "sdma_6_0_0.bin",
                                             "vega10_ip_discovery.bin", "booter_load-570.144.bin",
                                             "bootloader-570.144.bin", "fmc-570.144.bin", "vbios.rom"};
        if (file.size() == 0) return;
        ByteReader rest(file.data().subspan(1), "input");
        (void)describe_firmware(rest, kNames[static_cast<uint8_t>(file.data()[0]) % std::size(kNames)]);
    }},
    {"decompress", [](const ByteReader& file) {
        (void)decompress(std::vector<std::byte>(file.data().begin(), file.data().end()), "input");
    }},
};

Target g_target;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const char* name = std::getenv("BAREGPU_FUZZ_PARSER");
    for (const Parser& p : kParsers) {
        if (name != nullptr && p.name == name) g_target = p.run;
    }
    if (g_target == nullptr) {
        std::fprintf(stderr, "fuzz_firmware: BAREGPU_FUZZ_PARSER is %s%s%s; one of:", name ? "'" : "", name ? name : "not set",
                name ? "', no parser of that name" : "");
        for (const Parser& p : kParsers) std::fprintf(stderr, " %.*s", static_cast<int>(p.name.size()), p.name.data());
        std::fprintf(stderr, "\n");
        std::exit(2);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto bytes = reinterpret_cast<const std::byte*>(data);
    g_begin = bytes;
    g_end = bytes + size;
    try {
        g_target(ByteReader({bytes, size}, "input"));
    } catch (const FirmwareError&) {
    }
    return 0;
}
