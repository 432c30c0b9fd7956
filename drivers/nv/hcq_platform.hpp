// What NvHcqDevice needs from whatever sits under its RM objects — the one seam between the HCQ
// backend (channels, GPFIFO, QMDs, semaphores, CE copies: shared) and the two ways to reach an
// NVIDIA GPU:
//   nvpci (nvpci_platform.hpp): GSP-RM we booted; the driver owns the page tables (written through
//     BAR1) and VRAM, the CPU reaches VRAM through BAR1, the doorbell is a BAR0 register, channel
//     errors arrive as GSP OS_ERROR_LOG events;
//   nvrm (nvrm_platform.hpp): nvidia.ko; RM owns VRAM and the page tables (NV_ESC_RM_MAP_MEMORY_DMA),
//     the CPU maps memory with NV_ESC_RM_MAP_MEMORY + mmap, the doorbell is the mapped usermode
//     page, channel errors arrive in the channel's error notifier (and the kernel log).
#pragma once

#include "base/address.hpp"
#include "drivers/nv/rm_api.hpp"
#include "drivers/nv/rm_device.hpp"
#include "drivers/pci/peer_mapping.hpp"
#include "hcq/memory.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

// What bus peers (P2P DMA through BARs, drivers/pci/peer_window.hpp) need from a platform that
// owns the GPU's page tables and VRAM. Calls come with NvHcqDevice's memory lock held.
class NvPeerAccess {
public:
    virtual pci::PciDevice& pci() = 0;
    virtual uint64_t vram_bytes() const = 0;
    // [va, va + size) as SYS aperture (non-coherent) pages at bus address `bus`; and unmapped.
    virtual void map_bus(GpuVirtualAddress va, uint64_t bus, uint64_t size) = 0;
    virtual void unmap_bus(GpuVirtualAddress va, uint64_t size) noexcept = 0;
    // Where [va, va + size) of our own mapped memory lives: VRAM (BAR1 offsets) or host bytes.
    virtual std::vector<pci::PeerMemoryExporter::Segment> segments(uint64_t va, uint64_t size) = 0;

protected:
    ~NvPeerAccess() = default;
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
    // NV01_DEVICE_0's deviceId: RM's device instance of this GPU (GSP-RM we booted has one GPU: 0).
    virtual uint32_t device_instance() const { return 0; }
    virtual RmVaspaceOwner vaspace_owner() const = 0;
    // Bytes of VRAM buffers may take.
    virtual uint64_t memory_bytes() const = 0;

    // The RM device is open (the VA space exists, no channel yet): nvpci hands GSP-RM the root page
    // directory, nvrm maps the doorbell page. detach(): before the RM device is freed.
    virtual void attach(RmDevice& rm) = 0;
    virtual void detach() noexcept = 0;

    // GPU memory at `va` (VRAM, or host memory when options.host); returns the CPU mapping (nullptr
    // when the buffer has no CPU access). Calls are serialised by the caller.
    virtual std::byte* map(GpuVirtualAddress va, uint64_t size, const hcq::BufferOptions& options) = 0;
    virtual void unmap(GpuVirtualAddress va, uint64_t size) noexcept = 0;

    // The RM memory object behind the mapping made at `va` (nvrm: the NV1_MEMORY_USER map() allocated), 0 when
    // the platform's memory is not RM's (nvpci: the driver's own VRAM).
    virtual NvHandle memory_object(GpuVirtualAddress va) const { (void)va; return 0; }

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
    // Bus peers, where the platform can map foreign bus addresses: nvpci (our page tables); not nvrm,
    // where nvidia.ko owns the page tables and maps no bus address it did not allocate.
    virtual NvPeerAccess* peer_access() { return nullptr; }
};

}  // namespace baregpu::nv
