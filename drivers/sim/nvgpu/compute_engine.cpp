// The compute class behind a subchannel bound to AMPERE_COMPUTE_A/B or ADA_COMPUTE_A: stores its
// methods; the QMD launch (SEND_PCAS_A + SEND_SIGNALING_PCAS2_B) is not modelled yet and stops the
// channel with a bad_launch fault naming the QMD.
// clc6c0.h: SEND_PCAS_A 0x02b4 (QMD_ADDRESS_SHIFTED8 31:0), SEND_SIGNALING_PCAS2_B 0x02c0 (PCAS_ACTION 3:0).
#include "gpu_engines.hpp"
#include "gpu_engines_internal.hpp"

#include <fmt/format.h>

namespace baregpu::sim::nvgpu {

namespace {
constexpr uint32_t SEND_PCAS_A = 0x02b4, SEND_SIGNALING_PCAS2_B = 0x02c0;
}

GpuEngines::Step GpuEngines::compute_method(Channel& c, unsigned subchannel, uint32_t method, uint32_t data) {
    c.methods[subchannel][method / 4] = data;
    if (method != SEND_SIGNALING_PCAS2_B) return Step::ok;
    uint32_t action = data & 0xf;
    if (action == 0 || action == 1) return Step::ok;  // NOP, INVALIDATE
    uint64_t qmd_va = uint64_t{c.mthd(subchannel, SEND_PCAS_A)} << 8;
    return launch_qmd(c, subchannel, qmd_va, 0);
}

GpuEngines::Step GpuEngines::launch_qmd(Channel& c, unsigned subchannel, uint64_t qmd_va, unsigned) {
    EngineFault e;
    e.kind = EngineFault::Kind::bad_launch;
    e.subchannel = subchannel;
    e.method = SEND_SIGNALING_PCAS2_B;
    e.address = qmd_va;
    e.what = fmt::format("QMD launch at {:#x}: compute launches are not modelled yet", qmd_va);
    return stop(c, e);
}

}  // namespace baregpu::sim::nvgpu
