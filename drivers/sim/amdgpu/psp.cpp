#include "drivers/sim/amdgpu/psp.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <vector>

namespace baregpu::sim::amdgpu {

namespace {

constexpr const char* kPspSource = "Linux amdgpu/psp_v13_0.c, psp_v14_0.c, amdgpu_psp.c, psp_gfx_if.h";

uint32_t u32_at(std::span<const std::byte> b, size_t at) {
    uint32_t v = 0;
    std::memcpy(&v, b.data() + at, 4);
    return v;
}
uint64_t u64_at(std::span<const std::byte> b, size_t lo_at) {
    return uint64_t{u32_at(b, lo_at)} | (uint64_t{u32_at(b, lo_at + 4)} << 32);
}

struct Component {
    uint32_t command;
    fw::amd::PspFwType type;
    const char* name;
    bool optional = false;  // a driver may leave it out even when the package carries it
};
// The bootloader's order (psp_v13_0.c/psp_v14_0.c via amdgpu_psp.c psp_hw_start: KDB, SPL, SYS_DRV,
// SOC_DRV, INTF_DRV, DBG_DRV, RAS_DRV, IPKEYMGR_DRV (psp_v14_0 bootloader_load_ipkeymgr_drv,
// PSP_BL__LOAD_IPKEYMGRDRV 0xF0000), then SOS), each only when the package carries it. IPKEYMGR_DRV
// is optional: tinygrad's AM leaves it out and brings up Navi48 (what the PSP does without it is
// not public).
constexpr Component kBootOrder[] = {
    {psp::kBlLoadKeyDatabase, fw::amd::PspFwType::kdb, "KDB"},
    {psp::kBlLoadTosSplTable, fw::amd::PspFwType::spl, "SPL"},
    {psp::kBlLoadSysDrv, fw::amd::PspFwType::sys_drv, "SYS_DRV"},
    {psp::kBlLoadSocDrv, fw::amd::PspFwType::soc_drv, "SOC_DRV"},
    {psp::kBlLoadIntfDrv, fw::amd::PspFwType::intf_drv, "INTF_DRV"},
    {psp::kBlLoadDbgDrv, fw::amd::PspFwType::dbg_drv, "DBG_DRV"},
    {psp::kBlLoadRasDrv, fw::amd::PspFwType::ras_drv, "RAS_DRV"},
    {psp::kBlLoadIpKeyMgrDrv, fw::amd::PspFwType::ipkeymgr_drv, "IPKEYMGR_DRV", /*optional=*/true},
    {psp::kBlLoadSosDrv, fw::amd::PspFwType::sos, "SOS"},
};

}  // namespace

bool Psp::busy() const { return chip_.now() < chip_.state().psp.busy_until_ns; }

void Psp::reconnect() { chip_.state().psp.busy_until_ns = 0; }

bool Psp::loaded(uint32_t type) const {
    return type < 128 && (chip_.state().psp.loaded_fw_types[type / 64] >> (type % 64) & 1) != 0;
}

bool Psp::read(uint32_t address, uint32_t& value) {
    const RegisterMap& r = chip_.reg;
    PspState& s = chip_.state().psp;
    if (address == r.rlc_bootload_status && s.autoload_done && !chip_.state().smu.features_enabled &&
        !chip_.state().gc.autoload_stall_reported) {
        // Someone waits for an autoload that waits for the SMU (complete_rlc_autoload).
        chip_.state().gc.autoload_stall_reported = 1;
        chip_.violation("RLC_RLCS_BOOTLOAD_STATUS polled while the RLC autoload waits for the SMU: EnableAllSmuFeatures has "
                        "not been sent, so BOOTLOAD_COMPLETE stays 0 (the SMU starts before the GC waits for its autoload)",
                        reg_name(address),
                        "Linux amdgpu_discovery.c (SMU hw_init before GFX hw_init), gfx_v11_0_hw_init "
                        "(gfx_v11_0_wait_for_rlc_autoload_complete); tinygrad AMDev.init_hw order");
        return false;
    }
    const bool resetting = chip_.now() < chip_.state().smu.reset_done_at_ns;
    if (address == r.psp_35) {
        // Bit 31: the bootloader is ready for a command. Clear while it works and during a reset.
        if (busy() || resetting) {
            value = 0;
        } else {
            value = field::kPspBootloaderReady | (s.sos_alive ? 0 : s.bootloader_status);
        }
        return true;
    }
    if (address == r.psp_81) {
        value = s.sos_alive && !busy() ? std::max<uint32_t>(firmware_.sos_version(), 1) : 0;
        return true;
    }
    if (address == r.psp_64) {
        value = busy() ? 0 : chip_.load(address);
        return true;
    }
    return false;
}

bool Psp::write(uint32_t address, uint32_t value) {
    const RegisterMap& r = chip_.reg;
    if (address != r.psp_35 && address != r.psp_64 && address != r.psp_67 && address != r.psp_81) return false;
    if (chip_.now() < chip_.state().smu.reset_done_at_ns) {
        chip_.violation("PSP mailbox written while the chip is in mode1 reset", reg_name(address),
                        "Linux smu_v13_0_0_ppt.c mode1_reset: wait SMU13_MODE1_RESET_WAIT_TIME_IN_MS (500 ms)");
        return true;
    }
    if (address == r.psp_35) {
        bootloader_command(value);
    } else if (address == r.psp_64) {
        ring_control(value);
    } else if (address == r.psp_67) {
        ring_submit(value);
    } else {
        chip_.violation("C2PMSG_81 is written by the PSP, not the driver", reg_name(address), kPspSource);
    }
    return true;
}

void Psp::bootloader_command(uint32_t command) {
    PspState& s = chip_.state().psp;
    const std::string where = reg_name(chip_.reg.psp_35);
    if (s.sos_alive) {
        chip_.violation(fmt::format("bootloader command {} while the sOS runs (C2PMSG_81 != 0)", hex(command)), where,
                        "Linux amdgpu_psp.c psp_hw_start: the bootloader steps run only when the sOS is not alive");
        return;
    }
    if (busy()) {
        chip_.violation(fmt::format("bootloader command {} while C2PMSG_35 bit 31 is clear (bootloader busy)", hex(command)),
                        where, "Linux psp_v13_0.c bootloader_load_component: psp_wait_for(C2PMSG_35, 0x80000000) first");
        return;
    }
    const Component* component = nullptr;
    for (const Component& c : kBootOrder)
        if (c.command == command) component = &c;
    s.busy_until_ns = chip_.now() + psp::kComponentLoadNs;
    s.bootloader_status = psp::kBootloaderRefused;
    if (component == nullptr) {
        chip_.violation(fmt::format("unknown bootloader command {}", hex(command)), where,
                        "Linux amdgpu_psp.h enum psp_bootloader_cmd");
        return;
    }
    std::string why;
    if (!firmware_.available(&why)) {
        chip_.violation("the model has no reference firmware to check the component against: " + why, where,
                        "drivers/sim/amdgpu/README.md");
        return;
    }
    // Which component must come next: the first one the package carries at or after next_component.
    const Component* expected = nullptr;
    uint32_t expected_index = 0;
    for (uint32_t i = s.next_component; i < std::size(kBootOrder); ++i) {
        if (!firmware_.sos_component(kBootOrder[i].type)) continue;
        if (kBootOrder[i].optional && &kBootOrder[i] != component) continue;  // left out: fine
        expected = &kBootOrder[i];
        expected_index = i;
        break;
    }
    if (expected != component) {
        chip_.violation(fmt::format("bootloader got {} but {} comes next", component->name,
                                    expected != nullptr ? expected->name : "nothing (all components loaded)"),
                        where, kPspSource);
        return;
    }
    auto blob = firmware_.sos_component(component->type);
    const uint64_t msg1 = uint64_t{chip_.load(chip_.reg.psp_36)} << 20;  // C2PMSG_36 = MC >> 20
    if (!reachable(msg1, blob->size(), fmt::format("{} buffer at MC {} (C2PMSG_36 << 20)", component->name, hex(msg1)),
                   reg_name(chip_.reg.psp_36))) {
        return;
    }
    if (!matches(msg1, blob->size(), *blob)) return;  // wrong chip, corrupted or truncated: refused
    s.bootloader_status = 0;
    s.next_component = expected_index + 1;
    if (component->type == fw::amd::PspFwType::sos) {
        s.sos_alive = 1;
        s.busy_until_ns = chip_.now() + psp::kSosStartNs;
        chip_.store(chip_.reg.psp_64, field::kPspRingResponse);  // ready for ring creation
    }
}

// Linux keeps the PSP's firmware buffer (fw_pri) in GTT, system memory the PSP reads through the MM
// hub (amdgpu_psp.c psp_sw_init: AMDGPU_GEM_DOMAIN_GTT); the model reads system memory through the
// AGP aperture only (MC_VM_AGP_BOT/TOP/BASE in 16 MiB units, translated MC - BOT + BASE inside the
// system aperture: Linux amdgpu_gmc.c amdgpu_gmc_agp_location, mmhub_v3_0.c
// mmhub_v3_0_init_system_aperture_regs), not through VMID0's page table.
std::optional<uint64_t> Psp::agp_bus_address(uint64_t mc, uint64_t size) const {
    const RegisterMap::Hub& h = chip_.reg.mm;
    const uint64_t bot = uint64_t{chip_.load(h.agp_bot) & 0xffffff} << 24;
    const uint64_t top = (uint64_t{chip_.load(h.agp_top) & 0xffffff} << 24) | 0xffffff;
    const uint64_t low = uint64_t{chip_.load(h.system_aperture_low)} << 18;
    const uint64_t high = (uint64_t{chip_.load(h.system_aperture_high)} << 18) | 0x3ffff;
    if (size == 0 || bot > top || mc < bot || mc + size - 1 > top || mc < low || mc + size - 1 > high) return std::nullopt;
    return mc - bot + (uint64_t{chip_.load(h.agp_base) & 0xffffff} << 24);
}

bool Psp::reachable(uint64_t mc, uint64_t size, const std::string& what, const std::string& where) {
    if (chip_.vram_offset(mc, size) || agp_bus_address(mc, size)) return true;
    chip_.violation(what + fmt::format(" of {} bytes is neither VRAM nor inside the MM hub's AGP and system apertures", size), where,
                    "Linux amdgpu_gmc.c amdgpu_gmc_agp_location, mmhub_v3_0.c init_system_aperture_regs");
    return false;
}

bool Psp::matches(uint64_t mc, uint64_t size, std::span<const std::byte> expected) {
    if (size != expected.size()) return false;
    if (auto off = chip_.vram_offset(mc, size)) return std::memcmp(chip_.vram().data() + *off, expected.data(), size) == 0;
    const std::optional<uint64_t> bus = agp_bus_address(mc, size);
    if (!bus || chip_.port == nullptr) return false;
    // The PSP's DMA reaches the host like any bus master's: the bus decides (bus mastering on, an address something claims).
    std::vector<std::byte> got(size);
    if (!chip_.port->dma_read(BusAddress(*bus), got)) return false;
    return std::memcmp(got.data(), expected.data(), size) == 0;
}

void Psp::ring_control(uint32_t value) {
    PspState& s = chip_.state().psp;
    const RegisterMap& r = chip_.reg;
    const std::string where = reg_name(r.psp_64);
    if (!s.sos_alive) {
        chip_.violation(fmt::format("ring command {} before the sOS runs (C2PMSG_81 == 0)", hex(value)), where, kPspSource);
        return;
    }
    if (busy()) {
        chip_.violation(fmt::format("ring command {} while C2PMSG_64 bit 31 is clear", hex(value)), where,
                        "Linux psp_v13_0.c ring_create: psp_wait_for(C2PMSG_64, 0x80000000) first");
        return;
    }
    s.busy_until_ns = chip_.now() + psp::kRingControlNs;
    if (value == psp::kCtrlDestroyRings) {
        s.ring_exists = 0;
        s.wptr = 0;
        chip_.store(r.psp_71, 0);
        chip_.store(r.psp_67, 0);
        chip_.store(r.psp_64, field::kPspRingResponse);
        return;
    }
    if (value != psp::kRingTypeKm << 16) {
        chip_.violation(fmt::format("unknown ring control command {}", hex(value)), where, "Linux psp_gfx_if.h");
        chip_.store(r.psp_64, field::kPspRingResponse | 0xffff);
        return;
    }
    const uint64_t ring = uint64_t{chip_.load(r.psp_69)} | (uint64_t{chip_.load(r.psp_70)} << 32);
    const uint32_t bytes = chip_.load(r.psp_71);
    uint32_t status = 0;
    if (s.ring_exists) {
        chip_.violation("ring created while one exists (send GFX_CTRL_CMD_ID_DESTROY_RINGS first)", where, kPspSource);
        status = 0xffff;
    } else if (bytes == 0 || bytes % psp::kFrameBytes != 0 || !chip_.vram_offset(ring, bytes) || ring % 4096 != 0) {
        chip_.violation(fmt::format("ring at MC {} size {} is not 4 KiB aligned whole frames inside VRAM", hex(ring), bytes),
                        reg_name(r.psp_69), kPspSource);
        status = 0xffff;
    } else {
        s.ring_exists = 1;
        s.ring_mc = ring;
        s.ring_bytes = bytes;
        s.wptr = 0;
        chip_.store(r.psp_67, 0);
    }
    chip_.store(r.psp_64, field::kPspRingResponse | status);
}

void Psp::ring_submit(uint32_t wptr) {
    PspState& s = chip_.state().psp;
    const std::string where = reg_name(chip_.reg.psp_67);
    if (!s.ring_exists) {
        chip_.violation(fmt::format("write pointer {} with no ring", wptr), where, kPspSource);
        return;
    }
    const uint32_t ring_dwords = s.ring_bytes / 4;
    if (wptr != (s.wptr + psp::kFrameDwords) % ring_dwords) {
        chip_.violation(fmt::format("write pointer {} is not the previous one ({}) + 16 dwords (one psp_gfx_rb_frame)",
                                    wptr, s.wptr),
                        where, "Linux amdgpu_psp.c psp_ring_cmd_submit");
        return;
    }
    std::array<std::byte, psp::kFrameBytes> frame{};
    chip_.read_mc(s.ring_mc + uint64_t{s.wptr} * 4, frame);
    s.wptr = wptr;
    chip_.store(chip_.reg.psp_67, wptr);
    // psp_gfx_rb_frame: cmd_buf_addr_lo/hi +0/+4, cmd_buf_size +8, fence_addr_lo/hi +12/+16, fence_value +20.
    const uint64_t cmd_mc = u64_at(frame, 0);
    const uint64_t fence_mc = u64_at(frame, 12);
    const uint32_t fence_value = u32_at(frame, 20);
    if (!chip_.vram_offset(cmd_mc, psp::kCmdBytes) || !chip_.vram_offset(fence_mc, 4)) {
        chip_.violation(fmt::format("frame points outside VRAM: cmd buffer MC {} fence MC {}", hex(cmd_mc), hex(fence_mc)),
                        where, kPspSource);
        return;
    }
    std::vector<std::byte> cmd(psp::kCmdBytes);
    chip_.read_mc(cmd_mc, cmd);
    uint32_t tmr_size = 0;
    uint32_t status = execute(cmd, tmr_size);
    chip_.write_mc32(cmd_mc + psp::kRespStatusAt, status);
    if (u32_at(cmd, psp::kCmdIdAt) == psp::kCmdLoadToc) chip_.write_mc32(cmd_mc + psp::kRespTmrSizeAt, tmr_size);
    chip_.write_mc32(fence_mc, fence_value);
    if (chip_.port != nullptr) chip_.port->spend_ns(psp::kCommandNs);
    s.commands_done++;
}

uint32_t Psp::execute(std::span<std::byte> cmd, uint32_t& tmr_size) {
    PspState& s = chip_.state().psp;
    const uint32_t id = u32_at(cmd, psp::kCmdIdAt);
    if (s.inject_armed && s.inject_cmd_id == id) {
        s.inject_armed = 0;
        return s.inject_status;
    }
    std::string why;
    if (!firmware_.available(&why)) {
        chip_.violation("the model has no reference firmware: " + why, reg_name(chip_.reg.psp_67),
                        "drivers/sim/amdgpu/README.md");
        return psp::kStatusNotSupported;
    }
    switch (id) {
        case psp::kCmdLoadToc: return load_toc(cmd, tmr_size);
        case psp::kCmdLoadIpFw: return load_ip_fw(cmd);
        case psp::kCmdSetupTmr: return setup_tmr(cmd);
        case psp::kCmdAutoloadRlc: return autoload_rlc();
        default: return psp::kStatusNotSupported;
    }
}

uint32_t Psp::load_toc(std::span<const std::byte> cmd, uint32_t& tmr_size) {
    // psp_gfx_cmd_load_toc: toc_phy_addr_lo/hi, toc_size.
    const uint64_t mc = u64_at(cmd, psp::kCmdAt);
    const uint32_t size = u32_at(cmd, psp::kCmdAt + 8);
    auto toc = firmware_.sos_component(fw::amd::PspFwType::toc);
    if (!toc) return psp::kStatusNotSupported;
    if (!reachable(mc, size, fmt::format("LOAD_TOC at MC {}", hex(mc)), reg_name(chip_.reg.psp_67))) return psp::kStatusBadParameters;
    if (!matches(mc, size, *toc)) return psp::kStatusSecurity;
    chip_.state().psp.toc_loaded = 1;
    chip_.state().psp.tmr_size = psp::kTmrSize;
    tmr_size = psp::kTmrSize;
    return psp::kStatusOk;
}

uint32_t Psp::setup_tmr(std::span<const std::byte> cmd) {
    PspState& s = chip_.state().psp;
    const std::string where = reg_name(chip_.reg.psp_67);
    if (chip_.asic.boot_time_tmr()) {
        chip_.violation("SETUP_TMR on an MP0 whose TMR is set up at boot", where,
                        "Linux amdgpu_psp.c psp_tmr_init/psp_tmr_load (boot_time_tmr: 13.0.6, 13.0.14, 14.0.2, 14.0.3)");
        return psp::kStatusBadState;
    }
    if (!loaded(fw_type::kSmu)) {
        chip_.violation("SETUP_TMR before the SMU firmware", where,
                        "Linux amdgpu_psp.c psp_hw_start: TMR setup after PMFW is loaded");
        return psp::kStatusBadState;
    }
    if (firmware_.sos_component(fw::amd::PspFwType::toc) && !s.toc_loaded) {
        chip_.violation("SETUP_TMR before LOAD_TOC (the TOC gives the TMR size)", where,
                        "Linux amdgpu_psp.c psp_hw_start: psp_load_toc then psp_tmr_init");
        return psp::kStatusBadState;
    }
    // psp_gfx_cmd_setup_tmr: buf_phy_addr_lo/hi, buf_size, bitfield, system_phy_addr_lo/hi.
    const uint64_t mc = u64_at(cmd, psp::kCmdAt);
    const uint32_t size = u32_at(cmd, psp::kCmdAt + 8);
    if (mc % psp::kPspTmrAlignment != 0 || !chip_.vram_offset(mc, size) || size < s.tmr_size) {
        chip_.violation(fmt::format("TMR at MC {} size {}: must be 1 MiB aligned, inside VRAM and at least {}", hex(mc),
                                    hex(size), hex(s.tmr_size)),
                        where, "Linux amdgpu_psp.h PSP_TMR_ALIGNMENT; amdgpu_psp.c psp_tmr_init");
        return psp::kStatusBadParameters;
    }
    s.tmr_set_up = 1;
    return psp::kStatusOk;
}

uint32_t Psp::load_ip_fw(std::span<const std::byte> cmd) {
    PspState& s = chip_.state().psp;
    const std::string where = reg_name(chip_.reg.psp_67);
    // psp_gfx_cmd_load_ip_fw: fw_phy_addr_lo/hi, fw_size, fw_type.
    const uint64_t mc = u64_at(cmd, psp::kCmdAt);
    const uint32_t size = u32_at(cmd, psp::kCmdAt + 8);
    const uint32_t type = u32_at(cmd, psp::kCmdAt + 12);
    if (s.autoload_done) {
        chip_.violation(fmt::format("LOAD_IP_FW type {} after AUTOLOAD_RLC", type), where,
                        "Linux amdgpu_psp.c psp_load_non_psp_fw, then psp_rlc_autoload_start last");
        return psp::kStatusBadState;
    }
    auto expected = firmware_.ip_firmware(type);
    if (!expected) return psp::kStatusNotSupported;  // not a firmware type this chip takes
    if (type != fw_type::kSmu && !loaded(fw_type::kSmu)) {
        chip_.violation(fmt::format("LOAD_IP_FW type {} before the SMU firmware (type 18)", type), where,
                        "Linux amdgpu_psp.c psp_hw_start: PMFW first when C-state management is centralized");
        return psp::kStatusBadState;
    }
    if (type != fw_type::kSmu && !chip_.asic.boot_time_tmr() && !s.tmr_set_up) {
        chip_.violation(fmt::format("LOAD_IP_FW type {} before SETUP_TMR", type), where,
                        "Linux amdgpu_psp.c psp_hw_start: TMR before other non-psp firmware");
        return psp::kStatusBadState;
    }
    if (!reachable(mc, size, fmt::format("LOAD_IP_FW type {} at MC {}", type, hex(mc)), where)) return psp::kStatusBadParameters;
    if (!matches(mc, size, *expected)) return psp::kStatusSecurity;
    s.loaded_fw_types[type / 64] |= uint64_t{1} << (type % 64);
    if (type == fw_type::kSmu) chip_.state().smu.running = 1;  // the PSP starts the SMU's firmware
    return psp::kStatusOk;
}

uint32_t Psp::autoload_rlc() {
    PspState& s = chip_.state().psp;
    std::vector<uint32_t> needed = {fw_type::kSmu, fw_type::kSdmaUcodeTh0, fw_type::kRs64Mec, fw_type::kImuI,
                                    fw_type::kImuD};
    if (chip_.asic.gc_major() >= 12) {
        needed.push_back(fw_type::kRs64Pfp);
        needed.push_back(fw_type::kRs64Me);
    }
    // Every piece the ASIC's RLC file carries (RLC_G, and per its header's minor version the
    // save/restore lists, RLC_IRAM/RLC_DRAM_BOOT, RLC_P/RLC_V): the RLC autoload boots from them
    // (Linux gfx_v11_0/gfx_v12_0 front-door loading: amdgpu_gfx_rlc_init_microcode registers each).
    for (uint32_t t : firmware_.rlc_fw_types()) needed.push_back(t);
    std::string missing;
    for (uint32_t t : needed)
        if (!loaded(t)) missing += (missing.empty() ? "" : ", ") + std::to_string(t);
    if (!missing.empty() || s.autoload_done) {
        chip_.violation(s.autoload_done ? std::string("AUTOLOAD_RLC twice")
                                        : "AUTOLOAD_RLC before firmware types " + missing + " were loaded",
                        reg_name(chip_.reg.psp_67), "Linux amdgpu_psp.c psp_load_fw_list / psp_rlc_autoload_start");
        return psp::kStatusBadState;
    }
    s.autoload_done = 1;
    complete_rlc_autoload(chip_);
    return psp::kStatusOk;
}

void complete_rlc_autoload(Chip& chip) {
    // The RLC boots the GC: Linux gfx_v11_0_wait_for_rlc_autoload_complete waits for CP_STAT == 0 and
    // RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE == 1. Linux and tinygrad both start the SMU (its
    // features enabled) before that wait (amdgpu_discovery.c: smu before gfx; tinygrad AMDev:
    // init_hw(soc, gmc, ih, psp, smu) then gfx); whether the autoload needs it is not public. The
    // model finishes the autoload only once the SMU runs its features, so that the order shows.
    if (!chip.state().psp.autoload_done || !chip.state().smu.features_enabled) return;
    chip.store(chip.reg.rlc_bootload_status, chip.load(chip.reg.rlc_bootload_status) | field::kRlcBootloadComplete);
    chip.store(chip.reg.cp_stat, 0);
}

}  // namespace baregpu::sim::amdgpu
