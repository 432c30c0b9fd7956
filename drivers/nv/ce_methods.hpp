// Copy engine methods (AMPERE_DMA_COPY_A/B; open-gpu-kernel-modules src/common/sdk/nvidia/inc/class/
// clc6b5.h and clc7b5.h have the same offsets and LAUNCH_DMA fields): a pitch-linear copy between two
// GPU virtual addresses and the semaphore the CE releases when it is done, written into a PushBuffer.
#pragma once

#include "gpfifo.hpp"

#include <cstdint>
#include <optional>

namespace baregpu::nv {

enum class CopyClass : uint32_t { ampere_a = 0xc6b5, ampere_b = 0xc7b5 };  // AMPERE_DMA_COPY_A / _B

namespace ce {
inline constexpr uint32_t SET_SEMAPHORE_A = 0x0240;              // UPPER 16:0
inline constexpr uint32_t SET_SEMAPHORE_B = 0x0244;              // LOWER 31:0
inline constexpr uint32_t SET_SEMAPHORE_PAYLOAD = 0x0248;
inline constexpr uint32_t SET_SEMAPHORE_PAYLOAD_UPPER = 0x024c;
inline constexpr uint32_t LAUNCH_DMA = 0x0300;
inline constexpr uint32_t OFFSET_IN_UPPER = 0x0400;              // UPPER 16:0
inline constexpr uint32_t OFFSET_IN_LOWER = 0x0404;
inline constexpr uint32_t OFFSET_OUT_UPPER = 0x0408;
inline constexpr uint32_t OFFSET_OUT_LOWER = 0x040c;
inline constexpr uint32_t LINE_LENGTH_IN = 0x0418;
inline constexpr uint32_t LINE_COUNT = 0x041c;
// LAUNCH_DMA fields.
inline constexpr uint32_t kTransferNonPipelined = 2u << 0;   // DATA_TRANSFER_TYPE 1:0 NON_PIPELINED
inline constexpr uint32_t kTransferPipelined = 1u << 0;      // DATA_TRANSFER_TYPE PIPELINED
inline constexpr uint32_t kFlushEnable = 1u << 2;            // FLUSH_ENABLE 2:2
inline constexpr uint32_t kSemaphoreOneWord = 1u << 3;       // SEMAPHORE_TYPE 4:3 RELEASE_ONE_WORD_SEMAPHORE
inline constexpr uint32_t kSemaphoreFourWord = 2u << 3;      // RELEASE_FOUR_WORD_SEMAPHORE (with timestamp)
inline constexpr uint32_t kInterruptNonBlocking = 2u << 5;   // INTERRUPT_TYPE 6:5 NON_BLOCKING
inline constexpr uint32_t kSrcPitch = 1u << 7;               // SRC_MEMORY_LAYOUT 7:7 PITCH
inline constexpr uint32_t kDstPitch = 1u << 8;               // DST_MEMORY_LAYOUT 8:8 PITCH
inline constexpr uint32_t kPayloadTwoWord = 1u << 27;        // SEMAPHORE_PAYLOAD_SIZE 27:27 TWO_WORD
}  // namespace ce

// The semaphore a LAUNCH_DMA releases after its copy.
struct CeRelease {
    uint64_t va = 0;
    uint64_t payload = 0;
    bool payload64 = true;   // SEMAPHORE_PAYLOAD_SIZE TWO_WORD
    bool timestamp = false;  // FOUR_WORD semaphore: the GPU time at va + 8
    bool interrupt = false;  // INTERRUPT_TYPE NON_BLOCKING (a non-stall interrupt)
};

// SET_OBJECT on `subchannel` (host method 0, NVC56F_SET_OBJECT NVCLASS 15:0).
PushBuffer& ce_set_object(PushBuffer& pb, unsigned subchannel, CopyClass cls = CopyClass::ampere_b);
// OFFSET_IN/OUT, LINE_LENGTH_IN, then LAUNCH_DMA (NON_PIPELINED, FLUSH, PITCH/PITCH, virtual), with a
// semaphore release when `release` is set. bytes 1 .. 2^32 - 1; VAs below 2^49 (UPPER 16:0). Throws
// baregpu::Error (before writing) when a value does not fit.
PushBuffer& ce_copy(PushBuffer& pb, unsigned subchannel, uint64_t src_va, uint64_t dst_va, uint64_t bytes,
                    const std::optional<CeRelease>& release = std::nullopt);
// Only the semaphore release (LAUNCH_DMA with DATA_TRANSFER_TYPE NONE).
PushBuffer& ce_release(PushBuffer& pb, unsigned subchannel, const CeRelease& release);

}  // namespace baregpu::nv
