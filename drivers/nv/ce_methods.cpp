#include "ce_methods.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

namespace baregpu::nv {

namespace {
void check_va(uint64_t va, const char* what) {
    if (va >> 49)  // *_UPPER 16:0 holds VA bits 48:32
        throw Error("", fmt::format("copy engine: {} {:#x} is beyond 49 bits (clc7b5.h {}_UPPER 16:0)", what, va, what));
}
uint32_t semaphore_bits(const CeRelease& r) {
    return (r.timestamp ? ce::kSemaphoreFourWord : ce::kSemaphoreOneWord) | (r.payload64 ? ce::kPayloadTwoWord : 0u) |
           (r.interrupt ? ce::kInterruptNonBlocking : 0u);
}
void check_release(const CeRelease& r) {
    check_va(r.va, "SET_SEMAPHORE");
    if (r.va % (r.payload64 || r.timestamp ? 8 : 4) != 0)
        throw Error("", fmt::format("copy engine: semaphore {:#x} is not aligned to its payload", r.va));
    if (!r.payload64 && (r.payload >> 32))
        throw Error("", fmt::format("copy engine: one-word semaphore payload {:#x} is over 32 bits", r.payload));
}
PushBuffer& semaphore_methods(PushBuffer& pb, unsigned subchannel, const CeRelease& r) {
    return pb.incr(subchannel, ce::SET_SEMAPHORE_A,
                   {static_cast<uint32_t>(r.va >> 32), static_cast<uint32_t>(r.va), static_cast<uint32_t>(r.payload),
                    static_cast<uint32_t>(r.payload >> 32)});
}
}  // namespace

PushBuffer& ce_set_object(PushBuffer& pb, unsigned subchannel, CopyClass cls) {
    return pb.incr(subchannel, host::SET_OBJECT, {static_cast<uint32_t>(cls)});
}

PushBuffer& ce_copy(PushBuffer& pb, unsigned subchannel, uint64_t src_va, uint64_t dst_va, uint64_t bytes,
                    const std::optional<CeRelease>& release) {
    check_va(src_va, "OFFSET_IN");
    check_va(dst_va, "OFFSET_OUT");
    if (bytes == 0 || bytes > 0xffffffffu)
        throw Error("", fmt::format("copy engine: LINE_LENGTH_IN {} must be 1 .. 2^32 - 1 bytes", bytes));
    if (release) check_release(*release);
    pb.incr(subchannel, ce::OFFSET_IN_UPPER,
            {static_cast<uint32_t>(src_va >> 32), static_cast<uint32_t>(src_va), static_cast<uint32_t>(dst_va >> 32),
             static_cast<uint32_t>(dst_va)});
    pb.incr(subchannel, ce::LINE_LENGTH_IN, {static_cast<uint32_t>(bytes)});
    uint32_t launch = ce::kTransferNonPipelined | ce::kFlushEnable | ce::kSrcPitch | ce::kDstPitch;
    if (release) {
        semaphore_methods(pb, subchannel, *release);
        launch |= semaphore_bits(*release);
    }
    return pb.incr(subchannel, ce::LAUNCH_DMA, {launch});
}

PushBuffer& ce_release(PushBuffer& pb, unsigned subchannel, const CeRelease& release) {
    check_release(release);
    semaphore_methods(pb, subchannel, release);
    return pb.incr(subchannel, ce::LAUNCH_DMA, {ce::kFlushEnable | semaphore_bits(release)});
}

}  // namespace baregpu::nv
