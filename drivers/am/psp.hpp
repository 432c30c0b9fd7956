// The PSP (MP0): the secure processor that loads every other firmware. Bring-up: its bootloader
// takes the sOS package's components through the C2PMSG_35/36 mailbox; the running sOS then takes
// commands through a KM ring (C2PMSG_64/67/69-71). Command and frame layouts: Linux
// amdgpu/psp_gfx_if.h (psp_gfx_cmd_resp, psp_gfx_rb_frame, GFX_CMD_ID_*, GFX_FW_TYPE_*);
// bootloader commands: amdgpu_psp.h (enum psp_bootloader_cmd); sequence: psp_v13_0.c,
// psp_v14_0.c, amdgpu_psp.c (psp_hw_start, psp_load_fw, psp_cmd_submit_buf).
#pragma once

#include "drivers/am/registers.hpp"
#include "drivers/am/vram.hpp"

#include <array>
#include <functional>
#include <optional>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace baregpu::am {

// amdgpu_psp.h enum psp_bootloader_cmd
enum class PspBootloaderCmd : uint32_t {
    load_sysdrv = 0x10000,
    load_sosdrv = 0x20000,
    load_key_database = 0x80000,
    load_socdrv = 0xb0000,
    load_dbgdrv = 0xc0000,
    load_intfdrv = 0xd0000,
    load_rasdrv = 0xe0000,
    load_ipkeymgrdrv = 0xf0000,
    load_tos_spl_table = 0x10000000,
};

// psp_gfx_if.h enum psp_gfx_cmd_id
enum class PspGfxCmd : uint32_t {
    setup_tmr = 0x5,
    load_ip_fw = 0x6,
    load_toc = 0x20,
    autoload_rlc = 0x21,  // 33
};
const char* to_string(PspGfxCmd cmd);

// psp_gfx_if.h enum psp_gfx_fw_type (the ones drivers/am loads)
enum class PspFwType : uint32_t {
    rlc_v = 7,
    rlc_g = 8,
    smu = 18,
    rlc_restore_list_gpm_mem = 20,
    rlc_restore_list_srm_mem = 21,
    rlc_restore_list_srm_cntl = 22,
    rlc_p = 25,
    rlc_iram = 26,
    rlc_dram_boot = 48,
    imu_i = 68,
    imu_d = 69,
    sdma_th0 = 71,
    sdma_th1 = 72,
    rs64_pfp = 87,
    rs64_me = 88,
    rs64_mec = 89,
    rs64_pfp_p0_stack = 90,
    rs64_me_p0_stack = 92,
    rs64_mec_p0_stack = 94,
};
const char* to_string(PspFwType type);

inline constexpr uint32_t kGfxCtrlCmdDestroyRings = 0x30000;  // GFX_CTRL_CMD_ID_DESTROY_RINGS
inline constexpr uint32_t kPspRingTypeKm = 2;                 // PSP_RING_TYPE__KM
inline constexpr size_t kCmdRespSize = 1024;                  // sizeof(struct psp_gfx_cmd_resp)
inline constexpr size_t kRespStatusOffset = 864;              // psp_gfx_cmd_resp.resp.status
inline constexpr size_t kRespTmrSizeOffset = 880;             // psp_gfx_cmd_resp.resp.tmr_size
inline constexpr size_t kFrameSize = 64;                      // sizeof(struct psp_gfx_rb_frame)

using PspCmdBuffer = std::array<std::byte, kCmdRespSize>;
using PspFrame = std::array<std::byte, kFrameSize>;

// Pure encoders (unit-tested against the public layouts).
PspCmdBuffer encode_load_ip_fw(uint64_t fw_mc, uint32_t size, PspFwType type);
PspCmdBuffer encode_load_toc(uint64_t toc_mc, uint32_t size);
PspCmdBuffer encode_setup_tmr(uint64_t tmr_mc, uint64_t tmr_paddr, uint32_t size);
PspCmdBuffer encode_autoload_rlc();
PspFrame encode_frame(uint64_t cmd_mc, uint64_t fence_mc, uint32_t fence_value);

struct PspBuffers {
    uint64_t fb_base = 0;  // MC address of VRAM offset 0
    uint64_t msg1 = 0, cmd = 0, fence = 0, ring = 0, ring_size = 0;
    // Where firmware is staged instead of msg1, when set: system memory the PSP reads through the
    // MM hub (Linux keeps fw_pri in GTT). Writes the padded blob and returns its MC address, or
    // nullopt when it does not fit (then msg1 in VRAM). Over a USB bridge this is the bridge's
    // SRAM, which the host fills at bulk speed where BAR writes are one TLP per dword.
    std::function<std::optional<uint64_t>(std::span<const std::byte>)> stage_in_system;
    // Clear the KM ring at creation. The sOS reads only the frames the write pointer passes, all
    // written here, so a link where each VRAM write is a round trip leaves the old contents.
    bool zero_ring = true;
};

class Psp {
public:
    Psp(Registers& regs, Vram& vram, PspBuffers buffers, std::function<void()> flush_hdp);

    // sOS alive: C2PMSG_81 != 0 (psp_v13_0_is_sos_alive).
    bool sos_alive();
    uint32_t sos_version();
    // One bootloader component: wait ready, copy to msg1, HDP flush, C2PMSG_36 = msg1 >> 20,
    // C2PMSG_35 = cmd, wait ready again (not after SOS: the sOS takes over the mailbox).
    void load_bootloader_component(std::string_view name, std::span<const std::byte> blob, PspBootloaderCmd cmd);
    void wait_sos_alive();

    // Destroys a ring a previous owner left (C2PMSG_71 != 0), then creates ours. Returns whether
    // a stale ring was destroyed.
    bool ring_create();
    bool ring_exists();

    // Submits one command and waits for its fence; throws ProtocolError naming the command when
    // resp.status != 0. Returns the response buffer.
    PspCmdBuffer submit(const PspCmdBuffer& cmd, std::string_view what);
    // Copies the blob into msg1 and sends LOAD_IP_FW.
    void load_ip_fw(std::string_view what, std::span<const std::byte> blob, PspFwType type);
    uint32_t load_toc(std::span<const std::byte> toc);  // returns resp.tmr_size

    uint64_t commands_submitted() const { return submitted_; }

private:
    // The blob where the PSP reads it (system staging, else msg1): its MC address.
    uint64_t stage(std::string_view what, std::span<const std::byte> blob);
    Registers& regs_;
    Vram& vram_;
    PspBuffers b_;
    std::function<void()> flush_hdp_;
    uint32_t fence_value_ = 0;
    uint64_t submitted_ = 0;
};

}  // namespace baregpu::am
