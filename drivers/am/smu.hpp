// The SMU (MP1): power management firmware, driven through a mailbox (msg C2PMSG_66, param _82,
// response _90; Linux smu_cmn.c) and a debug mailbox (msg _75, param _53, response _54).
// Messages: pm/swsmu/inc/pmfw_if/smu_v13_0_0_ppsmc.h and smu_v14_0_2_ppsmc.h (same numbers for
// those used here). Responses: smu_cmn.h SMU_RESP_*.
#pragma once

#include "drivers/am/registers.hpp"

#include <chrono>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace baregpu::am {

enum class SmuMsg : uint32_t {
    get_smu_version = 0x2,
    get_driver_if_version = 0x3,
    enable_all_smu_features = 0x6,
    get_running_smu_features_low = 0xc,
    get_running_smu_features_high = 0xd,
    set_driver_dram_addr_high = 0xe,
    set_driver_dram_addr_low = 0xf,
    transfer_table_smu2dram = 0x12,
    set_soft_min_by_freq = 0x19,
    set_soft_max_by_freq = 0x1a,
    get_dpm_freq_by_index = 0x1f,
};
const char* to_string(SmuMsg msg);

inline constexpr uint32_t kSmuRespOk = 0x1;            // SMU_RESP_OK
inline constexpr uint32_t kDebugSmcMsgMode1Reset = 2;  // DEBUGSMC_MSG_Mode1Reset
inline constexpr uint32_t kTableSmuMetrics = 5;        // smu13/14 driver_if TABLE_SMU_METRICS
// PPCLK_e (smu13_driver_if_v13_0_0.h): GFXCLK 0, SOCCLK 1, UCLK 2, FCLK 3
inline constexpr uint32_t kPpclkGfx = 0, kPpclkSoc = 1, kPpclkUclk = 2, kPpclkFclk = 3;
const char* ppclk_name(uint32_t clk);  // "GFXCLK", "SOCCLK", "UCLK", "FCLK"

// A clock's soft limits as the driver set them (SetSoftMinByFreq / SetSoftMaxByFreq).
struct ClockLimit {
    uint32_t clk = 0;  // PPCLK_e
    uint32_t min_mhz = 0, max_mhz = 0;
};

// What amctl shows from SmuMetrics_t. Offsets are computed from the headers' layouts:
// smu13_driver_if_v13_0_0.h: CurrClock[PPCLK_COUNT = 13], 14 u16 averages, MetricsCounter,
//   AvgVoltage/AvgCurrent[SVI_PLANE_COUNT = 5], AverageGfxActivity (104), AverageUclkActivity,
//   Vcn0/Vcn1 activity, EnergyAccumulator (u32), AverageSocketPower (116, W), AverageTotalBoardPower,
//   AvgTemperature[TEMP_COUNT] (120; TEMP_EDGE 0, TEMP_HOTSPOT 1, degrees C).
// smu14_driver_if_v14_0.h: CurrClock[PPCLK_COUNT = 11], the same 14 u16, 16 u16 MovingAverage*,
//   MetricsCounter, AvgVoltage/AvgCurrent[SVI_PLANE_COUNT = 4], then the same tail: gfx activity 124,
//   socket power 136, AvgTemperature 140.
struct SmuMetrics {
    unsigned gfx_activity_percent = 0;
    unsigned socket_power_w = 0;
    unsigned edge_temperature_c = 0;
    unsigned hotspot_temperature_c = 0;
    uint32_t current_mhz[4] = {};  // CurrClock[PPCLK_GFXCLK .. PPCLK_FCLK] (offset 0, u32 each)
};
struct SmuMetricsLayout {
    uint32_t gfx_activity, socket_power, temperature, size;
};
SmuMetricsLayout smu_metrics_layout(unsigned mp1_major);
SmuMetrics decode_smu_metrics(std::span<const std::byte> table, unsigned mp1_major);

class Smu {
public:
    explicit Smu(Registers& regs) : regs_(regs) {}

    // A short probe (100 ms): does the SMU firmware answer GetSmuVersion?
    bool alive();
    // Sends `msg` and returns the param register's read-back. Throws TimeoutError when no answer
    // comes, ProtocolError when the answer is not OK (naming the message and the code).
    uint32_t send(SmuMsg msg, uint32_t param = 0,
                  std::chrono::nanoseconds timeout = std::chrono::seconds(10));
    // The debug mailbox: writes, no response expected (mode1 reset).
    void send_debug(uint32_t msg, uint32_t param = 0);

    uint32_t version() { return send(SmuMsg::get_smu_version); }
    uint64_t enabled_features();
    // smu_v13_0_set_driver_table_location / EnableAllSmuFeatures, as tinygrad's init_hw.
    void init(uint64_t driver_table_mc);
    // GetDpmFreqByIndex: count with index 0xff, then each level (MHz).
    std::vector<uint32_t> dpm_levels(uint32_t clk);
    void set_soft_limits(uint32_t clk, uint32_t min_mhz, uint32_t max_mhz);
    // tinygrad ip.py AM_SMU.set_clocks(level = -1), as at tinygrad's boot: GFXCLK, UCLK, FCLK, SOCCLK each
    // pinned (soft min = soft max) to its highest DPM level. Unlike tinygrad, a failure is not
    // ignored: a clock with no DPM levels or a refused message throws (ProtocolError/TimeoutError).
    std::vector<ClockLimit> pin_clocks_to_max();
    // TransferTableSmu2Dram(TABLE_SMU_METRICS): the SMU writes SmuMetricsExternal_t to the driver table.
    void transfer_metrics() { send(SmuMsg::transfer_table_smu2dram, kTableSmuMetrics); }

private:
    Registers& regs_;
};

}  // namespace baregpu::am
