// libFuzzer targets for every firmware parser, one executable per parser: this file is compiled
// once per target with -DBAREGPU_FUZZ_<NAME> (tests/firmware/fuzz/meson.build). Every input must
// give a FirmwareError or a parse whose regions all lie inside the input; ASan and UBSan (built in)
// catch any read outside it. How to run them: tests/firmware/fuzz/README.md.
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
#include <cstdlib>
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

void run(const ByteReader& file) {
#if defined(BAREGPU_FUZZ_PSP_SOS)
    for (const auto& b : amd::parse_psp_sos(file).binaries) inside(b.bytes);
#elif defined(BAREGPU_FUZZ_PSP_TA)
    for (const auto& b : amd::parse_psp_ta(file).binaries) inside(b.bytes);
#elif defined(BAREGPU_FUZZ_PSP_SIGNED_BINARY)
    auto p = amd::parse_psp_signed_binary(file, file.region(0, file.size(), "input"));
    inside(p.header), inside(p.body), inside(p.signature);
#elif defined(BAREGPU_FUZZ_SMC)
    auto fw = amd::parse_smc(file);
    inside(fw.code);
    for (const auto& p : fw.pptables) inside(p.bytes);
#elif defined(BAREGPU_FUZZ_GFX)
    auto fw = amd::parse_gfx(file);
    inside(fw.instructions);
    if (fw.data) inside(*fw.data);
    if (fw.jump_table) inside(*fw.jump_table);
#elif defined(BAREGPU_FUZZ_RLC)
    for (const auto& r : amd::parse_rlc(file).regions) inside(r.bytes);
#elif defined(BAREGPU_FUZZ_RLC_TOC)
    (void)amd::parse_rlc_toc(file);
#elif defined(BAREGPU_FUZZ_MES)
    auto fw = amd::parse_mes(file);
    inside(fw.instructions), inside(fw.data);
#elif defined(BAREGPU_FUZZ_IMU)
    auto fw = amd::parse_imu(file);
    inside(fw.iram), inside(fw.dram);
#elif defined(BAREGPU_FUZZ_SDMA)
    auto fw = amd::parse_sdma(file);
    inside(fw.ucode);
    if (fw.ctl_ucode) inside(*fw.ctl_ucode);
#elif defined(BAREGPU_FUZZ_DISCOVERY)
    inside(amd::parse_discovery(file).ip_table);
#elif defined(BAREGPU_FUZZ_NV_ELF)
    (void)nv::parse_gsp_image(file);
#elif defined(BAREGPU_FUZZ_NV_FMC)
    (void)nv::parse_fmc_image(file);
#elif defined(BAREGPU_FUZZ_NV_BIN_HEADER)
    (void)nv::parse_bin_header(file);
#elif defined(BAREGPU_FUZZ_NV_HS_HEADER)
    (void)nv::parse_hs_header_v2(file);
#elif defined(BAREGPU_FUZZ_NV_RISCV_DESC)
    (void)nv::parse_riscv_ucode_desc(file);
#elif defined(BAREGPU_FUZZ_NV_VBIOS)
    (void)nv::parse_vbios(file);
#elif defined(BAREGPU_FUZZ_DESCRIBE)
    // The fwinfo path: the first byte picks which linux-firmware name the rest is read as.
    static const char* const kNames[] = {"psp_13_0_0_sos.bin", "psp_13_0_0_ta.bin", "smu_13_0_0.bin",
                                         "gc_11_0_0_mec.bin",  "gc_11_0_0_rlc.bin", "gc_12_0_1_toc.bin",
                                         "gc_11_0_0_mes1.bin", "gc_11_0_0_imu.bin", "sdma_6_0_0.bin",
                                         "vega10_ip_discovery.bin", "booter_load-570.144.bin",
                                         "bootloader-570.144.bin", "fmc-570.144.bin", "vbios.rom"};
    if (file.size() == 0) return;
    ByteReader rest(file.data().subspan(1), "input");
    (void)describe_firmware(rest, kNames[static_cast<uint8_t>(file.data()[0]) % std::size(kNames)]);
#elif defined(BAREGPU_FUZZ_DECOMPRESS)
    (void)decompress(std::vector<std::byte>(file.data().begin(), file.data().end()), "input");
#else
#error "define one BAREGPU_FUZZ_<PARSER>"
#endif
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto bytes = reinterpret_cast<const std::byte*>(data);
    g_begin = bytes;
    g_end = bytes + size;
    try {
        run(ByteReader({bytes, size}, "input"));
    } catch (const FirmwareError&) {
    }
    return 0;
}
