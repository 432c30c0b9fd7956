#include "compute_methods.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

namespace baregpu::nv {

PushBuffer& compute_set_object(PushBuffer& pb, unsigned subchannel, ComputeClass cls) {
    return pb.incr(subchannel, host::SET_OBJECT, {static_cast<uint32_t>(cls)});
}

PushBuffer& compute_launch(PushBuffer& pb, unsigned subchannel, uint64_t qmd_va, uint32_t action) {
    if (qmd_va % 256 != 0 || (qmd_va >> 40) != 0)
        throw Error("", fmt::format("compute: QMD at {:#x} must be 256-byte aligned and below 2^40 "
                                    "(SEND_PCAS_A QMD_ADDRESS_SHIFTED8 31:0)", qmd_va));
    if (action != compute::kPcasActionSchedule && action != compute::kPcasActionInvalidateCopySchedule)
        throw Error("", fmt::format("compute: PCAS_ACTION {} does not launch (2 SCHEDULE, 3 INVALIDATE_COPY_SCHEDULE)",
                                    action));
    pb.incr(subchannel, compute::SEND_PCAS_A, {static_cast<uint32_t>(qmd_va >> 8)});
    return pb.incr(subchannel, compute::SEND_SIGNALING_PCAS2_B, {action});
}

}  // namespace baregpu::nv
