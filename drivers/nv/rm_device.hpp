// An NVIDIA GPU as RM objects: the open sequence shared by the nvrm and nvpci transports
// (tinygrad ops_nv.py NVDevice.__init__) — device, subdevice, virtual memory (the hDma of DMA
// maps), the class list and the classes picked from it, the usermode (doorbell) object, a VA
// space, a channel group on the graphics engine and its context share; then GPFIFO channels
// with their compute or copy engine object and work-submit token, and scheduling.
//
// Ownership: an RmDevice owns its RM objects (freed, children first, with the device object in
// the destructor); the client belongs to the caller.
#pragma once

#include "drivers/nv/rm_api.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace baregpu::nv {

// The classes picked from GET_CLASSLIST_V2, newest first (Blackwell, Hopper, Ada, Ampere).
struct RmClasses {
    uint32_t usermode = 0;
    uint32_t gpfifo = 0;
    uint32_t compute = 0;
    uint32_t copy = 0;
};

// Picks from `available`; throws UnsupportedError naming the kind of class missing and what the
// GPU offered.
RmClasses pick_classes(const std::vector<uint32_t>& available, const std::string& device);

struct RmChannel {
    NvHandle channel = 0;
    NvHandle engine = 0;  // the compute or copy object on it
    uint32_t engine_class = 0;
    uint32_t work_submit_token = 0;  // what the doorbell is written with
};

// Who writes the VA space's page tables. nvpci: the driver (FERMI_VASPACE_A IS_EXTERNALLY_OWNED |
// ENABLE_PAGE_FAULTING, the root handed over with COPY_SERVER_RESERVED_PDES). nvrm through
// NV_ESC_RM_MAP_MEMORY_DMA: RM (flags 0), and the NV01_MEMORY_VIRTUAL hDma is bound to that VA
// space (hVASpace) so that DMA maps land where the channels look (nvos.h NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS).
enum class RmVaspaceOwner { driver, rm };

struct RmChannelSpec {
    uint32_t engine_class = 0;  // classes().compute or classes().copy
    NvHandle memory = 0;        // holds the GPFIFO ring and USERD
    uint64_t gpfifo_va = 0;     // GPU VA of the ring (entries * 8 bytes)
    uint32_t entries = 0;       // power of two
    uint64_t userd_offset = 0;  // in `memory`, 512-byte aligned
    NvHandle error_notifier = 0;  // hObjectError: memory RM writes an NvNotification into on a channel error
};

class RmDevice {
public:
    // `vaspace_ready`: called once the VA space and the usermode object exist, before the channel group and its
    // context share (RM refuses a context share in an externally owned VA space that has no page directory yet,
    // kernel_ctxshare.c): where the platform hands RM the page directory.
    static std::unique_ptr<RmDevice> open(RmTransport& transport, NvHandle client, RmBranch branch,
                                          uint32_t device_instance = 0, RmVaspaceOwner owner = RmVaspaceOwner::driver,
                                          const std::function<void(RmDevice&)>& vaspace_ready = {});
    ~RmDevice();
    RmDevice(const RmDevice&) = delete;
    RmDevice& operator=(const RmDevice&) = delete;

    Rm& rm() { return rm_; }
    NvHandle client() const { return client_; }
    NvHandle device() const { return device_; }
    NvHandle subdevice() const { return subdevice_; }
    NvHandle virtual_memory() const { return virtmem_; }
    NvHandle usermode() const { return usermode_; }
    NvHandle vaspace() const { return vaspace_; }
    NvHandle channel_group() const { return channel_group_; }
    NvHandle context_share() const { return ctxshare_; }
    const RmClasses& classes() const { return classes_; }
    const std::vector<uint32_t>& class_list() const { return class_list_; }

    // VRAM (NV1_MEMORY_USER) of `size` bytes, physically contiguous.
    NvHandle alloc_vram(uint64_t size, uint64_t alignment);
    RmChannel create_channel(const RmChannelSpec& spec);
    // NV90F1_CTRL_CMD_VASPACE_COPY_SERVER_RESERVED_PDES on the VA space: the driver-owned root page
    // directory (VRAM offset `root`, `root_bytes`) that covers [va_lo, va_hi]; GSP-RM then runs the
    // channels of this VA space on the driver's page tables (ctrl90f1.h; tinygrad nv/ip.py init_golden_image).
    void copy_server_reserved_pdes(uint64_t root, uint64_t root_bytes, uint8_t root_page_shift, uint64_t va_lo, uint64_t va_hi);
    // NVA06C_CTRL_CMD_GPFIFO_SCHEDULE on the channel group, once its channels exist.
    void schedule();
    void free_object(NvHandle parent, NvHandle object) { rm_.free(client_, parent, object); }

private:
    RmDevice(RmTransport& transport, NvHandle client, RmBranch branch);

    Rm rm_;
    NvHandle client_;
    RmBranch branch_;
    NvHandle device_ = 0, subdevice_ = 0, virtmem_ = 0, usermode_ = 0, vaspace_ = 0, channel_group_ = 0, ctxshare_ = 0;
    RmClasses classes_;
    std::vector<uint32_t> class_list_;
    uint32_t next_cid_ = 1;
};

}  // namespace baregpu::nv
