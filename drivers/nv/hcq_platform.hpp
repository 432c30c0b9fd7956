// What NvHcqDevice needs from whatever sits under its RM objects — the one seam between the HCQ
// backend (channels, GPFIFO, QMDs, semaphores, CE copies: shared) and the two ways to reach an
// NVIDIA GPU:
//   nvpci (nvpci_platform.hpp): GSP-RM we booted; the driver owns the page tables (written through
//     BAR1) and VRAM, the CPU reaches VRAM through BAR1, the doorbell is a BAR0 register, channel
//     errors arrive as GSP OS_ERROR_LOG events;
//   nvk (nvk_platform.hpp): nvidia.ko; RM owns VRAM and the page tables (NV_ESC_RM_MAP_MEMORY_DMA),
//     the CPU maps memory with NV_ESC_RM_MAP_MEMORY + mmap, the doorbell is the mapped usermode
//     page, channel errors arrive in the channel's error notifier (and the kernel log).
#pragma once

#include "base/address.hpp"
#include "drivers/nv/rm_api.hpp"
#include "drivers/nv/rm_device.hpp"
#include "hcq/memory.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace baregpu::nv {

// The GPU MMU's small page: the granule of every mapping both platforms make.
inline constexpr uint64_t kSmallPage = 4096;

// A channel error the platform learned of: the channel's work-submit token (what the doorbell
// carries; GSP's chid) and the whole story the platform has (Xid, faulting VA when known).
struct NvChannelError {
    uint32_t token = 0;
    std::string text;
    size_t more = 0;  // further errors reported at the same time
};

class NvPlatform {
public:
    virtual ~NvPlatform() = default;

    // "GSP-RM", "nvidia.ko": who reports channel errors, for messages.
    virtual const char* reporter() const = 0;
    virtual const std::string& name() const = 0;  // the device name errors carry by default
    virtual RmTransport& transport() = 0;
    virtual NvHandle client() const = 0;
    virtual RmBranch branch() const = 0;
    virtual RmVaspaceOwner vaspace_owner() const = 0;
    // Bytes of VRAM buffers may take.
    virtual uint64_t memory_bytes() const = 0;

    // The RM device is open (the VA space exists, no channel yet): nvpci hands GSP-RM the root page
    // directory, nvk maps the doorbell page. detach(): before the RM device is freed.
    virtual void attach(RmDevice& rm) = 0;
    virtual void detach() noexcept = 0;

    // GPU memory at `va` (VRAM, or host memory when options.host); returns the CPU mapping (nullptr
    // when the buffer has no CPU access). Calls are serialised by the caller.
    virtual std::byte* map(GpuVirtualAddress va, uint64_t size, const hcq::BufferOptions& options) = 0;
    virtual void unmap(GpuVirtualAddress va, uint64_t size) noexcept = 0;

    // NOTIFY_CHANNEL_PENDING (clc361.h 0x90) with the channel's work-submit token.
    virtual void ring_doorbell(uint32_t token) = 0;

    // A channel's error notifier for NV_CHANNEL_ALLOC_PARAMS.hObjectError (0: none), then the
    // channel's token once RM has allocated it; closed when RM freed it. Called under the RM mutex.
    virtual NvHandle new_error_notifier() { return 0; }
    virtual void channel_opened(uint32_t token, NvHandle error_notifier) { (void)token, (void)error_notifier; }
    virtual void channel_closed(uint32_t token) noexcept { (void)token; }

    // The first channel error reported since the last call, if any. Called under the RM mutex.
    virtual std::optional<NvChannelError> poll_errors() = 0;
    // Everything reported so far counts as seen (recover()).
    virtual void forget_errors() = 0;
};

}  // namespace baregpu::nv
