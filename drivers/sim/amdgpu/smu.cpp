#include "drivers/sim/amdgpu/smu.hpp"

#include "drivers/sim/amdgpu/psp.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <vector>

namespace baregpu::sim::amdgpu {

namespace {

constexpr const char* kSmuSource = "Linux pm/swsmu/smu_cmn.c smu_cmn_send_smc_msg_with_param";

// Modelled DPM levels in MHz (plausible RDNA3/RDNA4 numbers; the firmware's real table is in
// the board's pptable and not public in this form).
constexpr uint32_t kGfxclk[] = {500, 1500, 2300, 2500};
constexpr uint32_t kSocclk[] = {500, 960, 1200};
constexpr uint32_t kUclk[] = {96, 456, 772, 1249};
constexpr uint32_t kFclk[] = {400, 1200, 1900, 2250};

// Where SmuMetrics_t keeps what the model reports (smu13_driver_if_v13_0_0.h /
// smu14_driver_if_v14_0.h): CurrClock[] at 0, AverageGfxActivity, AverageSocketPower (W),
// AvgTemperature[TEMP_COUNT] (degrees C; TEMP_EDGE 0, TEMP_HOTSPOT 1, TEMP_MEM 4).
struct MetricsLayout {
    uint32_t gfx_activity, socket_power, temperature, bytes;  // bytes: sizeof(SmuMetricsExternal_t)
};
constexpr MetricsLayout kMetrics13{104, 116, 120, 392};
constexpr MetricsLayout kMetrics14{124, 136, 140, 412};

}  // namespace

std::span<const uint32_t> Smu::dpm_levels(uint32_t clock) {
    switch (clock) {
        case 0: return kGfxclk;
        case 1: return kSocclk;
        case 2: return kUclk;
        case 3: return kFclk;
        default: return {};
    }
}

uint32_t Smu::current_mhz(uint32_t clock) {
    // Idle at the lowest level, raised to the soft minimum, held under the soft maximum (0 and
    // 0xffff: not limited), within the DPM table.
    const SmuState& s = chip_.state().smu;
    auto levels = dpm_levels(clock);
    uint32_t hi = levels.back();
    if (s.soft_max[clock] != 0 && s.soft_max[clock] != 0xffff) hi = std::min(hi, s.soft_max[clock]);
    uint32_t f = std::max(levels.front(), s.soft_min[clock]);
    return std::min(f, hi);
}

void Smu::reconnect() {
    SmuState& s = chip_.state().smu;
    if (s.pending && !s.hung) s.answer_at_ns = 0;
    s.reset_done_at_ns = 0;
}

void Smu::post_answer() {
    SmuState& s = chip_.state().smu;
    if (!s.pending || s.hung || chip_.now() < s.answer_at_ns) return;
    s.pending = 0;
    if (s.answer_param_valid) chip_.store(chip_.reg.smu_param, s.answer_param);
    chip_.store(chip_.reg.smu_resp, s.answer);
}

bool Smu::read(uint32_t address, uint32_t& value) {
    const RegisterMap& r = chip_.reg;
    if (address != r.smu_resp && address != r.smu_param && address != r.smu_msg) return false;
    post_answer();
    value = chip_.load(address);
    return true;
}

bool Smu::write(uint32_t address, uint32_t value) {
    const RegisterMap& r = chip_.reg;
    const bool resetting = chip_.now() < chip_.state().smu.reset_done_at_ns;
    if (address == r.smu_msg || address == r.smu_debug_msg) {
        if (resetting) {
            chip_.violation("SMU message during mode1 reset", reg_name(address),
                            "Linux smu_v13_0_0_ppt.c: msleep(SMU13_MODE1_RESET_WAIT_TIME_IN_MS) after the reset");
            return true;
        }
        chip_.store(address, value);
        if (address == r.smu_msg) {
            message(value, chip_.load(r.smu_param));
        } else {
            debug_message(value);
        }
        return true;
    }
    if (address == r.smu_resp || address == r.smu_param) {
        post_answer();
        chip_.store(address, value);
        return true;
    }
    return false;
}

void Smu::message(uint32_t msg, uint32_t param) {
    SmuState& s = chip_.state().smu;
    if (!s.running) return;  // no firmware: nobody answers (the liveness probe times out)
    post_answer();
    const std::string where = reg_name(chip_.reg.smu_msg);
    if (s.pending) {
        chip_.violation(fmt::format("message {} while message is still being processed (C2PMSG_90 == 0)", hex(msg)),
                        where, kSmuSource + std::string(": smu_cmn_wait_for_response before the next message"));
        return;
    }
    if (chip_.load(chip_.reg.smu_resp) != 0) {
        chip_.violation(fmt::format("message {} without clearing C2PMSG_90 first", hex(msg)), where,
                        kSmuSource + std::string(": WREG32(C2PMSG_90, 0) before the parameter and message"));
    }
    s.pending = 1;
    if (s.hung) {
        s.answer_at_ns = std::numeric_limits<uint64_t>::max();
        return;
    }
    uint32_t out = 0;
    bool has_out = false;
    s.answer = handle(msg, param, out, has_out);
    if (chip_.now() < s.reset_done_at_ns) return;  // Mode1Reset: the SMU itself was reset, nobody answers
    s.answer_param = out;
    s.answer_param_valid = has_out ? 1 : 0;
    s.answer_at_ns = chip_.now() + smu::kAnswerNs;
}

uint32_t Smu::handle(uint32_t msg, uint32_t param, uint32_t& out, bool& has_out) {
    SmuState& s = chip_.state().smu;
    const bool mp13 = chip_.asic.version(hwid::kMp1).major == 13;
    auto answer = [&](uint32_t v) {
        out = v;
        has_out = true;
        return smu::kResultOk;
    };
    switch (msg) {
        case smu::kMsgTestMessage: return answer(param + 1);
        case smu::kMsgGetSmuVersion: return answer(firmware_.smu_version());
        // SMU13_0_0_DRIVER_IF_VERSION 0x3D (smu13_driver_if_v13_0_0.h);
        // SMU14_DRIVER_IF_VERSION_SMU_V14_0_2 0x2E (smu_v14_0.h; later trees: smu_v14_0_2_ppt.c).
        case smu::kMsgGetDriverIfVersion: return answer(mp13 ? 0x3D : 0x2E);
        case smu::kMsgEnableAllSmuFeatures:
            s.features_enabled = 1;
            complete_rlc_autoload(chip_);
            return smu::kResultOk;
        case smu::kMsgDisableAllSmuFeatures: s.features_enabled = 0; return smu::kResultOk;
        case smu::kMsgGetRunningSmuFeaturesLow: return answer(s.features_enabled ? 0xffffffff : 0);
        case smu::kMsgGetRunningSmuFeaturesHigh: return answer(s.features_enabled ? 0x0000ffff : 0);
        case smu::kMsgSetDriverDramAddrHigh: s.driver_table_hi = param; return smu::kResultOk;
        case smu::kMsgSetDriverDramAddrLow: s.driver_table_lo = param; return smu::kResultOk;
        case smu::kMsgTransferTableSmu2Dram:
            if ((param & 0xffff) != smu::kTableSmuMetrics) return smu::kResultFailed;  // only the metrics table is modelled
            return write_metrics();
        case smu::kMsgSetSoftMinByFreq:
        case smu::kMsgSetSoftMaxByFreq: {
            uint32_t clock = param >> 16, mhz = param & 0xffff;
            if (clock >= smu::kClockCount) return smu::kResultFailed;
            (msg == smu::kMsgSetSoftMinByFreq ? s.soft_min : s.soft_max)[clock] = mhz;
            return smu::kResultOk;
        }
        case smu::kMsgGetDpmFreqByIndex: {
            // param: clock << 16 | level; level 0xff asks for the number of levels (smu_v13_0.c
            // smu_v13_0_get_dpm_level_count; bit 31 of the answer flags fine-grained DPM).
            auto levels = dpm_levels(param >> 16);
            uint32_t level = param & 0xffff;
            if (levels.empty()) return smu::kResultFailed;
            if (level == 0xff) return answer(static_cast<uint32_t>(levels.size()));
            if (level >= levels.size()) return smu::kResultFailed;
            return answer(levels[level]);
        }
        case smu::kMsgSetPptLimit: return smu::kResultOk;
        case smu::kMsgMode1Reset:
            if (!mp13) return smu::kResultUnknownCmd;
            chip_.mode1_reset();
            return smu::kResultOk;
        default: return smu::kResultUnknownCmd;
    }
}

uint32_t Smu::write_metrics() {
    SmuState& s = chip_.state().smu;
    const uint64_t table = (uint64_t{s.driver_table_hi} << 32) | s.driver_table_lo;
    if (table == 0) return smu::kResultCmdRejectedPrereq;  // SetDriverDramAddr first
    const MetricsLayout& m = chip_.asic.version(hwid::kMp1).major == 13 ? kMetrics13 : kMetrics14;
    std::vector<std::byte> bytes(m.bytes);
    auto put16 = [&](uint32_t at, uint16_t v) { std::memcpy(bytes.data() + at, &v, 2); };
    auto put32 = [&](uint32_t at, uint32_t v) { std::memcpy(bytes.data() + at, &v, 4); };
    for (uint32_t c = 0; c < smu::kClockCount; ++c) put32(4 * c, current_mhz(c));
    s.metrics_counter++;
    put16(m.gfx_activity, 0);
    put16(m.socket_power, static_cast<uint16_t>(s.features_enabled ? 62 : 35));  // W
    put16(m.temperature + 0, 45);  // TEMP_EDGE
    put16(m.temperature + 2, 58);  // TEMP_HOTSPOT
    put16(m.temperature + 8, 52);  // TEMP_MEM
    if (!chip_.write_mc(table, bytes)) {
        chip_.violation(fmt::format("driver table at MC {} is not in VRAM (system memory is not modelled)", hex(table)),
                        reg_name(chip_.reg.smu_msg), "drivers/sim/amdgpu/README.md");
        return smu::kResultFailed;
    }
    return smu::kResultOk;
}

void Smu::debug_message(uint32_t msg) {
    SmuState& s = chip_.state().smu;
    if (!s.running || s.hung) return;
    if (msg != smu::kDebugMsgMode1Reset) {
        chip_.store(chip_.reg.smu_debug_resp, smu::kResultUnknownCmd);
        return;
    }
    chip_.mode1_reset();
}

}  // namespace baregpu::sim::amdgpu
