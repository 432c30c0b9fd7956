// MP0, the Platform Security Processor, as a driver sees it through the C2PMSG mailbox:
//  * the bootloader (C2PMSG_35 command / _36 address >> 20): loads the sOS package's components
//    in Linux's order (psp_v13_0.c / psp_v14_0.c bootloader_load_*), each compared byte for byte
//    with the ASIC's real psp_*_sos.bin, until the sOS runs (C2PMSG_81 != 0);
//  * the KM ring (C2PMSG_64 control, _69/_70/_71 base and size, _67 write pointer in dwords):
//    psp_gfx_rb_frame entries pointing at 1024-byte psp_gfx_cmd_resp buffers (psp_gfx_if.h);
//    the answer is resp.status at byte 864 (and tmr_size at 880 for LOAD_TOC) and the fence.
// Commands are checked as the PSP checks them: firmware must be the real file's bytes for that
// GFX_FW_TYPE, SMU firmware before SETUP_TMR and SETUP_TMR before other IP firmware on MP0 13.0.0
// (amdgpu_psp.c psp_hw_start: "TMR setup should be performed after PMFW loaded and before other
// non-psp firmware loaded"), AUTOLOAD_RLC last and only once RLC, IMU, CP and SDMA firmware are in.
#pragma once

#include "drivers/sim/amdgpu/chip.hpp"
#include "drivers/sim/amdgpu/reference_firmware.hpp"

#include <cstdint>

namespace baregpu::sim::amdgpu {

namespace psp {
// enum psp_bootloader_cmd (amdgpu_psp.h).
inline constexpr uint32_t kBlLoadSysDrv = 0x10000, kBlLoadSosDrv = 0x20000, kBlLoadKeyDatabase = 0x80000,
                          kBlLoadSocDrv = 0xB0000, kBlLoadDbgDrv = 0xC0000, kBlLoadIntfDrv = 0xD0000,
                          kBlLoadRasDrv = 0xE0000, kBlLoadIpKeyMgrDrv = 0xF0000, kBlLoadTosSplTable = 0x10000000;
// enum psp_gfx_crtl_cmd_id (psp_gfx_if.h) and enum psp_ring_type (amdgpu_psp.h).
inline constexpr uint32_t kCtrlDestroyRings = 0x30000;
inline constexpr uint32_t kRingTypeKm = 2;
// enum psp_gfx_cmd_id (psp_gfx_if.h).
inline constexpr uint32_t kCmdSetupTmr = 5, kCmdLoadIpFw = 6, kCmdLoadToc = 0x20, kCmdAutoloadRlc = 0x21;
// Layouts (psp_gfx_if.h): psp_gfx_rb_frame 64 bytes, psp_gfx_cmd_resp 1024 bytes with cmd_id at
// +8, the command union at +28 and psp_gfx_resp at +864 (status +0, tmr_size +16).
inline constexpr uint32_t kFrameBytes = 64, kFrameDwords = 16, kCmdBytes = 1024;
inline constexpr uint32_t kCmdIdAt = 8, kCmdAt = 28, kRespStatusAt = 864, kRespTmrSizeAt = 880;
// Answers. psp_gfx_if.h defines TEE_ERROR_NOT_SUPPORTED; the others are the GlobalPlatform TEE
// Internal Core API's TEE_Result values the PSP's trusted OS uses (the real codes for a failed
// signature check are not public: the model answers TEE_ERROR_SECURITY).
inline constexpr uint32_t kStatusOk = 0;
inline constexpr uint32_t kStatusBadParameters = 0xFFFF0006;
inline constexpr uint32_t kStatusBadState = 0xFFFF0007;
inline constexpr uint32_t kStatusNotSupported = 0xFFFF000A;
inline constexpr uint32_t kStatusSecurity = 0xFFFF000F;
// Bootloader: low 16 bits of C2PMSG_35 after a refused component (a model choice; Linux only
// waits for bit 31 and then for the sOS to come alive).
inline constexpr uint32_t kBootloaderRefused = 0xffff;
inline constexpr uint32_t kPspTmrAlignment = 0x100000;  // PSP_TMR_ALIGNMENT (amdgpu_psp.h)
// What LOAD_TOC answers as tmr_size (a modelled value; tinygrad asserts <= 0x1300000).
inline constexpr uint32_t kTmrSize = 0xE00000;
// Modelled busy times.
inline constexpr uint64_t kComponentLoadNs = 10'000'000, kSosStartNs = 100'000'000, kRingControlNs = 5'000'000,
                          kCommandNs = 50'000;
}  // namespace psp

class Psp {
public:
    Psp(Chip& chip, ReferenceFirmware& firmware) : chip_(chip), firmware_(firmware) {}

    bool read(uint32_t address, uint32_t& value);
    bool write(uint32_t address, uint32_t value);
    // Clears busy phases that were running when the previous process left (time has passed).
    void reconnect();

private:
    bool busy() const;
    void bootloader_command(uint32_t command);
    void ring_control(uint32_t value);
    void ring_submit(uint32_t wptr);
    uint32_t execute(std::span<std::byte> cmd, uint32_t& tmr_size);
    uint32_t load_ip_fw(std::span<const std::byte> cmd);
    uint32_t setup_tmr(std::span<const std::byte> cmd);
    uint32_t load_toc(std::span<const std::byte> cmd, uint32_t& tmr_size);
    uint32_t autoload_rlc();
    bool loaded(uint32_t type) const;
    // Where a firmware buffer at `mc` can be read from: VRAM, or system memory through the MM hub's
    // AGP aperture (inside the system aperture); nullopt (with a violation naming `what`) otherwise.
    bool reachable(uint64_t mc, uint64_t size, const std::string& what, const std::string& where);
    // Compares [mc, mc + expected.size()) (VRAM, or system memory through the AGP aperture) with expected.
    bool matches(uint64_t mc, uint64_t size, std::span<const std::byte> expected);
    // The bus address the MM hub's AGP aperture maps `mc` to, when it does.
    std::optional<uint64_t> agp_bus_address(uint64_t mc, uint64_t size) const;

    Chip& chip_;
    ReferenceFirmware& firmware_;
};

// Sets RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE and CP_STAT idle once AUTOLOAD_RLC has run and the
// SMU's features are enabled (whichever comes last calls it; psp.cpp says why).
void complete_rlc_autoload(Chip& chip);

}  // namespace baregpu::sim::amdgpu
