#include "drivers/am/smu.hpp"

#include "base/error.hpp"
#include "drivers/am/wait.hpp"
#include "drivers/pci/pci_device.hpp"

#include <fmt/format.h>

namespace baregpu::am {

const char* to_string(SmuMsg msg) {
    switch (msg) {
        case SmuMsg::get_smu_version: return "GetSmuVersion";
        case SmuMsg::get_driver_if_version: return "GetDriverIfVersion";
        case SmuMsg::enable_all_smu_features: return "EnableAllSmuFeatures";
        case SmuMsg::get_running_smu_features_low: return "GetRunningSmuFeaturesLow";
        case SmuMsg::get_running_smu_features_high: return "GetRunningSmuFeaturesHigh";
        case SmuMsg::set_driver_dram_addr_high: return "SetDriverDramAddrHigh";
        case SmuMsg::set_driver_dram_addr_low: return "SetDriverDramAddrLow";
        case SmuMsg::transfer_table_smu2dram: return "TransferTableSmu2Dram";
        case SmuMsg::set_soft_min_by_freq: return "SetSoftMinByFreq";
        case SmuMsg::set_soft_max_by_freq: return "SetSoftMaxByFreq";
        case SmuMsg::get_dpm_freq_by_index: return "GetDpmFreqByIndex";
    }
    return "?";
}

const char* ppclk_name(uint32_t clk) {
    switch (clk) {
        case kPpclkGfx: return "GFXCLK";
        case kPpclkSoc: return "SOCCLK";
        case kPpclkUclk: return "UCLK";
        case kPpclkFclk: return "FCLK";
        default: return "?";
    }
}

namespace {
const char* resp_name(uint32_t r) {
    switch (r) {
        case 0xff: return "SMU_RESP_CMD_FAIL";
        case 0xfe: return "SMU_RESP_CMD_UNKNOWN";
        case 0xfd: return "SMU_RESP_CMD_BAD_PREREQ";
        case 0xfc: return "SMU_RESP_BUSY_OTHER";
        case 0xfb: return "SMU_RESP_DEBUG_END";
        default: return "unknown response";
    }
}
}  // namespace

SmuMetricsLayout smu_metrics_layout(unsigned mp1_major) {
    // offset of AverageGfxActivity = 4*PPCLK_COUNT + 2*14 (+ 2*16 moving averages on SMU 14)
    //                                + 4 (MetricsCounter) + 2*2*SVI_PLANE_COUNT
    uint32_t gfx = mp1_major >= 14 ? 4 * 11 + 28 + 32 + 4 + 4 * 4 : 4 * 13 + 28 + 4 + 4 * 5;
    // + 4 activities (u16) + EnergyAccumulator (u32) -> AverageSocketPower, AverageTotalBoardPower -> AvgTemperature
    return {gfx, gfx + 12, gfx + 16, gfx + 16 + 2 * 2};
}

SmuMetrics decode_smu_metrics(std::span<const std::byte> table, unsigned mp1_major) {
    SmuMetricsLayout l = smu_metrics_layout(mp1_major);
    auto u16 = [&](uint32_t at) -> unsigned {
        if (at + 2 > table.size()) return 0;
        return std::to_integer<unsigned>(table[at]) | std::to_integer<unsigned>(table[at + 1]) << 8;
    };
    SmuMetrics m{u16(l.gfx_activity), u16(l.socket_power), u16(l.temperature), u16(l.temperature + 2), {}};
    for (uint32_t c = 0; c < 4; ++c) m.current_mhz[c] = u16(4 * c) | u16(4 * c + 2) << 16;
    return m;
}

bool Smu::alive() {
    const RegisterTable& t = regs_.table();
    // A response register left non-zero means the SMU answered something: safe to send.
    regs_.write(t.smu_resp_90, 0);
    regs_.write(t.smu_param_82, 0);
    regs_.write(t.smu_msg_66, static_cast<uint32_t>(SmuMsg::get_smu_version));
    uint32_t resp = 0;
    poll_until(regs_.mmio().device(), std::chrono::milliseconds(100),
               [&] { return (resp = regs_.read(t.smu_resp_90)) != 0; });
    return resp == kSmuRespOk;
}

uint32_t Smu::send(SmuMsg msg, uint32_t param, std::chrono::nanoseconds timeout) {
    const RegisterTable& t = regs_.table();
    pci::PciDevice& dev = regs_.mmio().device();
    // smu_cmn_send_msg_without_waiting: clear the response, write the argument, then the message.
    regs_.write(t.smu_resp_90, 0);
    regs_.write(t.smu_param_82, param);
    regs_.write(t.smu_msg_66, static_cast<uint32_t>(msg));
    uint32_t resp = 0;
    if (!poll_until(dev, timeout, [&] { return (resp = regs_.read(t.smu_resp_90)) != 0; })) {
        throw TimeoutError(dev.name(), fmt::format("the SMU did not answer {} (param {:#x}) within {} ms: {} stayed 0",
                                                   to_string(msg), param,
                                                   std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count(),
                                                   t.smu_resp_90.name));
    }
    if (resp != kSmuRespOk) {
        throw ProtocolError(dev.name(), fmt::format("the SMU answered {} (param {:#x}) with {:#x} ({})", to_string(msg),
                                                    param, resp, resp_name(resp)));
    }
    return regs_.read(t.smu_param_82);
}

void Smu::send_debug(uint32_t msg, uint32_t param) {
    const RegisterTable& t = regs_.table();
    // smu_cmn_send_debug_smc_msg_with_param: param (53), message (75), response (54) cleared first.
    regs_.write(t.smu_debug_resp_54, 0);
    regs_.write(t.smu_debug_param_53, param);
    regs_.write(t.smu_debug_msg_75, msg);
}

uint64_t Smu::enabled_features() {
    uint64_t lo = send(SmuMsg::get_running_smu_features_low);
    uint64_t hi = send(SmuMsg::get_running_smu_features_high);
    return lo | (hi << 32);
}

void Smu::init(uint64_t driver_table_mc) {
    send(SmuMsg::set_driver_dram_addr_high, static_cast<uint32_t>(driver_table_mc >> 32));
    send(SmuMsg::set_driver_dram_addr_low, static_cast<uint32_t>(driver_table_mc));
    send(SmuMsg::enable_all_smu_features);
}

std::vector<uint32_t> Smu::dpm_levels(uint32_t clk) {
    uint32_t count = send(SmuMsg::get_dpm_freq_by_index, (clk << 16) | 0xff) & 0x7fffffff;
    std::vector<uint32_t> out;
    // smu_v13_0_get_dpm_freq_by_index (smu_v14_0 the same): the reply's bit 31 is not part of the
    // frequency, "*value = *value & 0x7fffffff".
    for (uint32_t i = 0; i < count && i < 16; ++i)
        out.push_back(send(SmuMsg::get_dpm_freq_by_index, (clk << 16) | i) & 0x7fffffff);
    return out;
}

void Smu::set_soft_limits(uint32_t clk, uint32_t min_mhz, uint32_t max_mhz) {
    send(SmuMsg::set_soft_min_by_freq, (clk << 16) | (min_mhz & 0xffff));
    send(SmuMsg::set_soft_max_by_freq, (clk << 16) | (max_mhz & 0xffff));
}

std::vector<ClockLimit> Smu::pin_clocks_to_max() {
    std::vector<ClockLimit> out;
    for (uint32_t clk : {kPpclkGfx, kPpclkUclk, kPpclkFclk, kPpclkSoc}) {
        std::vector<uint32_t> levels = dpm_levels(clk);
        if (levels.empty()) {
            throw ProtocolError(regs_.mmio().device().name(),
                                fmt::format("the SMU reports no DPM levels for {} (GetDpmFreqByIndex count 0): cannot "
                                            "pin it", ppclk_name(clk)));
        }
        uint32_t top = levels.back();
        set_soft_limits(clk, top, top);
        out.push_back({clk, top, top});
    }
    return out;
}

}  // namespace baregpu::am
