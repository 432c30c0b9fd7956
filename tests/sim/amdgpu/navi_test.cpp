// The simulated Navi31/Navi48 (drivers/sim/amdgpu) driven with raw register sequences: the Linux
// bring-up with the real firmware produces zero violations, and each protocol mistake is refused
// the way the chip or its firmware refuses it.
#include "rig.hpp"

#include "firmware-loader/amd/psp.hpp"
#include "firmware-loader/amd/rlc.hpp"
#include "firmware-loader/amd/smc.hpp"

#include <catch2/catch.hpp>
#include <cstdio>
#include <sys/stat.h>

namespace navi_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::test::sim_am;
using baregpu::sim::amdgpu::VmClient;
using namespace std::chrono_literals;

namespace {

std::vector<std::byte> sos_component(Asic asic, fw::amd::PspFwType type) {
    auto bytes = firmware(asic == Asic::navi31 ? "psp_13_0_0_sos.bin" : "psp_14_0_3_sos.bin");
    auto sos = fw::amd::parse_psp_sos(fw::ByteReader(bytes, "sos"));
    auto span = sos.find(type)->bytes.bytes;
    return {span.begin(), span.end()};
}

std::vector<std::byte> smu_code(Asic asic) {
    auto bytes = firmware(asic == Asic::navi31 ? "smu_13_0_0.bin" : "smu_14_0_3.bin");
    auto span = fw::amd::parse_smc(fw::ByteReader(bytes, "smu")).code.bytes;
    return {span.begin(), span.end()};
}

// Bootloader + ring + the SMU firmware: the SMU answers.
void boot_to_smu(Rig& rig) {
    rig.bootloader_load_all();
    rig.ring_create();
    uint32_t tmr = 0;
    REQUIRE(rig.load_toc(&tmr) == 0);
    REQUIRE(rig.load_ip_fw(18, smu_code(rig.asic)) == 0);
}

uint16_t u16_at(const std::vector<std::byte>& b, size_t at) {
    uint16_t v = 0;
    std::memcpy(&v, b.data() + at, 2);
    return v;
}
uint32_t u32_at(const std::vector<std::byte>& b, size_t at) {
    uint32_t v = 0;
    std::memcpy(&v, b.data() + at, 4);
    return v;
}

}  // namespace

TEST_CASE("sim-am: discovery round-trips through parse_discovery with the contract's versions and bases", "[sim-am]") {
    for (Asic asic : {Asic::navi31, Asic::navi48}) {
        TempDir dir;
        Rig rig(asic, dir.path, /*with_firmware=*/false);
        const fw::amd::Discovery& d = rig.disc;
        CHECK(d.version_major == 2);
        CHECK(d.table_version == 4);
        REQUIRE(d.dies.size() == 1);
        auto version = [&](uint16_t hw_id) {
            const auto* ip = d.find(hw_id);
            return ip ? ip->version() : std::string("missing");
        };
        if (asic == Asic::navi31) {
            CHECK(version(11) == "11.0.0");
            CHECK(version(42) == "6.0.0");
            CHECK(version(43) == "6.0.0");
            CHECK(version(255) == "13.0.0");
            CHECK(version(1) == "13.0.0");
            CHECK(version(34) == "3.0.0");
            CHECK(version(108) == "4.3.0");
            CHECK(version(41) == "6.0.0");
            CHECK(version(40) == "6.0.0");
        } else {
            CHECK(version(11) == "12.0.1");
            CHECK(version(42) == "7.0.1");
            CHECK(version(255) == "14.0.3");
            CHECK(version(1) == "14.0.3");
            CHECK(version(34) == "4.1.0");
            CHECK(version(108) == "6.3.1");
            CHECK(version(41) == "7.0.0");
            CHECK(version(40) == "7.0.0");
        }
        // sienna_cichlid_ip_offset.h bases.
        CHECK(d.find(11)->base_addresses[0] == 0x1260);
        CHECK(d.find(11)->base_addresses[1] == 0xA000);
        CHECK(d.find(34)->base_addresses[0] == 0x1A000);
        CHECK(d.find(255)->base_addresses[0] == 0x16000);
        CHECK(d.find(40)->base_addresses[0] == 0x10A0);
        // firmware-loader decodes the harvest and GC tables too (checksums, signatures).
        CHECK(d.has_harvest_table);
        CHECK(d.harvested.empty());
        REQUIRE(d.gc_info.has_value());
        CHECK(d.gc_info->compute_units() == (asic == Asic::navi31 ? 96u : 64u));
        CHECK(d.gc_info->wave_size == 32);
        // The GC table (gc_info_v1_2) and the harvest table, located through table_list.
        const auto& b = rig.discovery_bytes;
        const uint16_t gc = u16_at(b, 16 + 8 * 1);
        CHECK(u32_at(b, gc) == 0x4347);
        CHECK(u16_at(b, gc + 4) == 1);
        CHECK(u32_at(b, gc + 12) == (asic == Asic::navi31 ? 6u : 4u));  // gc_num_se
        CHECK(u32_at(b, gc + 56) == 32);                                // gc_wave_size
        CHECK(u32_at(b, gc + 68) == 64);                                // gc_lds_size
        const uint16_t harvest = u16_at(b, 16 + 8 * 2);
        CHECK(u32_at(b, harvest) == 0x56524148);
        // Table checksums: byte sums over each table.
        for (unsigned t : {1u, 2u}) {
            uint16_t off = u16_at(b, 16 + 8 * t), sum = u16_at(b, 16 + 8 * t + 2), size = u16_at(b, 16 + 8 * t + 4);
            uint32_t s = 0;
            for (size_t i = off; i < size_t{off} + size; ++i) s += static_cast<uint8_t>(b[i]);
            CHECK(static_cast<uint16_t>(s) == sum);
        }
        // The frame buffer: fb_base 0x80_0000_0000, 1 GiB.
        CHECK(rig.rd(rig.r.mm_fb_base) == 0x8000);
        CHECK(rig.rd(rig.r.mm_fb_top) == 0x803F);
        CHECK(rig.violations() == 0);
    }
}

TEST_CASE("sim-am: the Linux bring-up with the real firmware produces zero violations", "[sim-am]") {
    REQUIRE_AMD_FIRMWARE();
    for (Asic asic : {Asic::navi31, Asic::navi48}) {
        INFO(baregpu::sim::amdgpu::to_string(asic));
        TempDir dir;
        Rig rig(asic, dir.path);
        // Power-on: bootloader ready, no sOS, GC not booted, SMU silent.
        CHECK((rig.rd(rig.r.psp_35) & 0x80000000u) != 0);
        CHECK(rig.rd(rig.r.psp_81) == 0);
        CHECK(rig.rd(rig.r.scratch_reg7) == 0);
        CHECK((rig.rd(rig.r.rlc_bootload_status) & 0x80000000u) == 0);
        CHECK(rig.smu_send(0x2, 0, nullptr, 100) == 0);  // GetSmuVersion: nobody answers
        rig.bootloader_load_all();
        rig.ring_create();
        rig.load_all_ip_firmware();
        // SMU (before the GC waits for its autoload, as amdgpu_discovery.c orders the blocks):
        // version, driver table, features, metrics, DPM.
        uint32_t out = 0;
        CHECK(rig.smu_send(0x2, 0, &out) == 1);
        CHECK(out != 0);
        const uint64_t table = Rig::kFw + (8u << 20);
        CHECK(rig.smu_send(0xE, static_cast<uint32_t>(rig.mc(table) >> 32)) == 1);
        CHECK(rig.smu_send(0xF, static_cast<uint32_t>(rig.mc(table))) == 1);
        CHECK(rig.smu_send(0x6, 0) == 1);
        // gfx_v11_0_wait_for_rlc_autoload_complete: CP_STAT == 0 and BOOTLOAD_COMPLETE.
        CHECK(rig.rd(rig.r.cp_stat) == 0);
        CHECK((rig.rd(rig.r.rlc_bootload_status) & 0x80000000u) != 0);
        CHECK(rig.smu_send(0x12, 5) == 1);  // TransferTableSmu2Dram(TABLE_SMU_METRICS)
        // AvgTemperature[TEMP_EDGE] (smu13_driver_if_v13_0_0.h +120, smu14_driver_if_v14_0.h +140).
        const uint32_t temp_at = asic == Asic::navi31 ? 120 : 140;
        uint16_t edge = static_cast<uint16_t>(rig.vram32(table + temp_at) & 0xffff);
        CHECK(edge > 20);
        CHECK(edge < 110);
        uint32_t levels = 0;
        CHECK(rig.smu_send(0x1F, (0u << 16) | 0xff, &levels) == 1);  // GetDpmFreqByIndex(GFXCLK, count)
        CHECK(levels >= 2);
        uint32_t max_mhz = 0;
        CHECK(rig.smu_send(0x1F, (0u << 16) | (levels - 1), &max_mhz) == 1);
        CHECK(rig.smu_send(0x19, (0u << 16) | max_mhz) == 1);
        CHECK(rig.smu_send(0x1A, (0u << 16) | max_mhz) == 1);
        INFO(rig.violation_text());
        CHECK(rig.violations() == 0);
    }
}

TEST_CASE("sim-am: bootloader refuses commands while busy, out of order, and other chips' blobs", "[sim-am]") {
    REQUIRE_AMD_FIRMWARE();
    SECTION("command while C2PMSG_35 bit 31 is clear") {
        TempDir dir;
        Rig rig(Asic::navi31, dir.path);
        auto kdb = sos_component(Asic::navi31, fw::amd::PspFwType::kdb);
        rig.vram_write(Rig::kMsg1, kdb);
        rig.wr(rig.r.psp_36, static_cast<uint32_t>(rig.mc(Rig::kMsg1) >> 20));
        rig.wr(rig.r.psp_35, 0x80000);
        CHECK((rig.rd(rig.r.psp_35) & 0x80000000u) == 0);  // working
        rig.wr(rig.r.psp_35, 0x10000000);                   // no wait
        CHECK(rig.has_violation("bit 31 is clear"));
    }
    SECTION("wrong component order") {
        TempDir dir;
        Rig rig(Asic::navi31, dir.path);
        CHECK_FALSE(rig.bootloader_load(0x10000, sos_component(Asic::navi31, fw::amd::PspFwType::sys_drv)));
        CHECK(rig.has_violation("KDB comes next"));
        CHECK((rig.rd(rig.r.psp_35) & 0xffff) != 0);
    }
    SECTION("navi48's sOS given to navi31 never runs") {
        TempDir dir;
        Rig rig(Asic::navi31, dir.path);
        using T = fw::amd::PspFwType;
        REQUIRE(rig.bootloader_load(0x80000, sos_component(Asic::navi31, T::kdb)));
        REQUIRE(rig.bootloader_load(0x10000000, sos_component(Asic::navi31, T::spl)));
        REQUIRE(rig.bootloader_load(0x10000, sos_component(Asic::navi31, T::sys_drv)));
        CHECK_FALSE(rig.bootloader_load(0x20000, sos_component(Asic::navi48, T::sos)));
        rig.dev->delay(200ms);
        CHECK(rig.rd(rig.r.psp_81) == 0);
        // The right one still works afterwards.
        CHECK(rig.bootloader_load(0x20000, sos_component(Asic::navi31, T::sos)));
        CHECK(rig.wait([&] { return rig.rd(rig.r.psp_81) != 0; }));
        CHECK(rig.violations() == 0);
    }
    SECTION("a corrupted component is refused") {
        TempDir dir;
        Rig rig(Asic::navi48, dir.path);
        auto kdb = sos_component(Asic::navi48, fw::amd::PspFwType::kdb);
        kdb[kdb.size() / 2] ^= std::byte{0x40};
        CHECK_FALSE(rig.bootloader_load(0x80000, kdb));
    }
}

TEST_CASE("sim-am: PSP ring protocol violations and command errors", "[sim-am]") {
    REQUIRE_AMD_FIRMWARE();
    SECTION("ring command before the sOS, submit with no ring, bad write pointer") {
        TempDir dir;
        Rig rig(Asic::navi31, dir.path);
        rig.wr(rig.r.psp_64, 2u << 16);
        CHECK(rig.has_violation("before the sOS runs"));
        rig.bus->clear_violations();
        rig.bootloader_load_all();
        rig.wr(rig.r.psp_67, 16);
        CHECK(rig.has_violation("with no ring"));
        rig.bus->clear_violations();
        rig.ring_create();
        rig.wr(rig.r.psp_67, 8);  // not + 16
        CHECK(rig.has_violation("not the previous one"));
        // A second create without DESTROY_RINGS.
        rig.bus->clear_violations();
        rig.wr(rig.r.psp_64, 2u << 16);
        CHECK(rig.has_violation("while one exists"));
        CHECK(rig.wait([&] { return (rig.rd(rig.r.psp_64) & 0x80000000u) != 0; }));
        CHECK((rig.rd(rig.r.psp_64) & 0xffff) != 0);
    }
    SECTION("component order: SMU first, TMR before IP firmware (MP0 13.0.0), AUTOLOAD last") {
        TempDir dir;
        Rig rig(Asic::navi31, dir.path);
        rig.bootloader_load_all();
        rig.ring_create();
        uint32_t tmr = 0;
        REQUIRE(rig.load_toc(&tmr) == 0);
        CHECK(rig.setup_tmr(tmr) == 0xFFFF0007u);
        CHECK(rig.has_violation("SETUP_TMR before the SMU firmware"));
        auto bytes = firmware("gc_11_0_0_imu.bin");
        std::vector<std::byte> some(bytes.begin() + 256, bytes.begin() + 1280);
        CHECK(rig.load_ip_fw(68, some) == 0xFFFF0007u);
        CHECK(rig.has_violation("before the SMU firmware (type 18)"));
        REQUIRE(rig.load_ip_fw(18, smu_code(Asic::navi31)) == 0);
        rig.bus->clear_violations();
        CHECK(rig.load_ip_fw(68, some) == 0xFFFF0007u);
        CHECK(rig.has_violation("before SETUP_TMR"));
        CHECK(rig.setup_tmr(tmr - 0x100000) == 0xFFFF0006u);  // smaller than LOAD_TOC's tmr_size
        REQUIRE(rig.setup_tmr(tmr) == 0);
        rig.bus->clear_violations();
        CHECK(rig.autoload_rlc() == 0xFFFF0007u);
        CHECK(rig.has_violation("AUTOLOAD_RLC before firmware types"));
        CHECK((rig.rd(rig.r.rlc_bootload_status) & 0x80000000u) == 0);
    }
    SECTION("wrong, truncated and corrupted IP firmware get an error status, not a violation") {
        TempDir dir;
        Rig rig(Asic::navi48, dir.path);
        rig.bootloader_load_all();
        rig.ring_create();
        uint32_t tmr = 0;
        REQUIRE(rig.load_toc(&tmr) == 0);
        auto smu = smu_code(Asic::navi48);
        auto truncated = std::vector<std::byte>(smu.begin(), smu.end() - 4096);
        CHECK(rig.load_ip_fw(18, truncated) == 0xFFFF000Fu);
        auto corrupted = smu;
        corrupted[1000] ^= std::byte{1};
        CHECK(rig.load_ip_fw(18, corrupted) == 0xFFFF000Fu);
        CHECK(rig.load_ip_fw(18, smu_code(Asic::navi31)) == 0xFFFF000Fu);  // navi31's SMU firmware
        CHECK(rig.violations() == 0);
        CHECK(rig.smu_send(0x2, 0, nullptr, 50) == 0);  // the SMU did not start
        CHECK(rig.load_ip_fw(18, smu) == 0);
        CHECK(rig.smu_send(0x2, 0) == 1);
        // SETUP_TMR is not for MP0 14.0.3 (boot-time TMR).
        CHECK(rig.setup_tmr(tmr) == 0xFFFF0007u);
        CHECK(rig.has_violation("set up at boot"));
    }
    SECTION("inject_psp_error answers the next command of that id") {
        TempDir dir;
        Rig rig(Asic::navi31, dir.path);
        rig.bootloader_load_all();
        rig.ring_create();
        rig.model->inject_psp_error(0x20, 0xFFFF0000u);
        uint32_t tmr = 0;
        CHECK(rig.load_toc(&tmr) == 0xFFFF0000u);
        CHECK(rig.load_toc(&tmr) == 0);
        CHECK(tmr != 0);
    }
}

TEST_CASE("sim-am: AUTOLOAD_RLC needs every piece the ASIC's RLC file carries", "[sim-am]") {
    REQUIRE_AMD_FIRMWARE();
    // gc_11_0_0_rlc.bin is rlc_firmware_header v2.3 (lists, IRAM/DRAM, RLCP/RLCV); gc_12_0_1_rlc.bin
    // v2.2 (lists, IRAM/DRAM); both have an empty save_restore_list_cntl, which is not loaded (Linux
    // skips ucode_size 0) and not required. psp_gfx_if.h: RLC_IRAM 26, RLC_DRAM_BOOT 48, RLC_P 25, RLC_V 7,
    // RLC_RESTORE_LIST_SRM_CNTL 22, _GPM_MEM 20, _SRM_MEM 21.
    struct Case {
        Asic asic;
        uint32_t skip;
    };
    for (Case c : {Case{Asic::navi31, 26}, Case{Asic::navi31, 25}, Case{Asic::navi31, 7}, Case{Asic::navi31, 21},
                   Case{Asic::navi48, 26}, Case{Asic::navi48, 48}, Case{Asic::navi48, 20}}) {
        INFO(baregpu::sim::amdgpu::to_string(c.asic) << " without type " << c.skip);
        TempDir dir;
        Rig rig(c.asic, dir.path);
        rig.bootloader_load_all();
        rig.ring_create();
        rig.load_ip_firmware_before_autoload(c.skip);
        CHECK(rig.violations() == 0);
        CHECK(rig.autoload_rlc() == 0xFFFF0007u);
        CHECK(rig.has_violation("AUTOLOAD_RLC before firmware types " + std::to_string(c.skip) + " were loaded"));
        CHECK((rig.rd(rig.r.rlc_bootload_status) & 0x80000000u) == 0);
    }
}

TEST_CASE("sim-am: an RLC piece is accepted only as the real file's bytes", "[sim-am]") {
    REQUIRE_AMD_FIRMWARE();
    {
        TempDir dir;
        Rig rig(Asic::navi31, dir.path);
        rig.bootloader_load_all();
        rig.ring_create();
        rig.load_ip_firmware_before_autoload(26);
        auto bytes = firmware("gc_11_0_0_rlc.bin");
        auto rlc = fw::amd::parse_rlc(fw::ByteReader(bytes, "rlc"));
        auto iram = std::vector<std::byte>(rlc.find("IRAM")->bytes.bytes.begin(), rlc.find("IRAM")->bytes.bytes.end());
        auto dram = rlc.find("DRAM")->bytes.bytes;
        CHECK(rig.load_ip_fw(26, dram) == 0xFFFF000Fu);  // the DRAM image sent as IRAM
        iram[100] ^= std::byte{1};
        CHECK(rig.load_ip_fw(26, iram) == 0xFFFF000Fu);
        iram[100] ^= std::byte{1};
        CHECK(rig.load_ip_fw(26, iram) == 0);
        CHECK(rig.autoload_rlc() == 0);
        CHECK(rig.violations() == 0);
    }
}

TEST_CASE("sim-am: SMU mailbox", "[sim-am]") {
    REQUIRE_AMD_FIRMWARE();
    TempDir dir;
    Rig rig(Asic::navi31, dir.path);
    boot_to_smu(rig);
    SECTION("unknown message -> 0xFE") { CHECK(rig.smu_send(0x77, 0) == 0xFE); }
    SECTION("message without clearing the response is a violation") {
        REQUIRE(rig.smu_send(0x2, 0) == 1);
        rig.wr(rig.r.smu_param, 0);
        rig.wr(rig.r.smu_msg, 0x2);  // C2PMSG_90 still 1
        CHECK(rig.has_violation("without clearing C2PMSG_90"));
    }
    SECTION("message while the previous one is pending is a violation") {
        rig.wr(rig.r.smu_resp, 0);
        rig.wr(rig.r.smu_msg, 0x2);
        rig.wr(rig.r.smu_msg, 0x2);
        CHECK(rig.has_violation("still being processed"));
    }
    SECTION("TransferTableSmu2Dram before SetDriverDramAddr -> 0xFD") { CHECK(rig.smu_send(0x12, 5) == 0xFD); }
    SECTION("a hung SMU answers nothing") {
        rig.model->inject_smu_hang(true);
        CHECK(rig.smu_send(0x2, 0, nullptr, 200) == 0);
        rig.model->inject_smu_hang(false);
    }
}

TEST_CASE("sim-am: mode1 reset through the debug mailbox", "[sim-am]") {
    REQUIRE_AMD_FIRMWARE();
    for (Asic asic : {Asic::navi31, Asic::navi48}) {
        TempDir dir;
        Rig rig(asic, dir.path);
        boot_to_smu(rig);
        rig.wr(rig.r.scratch_reg7, 0xA0000008);
        rig.vram_write32(100u << 20, 0x12345678);
        rig.dev->set_bus_master(false);
        // smu_v13_0_0_ppt.c mode1_reset: DEBUGSMC_MSG_Mode1Reset (2) on the debug mailbox.
        rig.wr(rig.r.smu_debug_param, 0);
        rig.wr(rig.r.smu_debug_msg, 2);
        CHECK((rig.rd(rig.r.psp_35) & 0x80000000u) == 0);  // the chip is resetting
        rig.dev->delay(500ms);
        CHECK((rig.rd(rig.r.psp_35) & 0x80000000u) != 0);
        CHECK(rig.rd(rig.r.psp_81) == 0);
        CHECK(rig.rd(rig.r.psp_71) == 0);
        CHECK(rig.rd(rig.r.scratch_reg7) == 0);
        CHECK(rig.smu_send(0x2, 0, nullptr, 50) == 0);  // SMU firmware gone
        CHECK(rig.vram32(100u << 20) == 0x12345678);     // VRAM kept
        CHECK_NOTHROW(rig.discover());                    // discovery rewritten and valid
        CHECK(rig.model->mode1_resets() == 1);
        INFO(rig.violation_text());
        CHECK(rig.violations() == 0);
        // And the chip boots again.
        rig.bootloader_load_all();
    }
}

TEST_CASE("sim-am: RCC_DEV0_EPF2_STRAP2 and the pinned clocks", "[sim-am]") {
    REQUIRE_AMD_FIRMWARE();
    for (Asic asic : {Asic::navi31, Asic::navi48}) {
        INFO(baregpu::sim::amdgpu::to_string(asic));
        TempDir dir;
        Rig rig(asic, dir.path);
        // Past BAR5, through the RSMU pair; the model powers on with NO_SOFT_RESET_DEV0_F2 (bit 7) set.
        REQUIRE(rig.r.rcc_strap2 >= 0x40000);
        const uint32_t strap = rig.rd(rig.r.rcc_strap2);
        CHECK((strap & 0x80u) != 0);
        rig.wr(rig.r.rcc_strap2, strap | 0x100u);  // another strap bit: refused
        CHECK(rig.has_violation("only STRAP_NO_SOFT_RESET_DEV0_F2 may change"));
        CHECK(rig.rd(rig.r.rcc_strap2) == strap);
        rig.bus->clear_violations();
        rig.wr(rig.r.rcc_strap2, strap & ~0x80u);  // nbio_v4_3 / nbif_v6_3_1 init_registers
        CHECK(rig.rd(rig.r.rcc_strap2) == (strap & ~0x80u));
        CHECK(rig.violations() == 0);

        // SetSoftMin/MaxByFreq: the SMU keeps both, and runs the clock inside them.
        rig.bootloader_load_all();
        rig.ring_create();
        rig.load_all_ip_firmware();
        CHECK(rig.model->smu_clock(0).current_mhz == 500);  // idle: the lowest GFXCLK level
        CHECK(rig.smu_send(0x19, (0u << 16) | 2500) == 1);
        CHECK(rig.smu_send(0x1A, (0u << 16) | 2500) == 1);
        auto gfx = rig.model->smu_clock(0);
        CHECK(gfx.soft_min_mhz == 2500);
        CHECK(gfx.soft_max_mhz == 2500);
        CHECK(gfx.current_mhz == 2500);
        CHECK(rig.smu_send(0x1A, (2u << 16) | 772) == 1);  // UCLK max only
        CHECK(rig.model->smu_clock(2).current_mhz == 96);
        CHECK(rig.smu_send(0x19, (2u << 16) | 0xffff) == 1);
        CHECK(rig.model->smu_clock(2).current_mhz == 772);  // held under the soft max
        CHECK(rig.smu_send(0x19, (7u << 16) | 100) == 0xFF);  // not a clock
        INFO(rig.violation_text());
        CHECK(rig.violations() == 0);
    }
}

TEST_CASE("sim-am: state survives the model and the bus; power_cycle is power-on", "[sim-am]") {
    REQUIRE_AMD_FIRMWARE();
    TempDir dir;
    {
        Rig rig(Asic::navi31, dir.path);
        CHECK(rig.model->powered_on_at_open());
        rig.bootloader_load_all();
        rig.wr(rig.r.scratch_reg7, 0xA0000008);
        rig.vram_write32(200u << 20, 0xcafef00d);
    }
    {
        Rig rig(Asic::navi31, dir.path);
        CHECK_FALSE(rig.model->powered_on_at_open());
        CHECK(rig.rd(rig.r.psp_81) != 0);
        CHECK(rig.rd(rig.r.scratch_reg7) == 0xA0000008);
        CHECK(rig.vram32(200u << 20) == 0xcafef00d);
        rig.model->power_cycle();
        CHECK(rig.rd(rig.r.psp_81) == 0);
        CHECK(rig.rd(rig.r.scratch_reg7) == 0);
        CHECK(rig.vram32(200u << 20) == 0);
        CHECK_NOTHROW(rig.discover());
    }
    {
        // Another ASIC in the same directory is another file; a navi48 never sees navi31's state.
        Rig rig(Asic::navi48, dir.path);
        CHECK(rig.model->powered_on_at_open());
    }
}

TEST_CASE("sim-am: RSMU indirect registers and MM_INDEX VRAM access", "[sim-am]") {
    TempDir dir;
    Rig rig(Asic::navi31, dir.path, /*with_firmware=*/false);
    // A register past the 1 MiB BAR (NBIO segment 4) through BIF_BX_PF0_RSMU_INDEX/DATA.
    const uint32_t far = static_cast<uint32_t>(rig.disc.find(108)->base_addresses[4]) + 0x10;
    REQUIRE(uint64_t{far} * 4 >= (1u << 20));
    rig.wr(far, 0x5a5a1234);
    CHECK(rig.rd(far) == 0x5a5a1234);
    // The pair also reaches direct registers.
    rig.wr(rig.r.rsmu_index, rig.r.scratch_reg7 * 4);
    rig.wr(rig.r.rsmu_data, 0x77);
    CHECK(rig.dev->bar(5).read32(BarOffset(uint64_t{rig.r.scratch_reg7} * 4)) == 0x77);
    // MM_INDEX (0x0) | 0x80000000, MM_INDEX_HI (0x6), MM_DATA (0x1).
    const uint64_t at = (512u << 20) + 0x40;
    rig.vram_write32(at, 0xfeedface);
    auto& bar5 = rig.dev->bar(5);
    bar5.write32(BarOffset(0x6 * 4), static_cast<uint32_t>(at >> 31));
    bar5.write32(BarOffset(0x0 * 4), static_cast<uint32_t>(at & 0x7fffffff) | 0x80000000u);
    CHECK(bar5.read32(BarOffset(0x1 * 4)) == 0xfeedface);
    bar5.write32(BarOffset(0x1 * 4), 0x01020304);
    CHECK(rig.vram32(at) == 0x01020304);
    // The discovery table, read the small-BAR way.
    const uint64_t disc = (1u << 30) - (64u << 10);
    bar5.write32(BarOffset(0x6 * 4), static_cast<uint32_t>(disc >> 31));
    bar5.write32(BarOffset(0x0 * 4), static_cast<uint32_t>(disc & 0x7fffffff) | 0x80000000u);
    CHECK(bar5.read32(BarOffset(0x1 * 4)) == 0x28211407);  // BINARY_SIGNATURE
    CHECK(rig.violations() == 0);
    // Read-only registers.
    rig.wr(0xde3, 1);
    CHECK(rig.has_violation("read-only"));
    CHECK(rig.dev->bar(5).read32(BarOffset(0xde3 * 4)) == 1024);
    rig.wr(rig.r.mm_fb_base, 0);
    CHECK(rig.rd(rig.r.mm_fb_base) == 0x8000);
}

TEST_CASE("sim-am: VMID0 page walk, TLB invalidation and a page fault through the IH", "[sim-am]") {
    for (Asic asic : {Asic::navi31, Asic::navi48}) {
        INFO(baregpu::sim::amdgpu::to_string(asic));
        TempDir dir;
        Rig rig(asic, dir.path, /*with_firmware=*/false);
        const bool gfx12 = asic == Asic::navi48;
        // IH ring 0: 256 KiB at VRAM 40 MiB, write-back at 40 MiB + 256 KiB (ih_v6_0.c order).
        const uint64_t ring = 40u << 20, wb = ring + (256u << 10);
        rig.wr(rig.r.ih_base, static_cast<uint32_t>(rig.mc(ring) >> 8));
        rig.wr(rig.r.ih_base_hi, static_cast<uint32_t>(rig.mc(ring) >> 40));
        rig.wr(rig.r.ih_wptr_addr_lo, static_cast<uint32_t>(rig.mc(wb)));
        rig.wr(rig.r.ih_wptr_addr_hi, static_cast<uint32_t>(rig.mc(wb) >> 32));
        rig.wr(rig.r.ih_wptr, 0);
        rig.wr(rig.r.ih_rptr, 0);
        const uint32_t rb_size = 16;  // log2(256 KiB / 4)
        rig.wr(rig.r.ih_cntl, (rb_size << 1) | (1u << 16) | (1u << 0) | (4u << 28));  // MC_SPACE 4 (ih_v6_0_irq_init)
        // Page table: root (PDB2) at 48 MiB, PDB1 at +4 KiB, one 2 MiB leaf at PDB0 (+8 KiB) mapping
        // VA 0x2000_0000_0000 -> VRAM 64 MiB. amdgpu_vm.h: VALID|READABLE|WRITEABLE, PDE_PTE bit 54
        // (GC 11) or 63 (GC 12).
        const uint64_t root = 48u << 20, pdb1 = root + 0x1000, pdb0 = root + 0x2000;
        const uint64_t va = 0x200000000000ull;
        auto put64 = [&](uint64_t off, uint64_t v) {
            rig.vram_write32(off, static_cast<uint32_t>(v));
            rig.vram_write32(off + 4, static_cast<uint32_t>(v >> 32));
        };
        put64(root, pdb1 | 1);
        put64(pdb1, pdb0 | 1);
        const uint64_t leaf_bit = gfx12 ? (1ull << 63) : (1ull << 54);
        put64(pdb0, (64ull << 20) | 1 | (1 << 5) | (1 << 6) | leaf_bit);
        rig.wr(rig.r.gc_pt_start_lo, static_cast<uint32_t>(va >> 12));
        rig.wr(rig.r.gc_pt_start_hi, static_cast<uint32_t>(va >> 44));
        rig.wr(rig.r.gc_pt_end_lo, static_cast<uint32_t>(0x7fffffffffffull >> 12));
        rig.wr(rig.r.gc_pt_end_hi, static_cast<uint32_t>(0x7fffffffffffull >> 44));
        rig.wr(rig.r.gc_pt_base_lo, static_cast<uint32_t>(root | 1));
        rig.wr(rig.r.gc_pt_base_hi, 0);
        // enable, depth 3 (4 levels), the seven faults' interrupt/default enables (from bit 9 on GC 11,
        // bit 10 on GC 12: gc_11_0_0_sh_mask.h, gc_12_0_0_sh_mask.h).
        rig.wr(rig.r.gc_ctx0_cntl, 1 | (3u << 1) | (0x3fffu << (asic == Asic::navi48 ? 10 : 9)));
        // MM hub TLB flush with the semaphore (gmc_v11_0.c flush_gpu_tlb).
        CHECK(rig.rd(rig.r.mm_sem) == 1);
        rig.wr(rig.r.mm_req, 1u | (1u << 19) | (7u << 20) | (1u << 23));
        CHECK((rig.rd(rig.r.mm_ack) & 1) == 1);
        rig.wr(rig.r.mm_sem, 0);
        CHECK(rig.violations() == 0);
        rig.wr(rig.r.mm_req, 1u);  // without the semaphore
        CHECK(rig.has_violation("without holding VM_INVALIDATE_ENG17_SEM"));
        rig.bus->clear_violations();

        // A mapped access lands in VRAM at 64 MiB + offset.
        uint32_t value = 0xabcd0123;
        REQUIRE(rig.model->gpu_write(va + 0x1234, std::as_bytes(std::span(&value, 1))));
        CHECK(rig.vram32((64u << 20) + 0x1234) == 0xabcd0123);
        CHECK(rig.model->gpu_access(rig.fb_base + 0x100, 4, false));  // the system aperture
        CHECK(rig.vram32(wb) == 0);

        // An unmapped one faults: latched status + address, one IH entry.
        const uint64_t bad = va + (4ull << 30) + 0x3000;
        CHECK_FALSE(rig.model->gpu_access(bad, 4, true));
        const uint32_t status = rig.rd(rig.r.gc_fault_status);
        CHECK(status != 0);
        CHECK((status & (1u << 18)) != 0);  // RW: a write
        CHECK(rig.rd(rig.r.gc_fault_addr_lo) == static_cast<uint32_t>(bad >> 12));
        CHECK(rig.rd(rig.r.gc_fault_addr_hi) == static_cast<uint32_t>(bad >> 44));
        const uint32_t wptr = rig.rd(rig.r.ih_wptr);
        CHECK((wptr & 0x3fffc) == 32);  // one 32-byte entry, a byte offset
        CHECK(rig.vram32(wb) == wptr);
        const uint32_t dw0 = rig.vram32(ring);
        CHECK((dw0 & 0xff) == 10);         // SOC21_IH_CLIENTID_GFX
        CHECK(((dw0 >> 8) & 0xff) == 0);  // UTCL2 fault
        const uint64_t decoded = (uint64_t{rig.vram32(ring + 16)} << 12) | (uint64_t{rig.vram32(ring + 20) & 0xf} << 44);
        CHECK(decoded == (bad & ~0xfffull));
        // A second fault only sets MORE_FAULTS; clearing the status (FAULT_CNTL bit 0) unlatches.
        CHECK_FALSE(rig.model->gpu_access(bad + 0x10000, 4, false));
        CHECK((rig.rd(rig.r.gc_fault_status) & 1) == 1);
        CHECK(rig.rd(rig.r.gc_fault_addr_lo) == static_cast<uint32_t>(bad >> 12));
        rig.wr(rig.r.gc_fault_cntl, 1);
        CHECK(rig.rd(rig.r.gc_fault_status) == 0);
        // The driver consumes the entries: RPTR in bytes; a dword index is refused.
        rig.wr(rig.r.ih_rptr, 64);
        CHECK(rig.violations() == 0);
        rig.wr(rig.r.ih_rptr, 3);
        CHECK(rig.has_violation("IH_RB_RPTR"));
        // A GC11-format huge page on GC12 (or vice versa) is not a leaf: the walk fails.
        put64(pdb0, (64ull << 20) | 1 | (1 << 5) | (1 << 6) | (gfx12 ? (1ull << 54) : (1ull << 63)));
        CHECK_FALSE(rig.model->gpu_access(va + 0x1234, 4, false));
    }
}

TEST_CASE("sim-am: the IH ring overflows and says so", "[sim-am]") {
    TempDir dir;
    Rig rig(Asic::navi31, dir.path, /*with_firmware=*/false);
    const uint64_t ring = 40u << 20;
    rig.wr(rig.r.ih_base, static_cast<uint32_t>(rig.mc(ring) >> 8));
    rig.wr(rig.r.ih_base_hi, static_cast<uint32_t>(rig.mc(ring) >> 40));
    rig.wr(rig.r.ih_cntl, (3u << 1) | (1u << 16) | 1u | (4u << 28));  // 32-byte ring: 1 entry fits before full... 4 << 3 = 32 B
    for (int i = 0; i < 3; ++i) rig.model->latch_vm_fault(0x300000000000ull + i * 0x1000);
    CHECK((rig.rd(rig.r.ih_wptr) & 1) == 1);  // RB_OVERFLOW
    rig.wr(rig.r.ih_cntl, (3u << 1) | (1u << 16) | 1u | (4u << 28) | (1u << 31));  // WPTR_OVERFLOW_CLEAR
    CHECK((rig.rd(rig.r.ih_wptr) & 1) == 0);
}

TEST_CASE("sim-am: HDP flush through the remap register and GPU_HDP_FLUSH_REQ/DONE", "[sim-am]") {
    for (Asic asic : {Asic::navi31, Asic::navi48}) {
        TempDir dir;
        Rig rig(asic, dir.path, /*with_firmware=*/false);
        // nbio_4_3_0 / nbif_6_3_1: REMAP_HDP_MEM_FLUSH_CNTL 0x12d, GPU_HDP_FLUSH_REQ/DONE 0x106/0x107, BASE_IDX 2.
        const uint32_t seg2 = static_cast<uint32_t>(rig.disc.find(108)->base_addresses[2]);
        const uint32_t remap = rig.rd(seg2 + 0x12d);
        REQUIRE(remap != 0);
        CHECK(rig.model->hdp_flushes() == 0);
        rig.wr(remap / 4, 0);  // tinygrad's flush_hdp: write 0 where the remap register points
        CHECK(rig.model->hdp_flushes() == 1);
        rig.wr(seg2 + 0x106, 1u << 10);  // sdma0's bit
        CHECK((rig.rd(seg2 + 0x107) & (1u << 10)) != 0);
        CHECK(rig.model->hdp_flushes() == 2);
        CHECK(rig.violations() == 0);
    }
}

TEST_CASE("sim-am: PPSMC_MSG_Mode1Reset on MP1 13.0.0 and the warm ring path across processes", "[sim-am]") {
    REQUIRE_AMD_FIRMWARE();
    TempDir dir;
    {
        Rig rig(Asic::navi31, dir.path);
        boot_to_smu(rig);
        CHECK(rig.rd(rig.r.psp_71) == 0x10000);
    }
    {
        // A new process: the sOS runs and the ring exists (C2PMSG_71 != 0): destroy, then create.
        Rig rig(Asic::navi31, dir.path);
        CHECK(rig.rd(rig.r.psp_81) != 0);
        CHECK(rig.rd(rig.r.psp_71) != 0);
        rig.ring_create();
        uint32_t tmr = 0;
        CHECK(rig.load_toc(&tmr) == 0);
        CHECK(rig.smu_send(0x2, 0) == 1);  // the SMU kept running
        // smu_v13_0_0_ppsmc.h PPSMC_MSG_Mode1Reset 0x2F through the message mailbox.
        rig.wr(rig.r.smu_resp, 0);
        rig.wr(rig.r.smu_param, 0);
        rig.wr(rig.r.smu_msg, 0x2F);
        rig.dev->delay(500ms);
        CHECK(rig.model->mode1_resets() == 1);
        CHECK(rig.rd(rig.r.psp_81) == 0);
        CHECK(rig.rd(rig.r.psp_71) == 0);
        INFO(rig.violation_text());
        CHECK(rig.violations() == 0);
    }
}

TEST_CASE("sim-am: mode1 reset with bus mastering on is a violation", "[sim-am]") {
    REQUIRE_AMD_FIRMWARE();
    TempDir dir;
    Rig rig(Asic::navi48, dir.path);
    boot_to_smu(rig);
    rig.dev->set_bus_master(true);
    rig.wr(rig.r.smu_debug_param, 0);
    rig.wr(rig.r.smu_debug_msg, 2);
    CHECK(rig.has_violation("bus mastering on"));
    CHECK(rig.model->mode1_resets() == 1);  // the reset still happens
}

TEST_CASE("sim-am: the state file's blocks are reserved while it is open and a mismatched one means power-on", "[sim-am]") {
    TempDir dir;
    std::filesystem::path path;
    struct stat st {};
    {
        Rig rig(Asic::navi48, dir.path, /*with_firmware=*/false);
        path = rig.model->state_path();
        CHECK(path.parent_path() == dir.path);
        CHECK(path.filename() == "sim-am-navi48.state");
        rig.wr(rig.r.scratch_reg7, 0x1234);
        rig.vram_write32(300u << 20, 0x99);
        REQUIRE(::stat(path.c_str(), &st) == 0);
        CHECK(static_cast<uint64_t>(st.st_size) > (1ull << 30));                              // VRAM is in it
        CHECK(static_cast<uint64_t>(st.st_blocks) * 512 >= static_cast<uint64_t>(st.st_size));  // all reserved: no SIGBUS
    }
    REQUIRE(::stat(path.c_str(), &st) == 0);
    if (static_cast<uint64_t>(st.st_blocks) * 512 >= static_cast<uint64_t>(st.st_size)) {
        WARN("this file system does not say which reserved blocks were never written (FIEMAP): the closed chip keeps them");
    } else {
        CHECK(static_cast<uint64_t>(st.st_blocks) * 512 < (64ull << 20));  // closed, untouched VRAM costs nothing
    }
    {
        Rig rig(Asic::navi48, dir.path, /*with_firmware=*/false);
        CHECK_FALSE(rig.model->powered_on_at_open());
        CHECK(rig.rd(rig.r.scratch_reg7) == 0x1234);
    }
    {
        // Another version of the format (the u32 after the magic): power-on, VRAM dropped.
        FILE* f = std::fopen(path.c_str(), "r+b");
        REQUIRE(f != nullptr);
        std::fseek(f, 8, SEEK_SET);
        uint32_t version = 999;
        std::fwrite(&version, 4, 1, f);
        std::fclose(f);
        Rig rig(Asic::navi48, dir.path, /*with_firmware=*/false);
        CHECK(rig.model->powered_on_at_open());
        CHECK(rig.rd(rig.r.scratch_reg7) == 0);
        CHECK(rig.vram32(300u << 20) == 0);
    }
}

}  // namespace navi_test
