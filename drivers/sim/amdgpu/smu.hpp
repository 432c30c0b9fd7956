// MP1, the System Management Unit, through its two mailboxes (Linux smu_cmn.c):
//  * the message mailbox C2PMSG_66 (message) / _82 (parameter, and the answer's value) / _90
//    (response: 1 OK, 0xFF failed, 0xFE unknown, 0xFD prerequisite missing, 0xFC busy —
//    smu_v13_0_0_ppsmc.h / smu_v14_0_2_ppsmc.h PPSMC_Result_*);
//  * the debug mailbox C2PMSG_75 / _53 / _54, which takes DEBUGSMC_MSG_Mode1Reset (2) on MP1
//    13.0.0 and 14.x (smu_v13_0_0_ppt.c / smu_v14_0_2_ppt.c mode1_reset).
// The SMU only answers once the PSP has loaded its firmware (LOAD_IP_FW type SMU). Answers take
// modelled time; a message written before the previous one was answered, or without clearing
// C2PMSG_90 first, is a violation. TransferTableSmu2Dram(TABLE_SMU_METRICS) writes a
// SmuMetricsExternal_t with temperatures and power into VRAM at the driver table's MC address.
#pragma once

#include "drivers/sim/amdgpu/chip.hpp"
#include "drivers/sim/amdgpu/reference_firmware.hpp"

namespace baregpu::sim::amdgpu {

namespace smu {
// PPSMC_MSG_* (smu_v13_0_0_ppsmc.h; smu_v14_0_2_ppsmc.h has the same values for these).
inline constexpr uint32_t kMsgTestMessage = 0x1, kMsgGetSmuVersion = 0x2, kMsgGetDriverIfVersion = 0x3,
                          kMsgEnableAllSmuFeatures = 0x6, kMsgDisableAllSmuFeatures = 0x7,
                          kMsgGetRunningSmuFeaturesLow = 0xC, kMsgGetRunningSmuFeaturesHigh = 0xD,
                          kMsgSetDriverDramAddrHigh = 0xE, kMsgSetDriverDramAddrLow = 0xF,
                          kMsgTransferTableSmu2Dram = 0x12, kMsgSetSoftMinByFreq = 0x19, kMsgSetSoftMaxByFreq = 0x1A,
                          kMsgGetDpmFreqByIndex = 0x1F, kMsgMode1Reset = 0x2F /* 13.0.0 only */, kMsgSetPptLimit = 0x32;
inline constexpr uint32_t kDebugMsgMode1Reset = 2;  // DEBUGSMC_MSG_Mode1Reset (smu_v13_0_0_ppt.c)
// PPSMC_Result_*.
inline constexpr uint32_t kResultOk = 0x1, kResultFailed = 0xFF, kResultUnknownCmd = 0xFE,
                          kResultCmdRejectedPrereq = 0xFD;
inline constexpr uint32_t kTableSmuMetrics = 5;  // TABLE_SMU_METRICS (smu13_driver_if_v13_0_0.h, smu14_driver_if_v14_0.h)
inline constexpr uint32_t kClockCount = 4;       // PPCLK_GFXCLK 0, SOCCLK 1, UCLK 2, FCLK 3 (modelled ones)
inline constexpr uint64_t kAnswerNs = 20'000;            // a message takes 20 us of modelled time
inline constexpr uint64_t kMode1ResetNs = 300'000'000;   // the chip is in reset this long
}  // namespace smu

class Smu {
public:
    Smu(Chip& chip, ReferenceFirmware& firmware) : chip_(chip), firmware_(firmware) {}

    bool read(uint32_t address, uint32_t& value);
    bool write(uint32_t address, uint32_t value);
    void reconnect();  // answers what was pending and ends a reset when a new process attaches

    // The modelled DPM table: frequency in MHz of level `level` of clock `clock`.
    static std::span<const uint32_t> dpm_levels(uint32_t clock);
    // What CurrClock[clock] of the metrics table reports: the DPM table clamped by the soft limits.
    uint32_t current_mhz(uint32_t clock);

private:
    void post_answer();
    void message(uint32_t msg, uint32_t param);
    void debug_message(uint32_t msg);
    uint32_t handle(uint32_t msg, uint32_t param, uint32_t& out_param, bool& has_out);
    uint32_t write_metrics();

    Chip& chip_;
    ReferenceFirmware& firmware_;
};

}  // namespace baregpu::sim::amdgpu
