// Compute class methods a QMD launch needs (AMPERE_COMPUTE_A 0xc6c0, AMPERE_COMPUTE_B 0xc7c0,
// ADA_COMPUTE_A 0xc9c0; offsets from open-gpu-kernel-modules src/common/sdk/nvidia/inc/class/clc6c0.h
// and clc7c0.h, which clc9c0's class shares): SEND_PCAS_A 0x02b4 (QMD_ADDRESS_SHIFTED8 31:0), then
// SEND_SIGNALING_PCAS2_B 0x02c0 (PCAS_ACTION 3:0: 2 SCHEDULE, 3 INVALIDATE_COPY_SCHEDULE).
#pragma once

#include "gpfifo.hpp"

#include <cstdint>

namespace baregpu::nv {

enum class ComputeClass : uint32_t { ampere_a = 0xc6c0, ampere_b = 0xc7c0, ada_a = 0xc9c0 };

namespace compute {
inline constexpr uint32_t SEND_PCAS_A = 0x02b4;
inline constexpr uint32_t SEND_SIGNALING_PCAS2_B = 0x02c0;
inline constexpr uint32_t kPcasActionSchedule = 2;
inline constexpr uint32_t kPcasActionInvalidateCopySchedule = 3;
}  // namespace compute

PushBuffer& compute_set_object(PushBuffer& pb, unsigned subchannel, ComputeClass cls = ComputeClass::ada_a);
// Launch the QMD at qmd_va (256-byte aligned, below 2^40: SHIFTED8 in 32 bits). Throws baregpu::Error
// (before writing) otherwise.
PushBuffer& compute_launch(PushBuffer& pb, unsigned subchannel, uint64_t qmd_va,
                           uint32_t action = compute::kPcasActionSchedule);

}  // namespace baregpu::nv
