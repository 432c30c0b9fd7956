#include "rig.hpp"

#include "firmware-loader/amd/gfx.hpp"
#include "firmware-loader/amd/imu.hpp"
#include "firmware-loader/amd/psp.hpp"
#include "firmware-loader/amd/rlc.hpp"
#include "firmware-loader/amd/sdma.hpp"
#include "firmware-loader/amd/smc.hpp"
#include "firmware-loader/search_path.hpp"

#include <cstdlib>
#include <fmt/format.h>
#include <unistd.h>

using namespace std::chrono_literals;

namespace baregpu::test::sim_am {

std::optional<std::filesystem::path> firmware_dir() {
    const char* dir = std::getenv("BAREGPU_TEST_FIRMWARE_DIR");
    if (dir == nullptr) return std::nullopt;
    std::filesystem::path p = std::filesystem::path(dir) / "amdgpu";
    if (!std::filesystem::is_directory(p)) return std::nullopt;
    return p;
}

std::vector<std::byte> firmware(const std::string& name) {
    return fw::read_firmware_file(*firmware_dir() / name).bytes;
}

TempDir::TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "sim-am-test-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = templ;
}
TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
}

namespace {

// Linux hw ids (soc15_hw_ip.h).
constexpr uint16_t kMp0 = 255, kMp1 = 1, kGc = 11, kMmhub = 34, kNbif = 108, kOsssys = 40;

uint32_t base(const fw::amd::Discovery& d, uint16_t hw_id, unsigned idx) {
    const fw::amd::DiscoveredIp* ip = d.find(hw_id);
    REQUIRE(ip != nullptr);
    REQUIRE(idx < ip->base_addresses.size());
    return static_cast<uint32_t>(ip->base_addresses[idx]);
}

void put32(std::vector<std::byte>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }

}  // namespace

Rig::Rig(Asic a, const std::filesystem::path& dir, bool with_firmware) : asic(a), state_dir(dir) {
    bus = std::make_unique<pci::sim::SimBus>();
    baregpu::sim::amdgpu::ModelOptions o;
    o.asic = a;
    o.state_dir = dir.string();
    if (with_firmware && firmware_dir()) o.firmware_dir = firmware_dir()->string();
    if (!with_firmware) o.firmware_dir = (dir / "no-firmware-here").string();
    auto m = std::make_unique<NaviModel>(o);
    model = m.get();
    address = bus->attach(std::move(m));
    dev = bus->open(address);
    disc = discover();
    const bool navi48 = a == Asic::navi48;
    // mp_13_0_0_offset.h / mp_14_0_2_offset.h: C2PMSG_n = 0x40 + n, BASE_IDX 0.
    const uint32_t mp0 = base(disc, kMp0, 0);
    r.psp_35 = mp0 + 0x63, r.psp_36 = mp0 + 0x64, r.psp_64 = mp0 + 0x80, r.psp_67 = mp0 + 0x83;
    r.psp_69 = mp0 + 0x85, r.psp_70 = mp0 + 0x86, r.psp_71 = mp0 + 0x87, r.psp_81 = mp0 + 0x91;
    // MP1: mp_13_0_0 BASE_IDX 0 at 0x240 + n; mp_14_0_2 BASE_IDX 1 at 0x40 + n.
    const uint32_t mp1 = navi48 ? base(disc, kMp1, 1) + 0x40 : base(disc, kMp1, 0) + 0x240;
    r.smu_msg = mp1 + 66, r.smu_param = mp1 + 82, r.smu_resp = mp1 + 90;
    r.smu_debug_msg = mp1 + 75, r.smu_debug_param = mp1 + 53, r.smu_debug_resp = mp1 + 54;
    // nbio_4_3_0 / nbif_6_3_1: RSMU_INDEX/DATA 0x0/0x1 BASE_IDX 1.
    r.rsmu_index = base(disc, kNbif, 1), r.rsmu_data = base(disc, kNbif, 1) + 1;
    r.rcc_strap2 = base(disc, kNbif, 5) + 0xd102;  // nbio_4_3_0/nbif_6_3_1 regRCC_DEV0_EPF2_STRAP2, BASE_IDX 5
    // gc_11_0_0 / gc_12_0_0.
    const uint32_t gc0 = base(disc, kGc, 0), gc1 = base(disc, kGc, 1);
    r.scratch_reg7 = gc1 + 0x2047;
    r.cp_stat = gc0 + 0xf40;
    r.rlc_bootload_status = gc1 + (navi48 ? 0x4e7c : 0x4e82);
    r.gc_fault_cntl = gc0 + (navi48 ? 0x15cc : 0x15c4);
    r.gc_fault_status = gc0 + (navi48 ? 0x15d0 : 0x15c8);
    r.gc_fault_addr_lo = gc0 + (navi48 ? 0x15d2 : 0x15c9);
    r.gc_fault_addr_hi = gc0 + (navi48 ? 0x15d3 : 0x15ca);
    r.gc_ctx0_cntl = gc0 + (navi48 ? 0x1624 : 0x1688);
    r.gc_pt_base_lo = gc0 + (navi48 ? 0x168f : 0x16f3), r.gc_pt_base_hi = r.gc_pt_base_lo + 1;
    r.gc_pt_start_lo = gc0 + (navi48 ? 0x16af : 0x1713), r.gc_pt_start_hi = r.gc_pt_start_lo + 1;
    r.gc_pt_end_lo = gc0 + (navi48 ? 0x16cf : 0x1733), r.gc_pt_end_hi = r.gc_pt_end_lo + 1;
    // mmhub_3_0_0 / mmhub_4_1_0.
    const uint32_t mm = base(disc, kMmhub, 0);
    r.mm_fb_base = mm + (navi48 ? 0x554 : 0x8ec), r.mm_fb_top = r.mm_fb_base + 1;
    r.mm_sem = mm + (navi48 ? 0x586 : 0x762), r.mm_req = mm + (navi48 ? 0x598 : 0x774),
    r.mm_ack = mm + (navi48 ? 0x5aa : 0x786);
    // osssys_6_0_0 / osssys_7_0_0.
    const uint32_t oss = base(disc, kOsssys, 0);
    r.ih_cntl = oss + 0x80;
    r.ih_base = oss + (navi48 ? 0x83 : 0x81), r.ih_base_hi = oss + (navi48 ? 0x84 : 0x82);
    r.ih_rptr = oss + (navi48 ? 0x81 : 0x83), r.ih_wptr = oss + (navi48 ? 0x82 : 0x84);
    r.ih_wptr_addr_hi = oss + 0x85, r.ih_wptr_addr_lo = oss + 0x86;
    fb_base = uint64_t{rd(r.mm_fb_base) & 0xffffff} << 24;
}

Rig::~Rig() {
    dev.reset();
    bus.reset();
}

uint32_t Rig::rd(uint32_t a) {
    if (uint64_t{a} * 4 < dev->bar_info(5).size) return dev->bar(5).read32(BarOffset(uint64_t{a} * 4));
    wr(r.rsmu_index, a * 4);
    return rd(r.rsmu_data);
}

void Rig::wr(uint32_t a, uint32_t v) {
    if (uint64_t{a} * 4 < dev->bar_info(5).size) {
        dev->bar(5).write32(BarOffset(uint64_t{a} * 4), v);
        return;
    }
    wr(r.rsmu_index, a * 4);
    wr(r.rsmu_data, v);
}

void Rig::vram_write(uint64_t off, std::span<const std::byte> b) { dev->bar(0).write_block(BarOffset(off), b); }
std::vector<std::byte> Rig::vram_read(uint64_t off, size_t n) {
    std::vector<std::byte> out(n);
    dev->bar(0).read_block(BarOffset(off), out);
    return out;
}
uint32_t Rig::vram32(uint64_t off) { return dev->bar(0).read32(BarOffset(off)); }
void Rig::vram_write32(uint64_t off, uint32_t v) { dev->bar(0).write32(BarOffset(off), v); }

bool Rig::wait(const std::function<bool()>& pred, int ms) {
    for (int i = 0; i < ms; ++i) {
        if (pred()) return true;
        dev->delay(1ms);
    }
    return pred();
}

fw::amd::Discovery Rig::discover() {
    // amdgpu_discovery.c amdgpu_discovery_read_binary_from_mem: wait for the IFWI init
    // (mmMP0_SMN_C2PMSG_33, the fixed dword 0x16061, bit 31) for up to 1 s, then the VRAM size in MiB
    // at the fixed RCC_CONFIG_MEMSIZE (0xde3); the table at VRAM - 64 KiB.
    REQUIRE(wait([&] { return (dev->bar(5).read32(BarOffset(0x16061 * 4)) & 0x80000000u) != 0; }, 1000));
    uint64_t vram = uint64_t{dev->bar(5).read32(BarOffset(0xde3 * 4))} << 20;
    REQUIRE(vram == (uint64_t{1} << 30));
    discovery_bytes = vram_read(vram - (64u << 10), 10u << 10);
    return fw::amd::parse_discovery(fw::ByteReader(discovery_bytes, "discovery"));
}

std::string Rig::violation_text() const {
    std::string s;
    for (const auto& v : bus->violations()) s += v.describe() + "\n";
    return s;
}

bool Rig::has_violation(const std::string& fragment) const {
    for (const auto& v : bus->violations())
        if (v.what.find(fragment) != std::string::npos) return true;
    return false;
}

bool Rig::bootloader_load(uint32_t command, std::span<const std::byte> blob) {
    // psp_v13_0.c bootloader_load_component: wait bit 31, copy to msg1, C2PMSG_36 = MC >> 20,
    // C2PMSG_35 = command, wait bit 31.
    if (!wait([&] { return (rd(r.psp_35) & 0x80000000u) != 0; })) return false;
    std::vector<std::byte> padded(blob.begin(), blob.end());
    padded.resize((padded.size() + 4 + 15) / 16 * 16);
    vram_write(kMsg1, padded);
    wr(r.psp_36, static_cast<uint32_t>(mc(kMsg1) >> 20));
    wr(r.psp_35, command);
    if (!wait([&] { return (rd(r.psp_35) & 0x80000000u) != 0 || rd(r.psp_81) != 0; })) return false;
    return (rd(r.psp_35) & 0xffff) == 0;
}

void Rig::bootloader_load_all() {
    auto bytes = firmware(asic == Asic::navi31 ? "psp_13_0_0_sos.bin" : "psp_14_0_3_sos.bin");
    fw::amd::PspFirmware sos = fw::amd::parse_psp_sos(fw::ByteReader(bytes, "sos"));
    using T = fw::amd::PspFwType;
    struct Step {
        T type;
        uint32_t command;  // amdgpu_psp.h enum psp_bootloader_cmd
    };
    for (Step s : {Step{T::kdb, 0x80000}, Step{T::spl, 0x10000000}, Step{T::sys_drv, 0x10000}, Step{T::soc_drv, 0xB0000},
                   Step{T::intf_drv, 0xD0000}, Step{T::dbg_drv, 0xC0000}, Step{T::ras_drv, 0xE0000},
                   Step{T::sos, 0x20000}}) {
        const fw::amd::PspBinary* b = sos.find(s.type);
        if (b == nullptr) continue;
        INFO("bootloader component " << b->name);
        REQUIRE(bootloader_load(s.command, b->bytes.bytes));
    }
    REQUIRE(wait([&] { return rd(r.psp_81) != 0; }));
}

void Rig::ring_create() {
    // psp_v13_0.c ring_create: destroy a ring that exists, wait 64 bit 31, base/size, KM type.
    if (rd(r.psp_71) != 0) {
        wr(r.psp_64, 0x30000);
        REQUIRE(wait([&] { return (rd(r.psp_64) & 0x80000000u) != 0; }));
    }
    REQUIRE(wait([&] { return (rd(r.psp_64) & 0x80000000u) != 0; }));
    wr(r.psp_69, static_cast<uint32_t>(mc(kRing)));
    wr(r.psp_70, static_cast<uint32_t>(mc(kRing) >> 32));
    wr(r.psp_71, 0x10000);
    wr(r.psp_64, 2u << 16);
    REQUIRE(wait([&] { return (rd(r.psp_64) & 0x8000FFFFu) == 0x80000000u; }));
    wptr = 0;
}

uint32_t Rig::submit(std::vector<std::byte> cmd, uint32_t* tmr_size) {
    // psp_gfx_cmd_resp (1024 B) in the cmd buffer, a psp_gfx_rb_frame at ring + wptr * 4.
    cmd.resize(1024);
    put32(cmd, 864, 0xdeadbeef);  // so that a model that does not answer fails
    vram_write(kCmd, cmd);
    vram_write32(kFence, 0);
    std::vector<std::byte> frame(64);
    put32(frame, 0, static_cast<uint32_t>(mc(kCmd)));
    put32(frame, 4, static_cast<uint32_t>(mc(kCmd) >> 32));
    put32(frame, 8, 1024);
    put32(frame, 12, static_cast<uint32_t>(mc(kFence)));
    put32(frame, 16, static_cast<uint32_t>(mc(kFence) >> 32));
    const uint32_t fence_value = wptr / 16 + 1;
    put32(frame, 20, fence_value);
    vram_write(kRing + uint64_t{wptr} * 4, frame);
    wptr = (wptr + 16) % (0x10000 / 4);
    wr(r.psp_67, wptr);
    REQUIRE(wait([&] { return vram32(kFence) == fence_value; }));
    if (tmr_size != nullptr) *tmr_size = vram32(kCmd + 880);
    return vram32(kCmd + 864);
}

uint32_t Rig::load_ip_fw(uint32_t type, std::span<const std::byte> blob) {
    vram_write(kFw, blob);
    std::vector<std::byte> cmd(1024);
    put32(cmd, 8, 6);  // GFX_CMD_ID_LOAD_IP_FW
    put32(cmd, 28, static_cast<uint32_t>(mc(kFw)));
    put32(cmd, 32, static_cast<uint32_t>(mc(kFw) >> 32));
    put32(cmd, 36, static_cast<uint32_t>(blob.size()));
    put32(cmd, 40, type);
    return submit(cmd);
}

uint32_t Rig::setup_tmr(uint32_t size) {
    std::vector<std::byte> cmd(1024);
    put32(cmd, 8, 5);  // GFX_CMD_ID_SETUP_TMR
    put32(cmd, 28, static_cast<uint32_t>(mc(kTmr)));
    put32(cmd, 32, static_cast<uint32_t>(mc(kTmr) >> 32));
    put32(cmd, 36, size);
    put32(cmd, 40, 2);  // bitfield.virt_phy_addr
    put32(cmd, 44, static_cast<uint32_t>(kTmr));
    return submit(cmd);
}

uint32_t Rig::load_toc(uint32_t* tmr_size) {
    auto bytes = firmware(asic == Asic::navi31 ? "psp_13_0_0_sos.bin" : "psp_14_0_3_sos.bin");
    fw::amd::PspFirmware sos = fw::amd::parse_psp_sos(fw::ByteReader(bytes, "sos"));
    auto toc = sos.find(fw::amd::PspFwType::toc)->bytes.bytes;
    vram_write(kMsg1, toc);
    std::vector<std::byte> cmd(1024);
    put32(cmd, 8, 0x20);  // GFX_CMD_ID_LOAD_TOC
    put32(cmd, 28, static_cast<uint32_t>(mc(kMsg1)));
    put32(cmd, 32, static_cast<uint32_t>(mc(kMsg1) >> 32));
    put32(cmd, 36, static_cast<uint32_t>(toc.size()));
    return submit(cmd, tmr_size);
}

uint32_t Rig::autoload_rlc() {
    std::vector<std::byte> cmd(1024);
    put32(cmd, 8, 0x21);  // GFX_CMD_ID_AUTOLOAD_RLC
    return submit(cmd);
}

void Rig::load_all_ip_firmware() {
    load_ip_firmware_before_autoload();
    REQUIRE(autoload_rlc() == 0);
}

void Rig::load_ip_firmware_before_autoload(uint32_t skip) {
    const bool navi48 = asic == Asic::navi48;
    const std::string gc = navi48 ? "gc_12_0_1" : "gc_11_0_0";
    uint32_t tmr = 0;
    REQUIRE(load_toc(&tmr) == 0);
    REQUIRE(tmr != 0);
    // psp_gfx_if.h GFX_FW_TYPE_*.
    auto smu_bytes = firmware(navi48 ? "smu_14_0_3.bin" : "smu_13_0_0.bin");
    REQUIRE(load_ip_fw(18, fw::amd::parse_smc(fw::ByteReader(smu_bytes, "smu")).code.bytes) == 0);
    if (!navi48) REQUIRE(setup_tmr(tmr) == 0);
    auto sdma_bytes = firmware(navi48 ? "sdma_7_0_1.bin" : "sdma_6_0_0.bin");
    auto sdma = fw::amd::parse_sdma(fw::ByteReader(sdma_bytes, "sdma"));
    if (sdma.ctl_ucode) REQUIRE(load_ip_fw(72, sdma.ctl_ucode->bytes) == 0);
    REQUIRE(load_ip_fw(71, sdma.ucode.bytes) == 0);
    struct Cp {
        const char* suffix;
        uint32_t code, stack;
    };
    std::vector<Cp> cps = {{"_mec.bin", 89, 94}};
    if (navi48) cps = {{"_pfp.bin", 87, 90}, {"_me.bin", 88, 92}, {"_mec.bin", 89, 94}};
    for (const Cp& cp : cps) {
        auto bytes = firmware(gc + cp.suffix);
        auto g = fw::amd::parse_gfx(fw::ByteReader(bytes, "cp"));
        REQUIRE(load_ip_fw(cp.code, g.instructions.bytes) == 0);
        REQUIRE(load_ip_fw(cp.stack, g.data->bytes) == 0);
    }
    auto imu_bytes = firmware(gc + "_imu.bin");
    auto imu = fw::amd::parse_imu(fw::ByteReader(imu_bytes, "imu"));
    REQUIRE(load_ip_fw(68, imu.iram.bytes) == 0);
    REQUIRE(load_ip_fw(69, imu.dram.bytes) == 0);
    auto rlc_bytes = firmware(gc + "_rlc.bin");
    auto rlc = fw::amd::parse_rlc(fw::ByteReader(rlc_bytes, "rlc"));
    // The pieces the RLC header's minor version carries (psp_gfx_if.h GFX_FW_TYPE_RLC_*), RLC_G last.
    struct Piece {
        const char* region;
        uint32_t type;
    };
    for (Piece p : {Piece{"save_restore_list_cntl", 22}, Piece{"save_restore_list_gpm", 20},
                    Piece{"save_restore_list_srm", 21}, Piece{"IRAM", 26}, Piece{"DRAM", 48}, Piece{"RLCP", 25},
                    Piece{"RLCV", 7}, Piece{"RLC_G", 8}}) {
        const fw::amd::RlcRegion* region = rlc.find(p.region);
        if (region == nullptr || region->bytes.size() == 0 || p.type == skip) continue;
        REQUIRE(load_ip_fw(p.type, region->bytes.bytes) == 0);
    }
}

uint32_t Rig::gc_base(unsigned idx) { return base(disc, kGc, idx); }
uint32_t Rig::nbio_base(unsigned idx) { return base(disc, kNbif, idx); }

void Rig::boot_gc() {
    const bool navi48 = asic == Asic::navi48;
    bootloader_load_all();
    ring_create();
    load_all_ip_firmware();
    REQUIRE(smu_send(0x6, 0) == 1);  // PPSMC_MSG_EnableAllSmuFeatures (smu_v13_0_0_ppsmc.h / smu_v14_0_2_ppsmc.h)
    REQUIRE(wait([&] { return rd(r.cp_stat) == 0 && (rd(r.rlc_bootload_status) & 0x80000000u) != 0; }));
    const uint32_t gc0 = gc_base(0), gc1 = gc_base(1);
    // gfx_v11_0_config_gfx_rs64: the MEC image's gfx_firmware_header_v2_0 ucode_start_addr_lo/hi (bytes
    // 52/56, amdgpu_ucode.h), per MEC pipe under GRBM_GFX_CNTL (gc1 0x900: PIPEID 1:0, MEID 3:2),
    // CP_MEC_RS64_PRGRM_CNTR_START (gc1 0x2900) = lo >> 2 | hi << 30, _HI (gc1 0x2938) = hi >> 2, then
    // every pipe through reset (CP_MEC_RS64_CNTL gc1 0x2904, MEC_PIPEn_RESET bits 19:16).
    auto mec = firmware(navi48 ? "gc_12_0_1_mec.bin" : "gc_11_0_0_mec.bin");
    uint32_t lo = 0, hi = 0;
    std::memcpy(&lo, mec.data() + 52, 4);
    std::memcpy(&hi, mec.data() + 56, 4);
    for (uint32_t pipe = 0; pipe < 4; ++pipe) {
        wr(gc1 + 0x900, (1u << 2) | pipe);
        wr(gc1 + 0x2900, lo >> 2 | hi << 30);
        wr(gc1 + 0x2938, hi >> 2);
    }
    wr(gc1 + 0x900, 0);
    const uint32_t cntl = rd(gc1 + 0x2904);
    wr(gc1 + 0x2904, cntl | (0xfu << 16));
    wr(gc1 + 0x2904, cntl & ~(0xfu << 16));
    // gfx_v11_0_constants_init: SH_MEM_CONFIG (gc1 0x9e4) = ALIGNMENT_MODE_UNALIGNED 3 << 2 |
    // INITIAL_INST_PREFETCH 3 << 14 for VMID 0 (GRBM_GFX_CNTL.VMID 0).
    wr(gc1 + 0x9e4, (3u << 2) | (3u << 14));
    // gc_doorbell_init (nbio_v4_3.c / nbif_v6_3_1.c): S2A entries 0 and 3 = 0x30000007 / 0x3000000d;
    // sdma_doorbell_range: entry 2 = ENABLE | AWID 0xe << 1 | offset 0x200 << 7 | size 40 << 17 | 3 << 28.
    // nbio_4_3_0_offset.h S2A_DOORBELL_ENTRY_n_CTRL 0x4f7640 + n BASE_IDX 3; nbif_6_3_1_offset.h
    // GDC_S2A0_S2A_DOORBELL_ENTRY_n_CTRL 0x1cb + n BASE_IDX 2.
    const uint32_t s2a = navi48 ? nbio_base(2) + 0x1cb : nbio_base(3) + 0x4f7640;
    wr(s2a + 0, 0x30000007);
    wr(s2a + 3, 0x3000000d);
    wr(s2a + 2, 1u | (0xeu << 1) | (0x200u << 7) | (40u << 17) | (3u << 28));
    // gfx_v11_0_cp_set_doorbell_range: CP_MEC_DOORBELL_RANGE_LOWER/UPPER (gc0 0x1dfc/0x1dfd) = 0 / 0x8A * 8.
    wr(gc0 + 0x1dfc, 0);
    wr(gc0 + 0x1dfd, 0x8Au * 8);
    // SDMA0_F32_CNTL (gc1 0x589a, SDMA 6) / SDMA0_MCU_CNTL (gc1 0x588e, SDMA 7): HALT (bit 0) cleared.
    const uint32_t sdma_cntl = gc1 + (navi48 ? 0x588e : 0x589a);
    wr(sdma_cntl, rd(sdma_cntl) & ~1u);
}

uint32_t Rig::smu_send(uint32_t msg, uint32_t param, uint32_t* out, int wait_ms) {
    // smu_cmn.c: clear the response, parameter, message, poll the response.
    wr(r.smu_resp, 0);
    wr(r.smu_param, param);
    wr(r.smu_msg, msg);
    wait([&] { return rd(r.smu_resp) != 0; }, wait_ms);
    if (out != nullptr) *out = rd(r.smu_param);
    return rd(r.smu_resp);
}

}  // namespace baregpu::test::sim_am
