// A strict model of GSP-RM's object model as a client sees it — the handles, the parent rules,
// the parameter checks and the NV_STATUS values real RM returns — for the RM classes and controls
// drivers/nv uses. The same model answers nvidia.ko's escape ioctls (fake_nvidia.hpp, the nvrm
// transport) and, plugged into the GSP-RM model, GSP_RM_ALLOC / GSP_RM_CONTROL RPCs (nvpci).
//
// Where the statuses come from (open-gpu-kernel-modules 570.144): a parameter block whose size
// is not the class's or control's → NV_ERR_INVALID_ARGUMENT (rmapi/param_copy.c, control.c); a
// parent of the wrong class → NV_ERR_INVALID_OBJECT_PARENT and an unknown class →
// NV_ERR_INVALID_CLASS (rmapi/alloc_free.c, resserv rs_client.c); an unknown control →
// NV_ERR_NOT_SUPPORTED; a handle already in use → NV_ERR_INSERT_DUPLICATE_NAME; freeing a
// handle that does not exist → NV_ERR_OBJECT_NOT_FOUND.
//
// The model keeps its own copy of the layouts (rm_layouts.hpp): a model never includes a driver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace baregpu::sim::nvgpu {

struct RmModelOptions {
    // What NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2 reports; its branch (570 / 580) decides the
    // FERMI_VASPACE_A parameter size the model expects (48 / 56 bytes, nvos.h per tag).
    std::string driver_version = "570.144";
    uint32_t gpu_id = 0x100;  // NV_ESC_CARD_INFO's gpu_id, GET_ID_INFO_V2's key
    // The GPU's RM device instance (GET_ID_INFO_V2's deviceInstance): NV01_DEVICE_0's deviceId must name it.
    // Not 0 on a host whose first GPU is another, so a driver that assumes 0 meets NV_ERR_INVALID_STATE.
    uint32_t device_instance = 0;
    // The runlist the graphics channels are on: the high half of their work-submit tokens. Which id GR's
    // runlist has is not public per chip; any non-zero one shows a driver that takes the token for the chid.
    uint32_t runlist_id = 0;
    // kern_gmmu.c maxVASize: 2^49 (MMU v2, up to Ada), 2^57 (MMU v3, Hopper on).
    uint64_t max_va_size = uint64_t{1} << 49;
    // The classes the GPU has (GET_CLASSLIST_V2); default: AD102's compute-relevant ones.
    std::vector<uint32_t> classes;
};

// What RM tells the channel engines (PBDMA, CE, compute) when a GPFIFO channel is allocated, so
// that its doorbell token runs it: the hooks are wired by whoever composes RM with the engines
// (drivers/registry_nv.cpp, tests), the RM model knows no engine type.
struct RmChannelInfo {
    uint32_t token = 0;
    uint64_t gpfifo_va = 0;
    uint32_t gpfifo_entries = 0;
    uint64_t userd_va = 0;
    std::optional<uint64_t> userd_vram;  // USERD's VRAM offset, when RM placed hUserdMemory[0] (memory hooks)
    uint32_t gpfifo_class = 0;           // the channel's class (AMPERE/HOPPER_CHANNEL_GPFIFO_A)
    uint64_t page_directory_base = 0;  // VRAM offset of the root directory (SET_PAGE_DIRECTORY, or RM's own)
    std::string name;
};
struct RmEngineHooks {
    std::function<void(const RmChannelInfo&)> channel_allocated;  // called with the model's lock held
    std::function<void(uint32_t token)> channel_freed;
};

// Where a memory object's bytes are: VRAM (an offset) or host memory (an OS descriptor's address).
struct RmBacking {
    bool vram = true;
    uint64_t address = 0;
};

// nvidia.ko's own memory management, when a simulated GPU stands behind the model (nvrm_gpu.hpp):
// RM places NV1_MEMORY_USER in that GPU's VRAM, owns the page tables of the VA spaces it creates
// (not IS_EXTERNALLY_OWNED) and writes them for NV_ESC_RM_MAP_MEMORY_DMA, and writes a channel's
// error notifier on a robust-channel error. Without hooks (GSP-RM under nvpci) memory objects have
// no placement and the driver owns the page tables. Called with the model's lock held: a hook must
// not call back into the model.
struct RmMemoryHooks {
    std::function<std::optional<uint64_t>(uint64_t size, uint64_t alignment)> alloc_vram;  // VRAM offset
    std::function<void(uint64_t offset, uint64_t size)> free_vram;
    std::function<std::optional<uint64_t>()> new_page_directory;  // VRAM offset of a new, empty root
    // 4 KiB PTEs for [va, va + length) to `target` onwards; false when the tables do not fit in VRAM.
    std::function<bool(uint64_t pdb, uint64_t va, uint64_t length, RmBacking target)> map;
    std::function<void(uint64_t pdb, uint64_t va, uint64_t length)> unmap;
    std::function<void(RmBacking target, std::span<const std::byte> bytes)> write;
};

class RmModel {
public:
    explicit RmModel(RmModelOptions options = {});

    // client == 0 && cls == NV01_ROOT_CLIENT: a new client. *object: the caller's handle or 0.
    uint32_t alloc(uint32_t client, uint32_t parent, uint32_t* object, uint32_t cls, std::span<std::byte> params);
    uint32_t control(uint32_t client, uint32_t object, uint32_t cmd, std::span<std::byte> params);
    uint32_t free(uint32_t client, uint32_t parent, uint32_t object);

    // NV_ESC_RM_ALLOC_MEMORY's OS descriptor (NV01_MEMORY_SYSTEM_OS_DESCRIPTOR): `limit + 1` bytes of
    // host memory at `address` under a device; the caller chooses the handle.
    uint32_t alloc_os_descriptor(uint32_t client, uint32_t parent, uint32_t object, uint64_t address, uint64_t limit);
    // SET_PAGE_DIRECTORY (GSP RPC 54, rpc_set_page_directory_v1E_05 / NV0080_CTRL_DMA_SET_PAGE_DIRECTORY): the client's
    // root page directory (VRAM offset `root`, 4 KiB aligned, `entries` > 0) for `vaspace` under `device`; RM then runs
    // that VA space's channels on it and allows context shares in it.
    uint32_t set_page_directory(uint32_t client, uint32_t device, uint32_t vaspace, uint64_t root, uint32_t entries);
    // NV_ESC_RM_MAP_MEMORY's checks: `memory` belongs to `device` (device or subdevice handle) and
    // [offset, offset + length) lies inside it.
    uint32_t check_cpu_map(uint32_t client, uint32_t device, uint32_t memory, uint64_t offset, uint64_t length) const;
    // NV_ESC_RM_MAP_MEMORY_DMA: `memory` at GPU VA *dma_offset of the VA space behind `dma`
    // (NV01_MEMORY_VIRTUAL). Only DMA_OFFSET_FIXED mappings (what drivers/nv asks for): 4 KiB aligned,
    // not overlapping another mapping.
    uint32_t map_dma(uint32_t client, uint32_t device, uint32_t dma, uint32_t memory, uint64_t offset, uint64_t length,
                     uint32_t flags, uint64_t* dma_offset);
    struct DmaMapping {
        uint64_t va = 0, length = 0;
        uint32_t client = 0, memory = 0;
        uint64_t offset = 0;  // into the memory object
        uint32_t space = 0;   // the VA space (FERMI_VASPACE_A handle, or the device's for its default one)
        std::optional<uint64_t> pdb;  // its RM-owned root, when memory hooks wrote PTEs
    };
    std::vector<DmaMapping> dma_mappings() const;
    // A memory object's size, 0 when `memory` is none.
    uint64_t memory_size(uint32_t client, uint32_t memory) const;
    // The branch of options().driver_version ("570", "580"): what the ioctl layer's sizes follow.
    unsigned driver_major() const;

    const RmModelOptions& options() const { return options_; }
    // Live objects over all clients (clients included).
    size_t object_count() const;
    // The class of a live object, 0 when there is none.
    uint32_t class_of(uint32_t client, uint32_t object) const;
    // Every call with its status, "alloc 0xc9c0 under 0xcaf00007 -> 0x22", for test diagnostics.
    std::vector<std::string> log() const;
    // A context share's NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT (SYNC 0, ASYNC 1, SPECIFIED 2); none if not one.
    std::optional<uint32_t> subcontext_mode(uint32_t client, uint32_t ctxshare) const;
    // The work-submit token of a GPFIFO channel (what the doorbell carries), 0 when none.
    uint32_t token_of(uint32_t client, uint32_t channel) const;
    // Channels allocated from now on (in a VA space with a page directory) are announced to the engines.
    void set_engine_hooks(RmEngineHooks hooks);
    // Memory objects and VA spaces allocated from now on are placed / get RM-owned page tables.
    void set_memory_hooks(RmMemoryHooks hooks);
    // A memory object's placement (VRAM objects with memory hooks, OS descriptors); none otherwise.
    std::optional<RmBacking> backing_of(uint32_t client, uint32_t memory) const;
    // A robust-channel error on the channel with work-submit token `token` (kernel_rc_notification.c
    // krcErrorSetNotifier: the channel's hObjectError gets NvNotification {timeStamp, info32 = exceptType
    // (the Xid), info16 = NV2080 engine type, status = 0xffff}). Returns the channel's name for the
    // kernel log, empty when no channel has the token; a channel without an error notifier is named too.
    std::string robust_channel_error(uint32_t token, uint32_t xid, uint64_t timestamp_ns);

private:
    struct Object {
        uint32_t cls = 0;
        uint32_t parent = 0;  // 0 for a client
        uint64_t size = 0;    // memory objects
        uint32_t token = 0;   // GPFIFO channels
        uint32_t vaspace = 0; // channel groups, context shares
        uint64_t host_address = 0;  // OS descriptors
        bool scheduled = false;
        uint64_t page_directory = 0;      // VA spaces: from SET_PAGE_DIRECTORY, or RM's own tables
        bool has_page_directory = false;
        bool engines_registered = false;  // GPFIFO channels announced through hooks_
        std::optional<RmBacking> backing = std::nullopt;  // memory objects placed by memory_hooks_
        bool externally_owned = false;     // VA spaces: IS_EXTERNALLY_OWNED (the client writes the tables)
        uint32_t error_notifier = 0;       // GPFIFO channels: hObjectError
        uint64_t va_limit = 0;             // VA spaces: vasLimit
        uint32_t subcontext = 0;           // context shares: NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT
    };
    struct Client {
        std::map<uint32_t, Object> objects;  // the client itself included
        uint32_t next_handle = 0xcaf00000;
    };

    uint32_t alloc_locked(uint32_t client, uint32_t parent, uint32_t* object, uint32_t cls, std::span<std::byte> params);
    uint32_t control_locked(uint32_t client, uint32_t object, uint32_t cmd, std::span<std::byte> params);
    uint32_t check_params(Client& client, const Object& parent_object, uint32_t parent, uint32_t cls,
                          std::span<std::byte> params, Object& created);
    void free_tree(Client& client, uint32_t client_handle, uint32_t handle);
    bool has_class(uint32_t cls) const;
    uint32_t vaspace_params_size() const;
    uint32_t device_of(const Client& client, uint32_t handle) const;  // the NV01_DEVICE_0 above, 0 if none
    void channel_allocated(Client& owner, uint32_t client, uint32_t handle, std::span<const std::byte> params);
    void drop_mappings(const std::function<bool(const DmaMapping&)>& which);
    void release_memory(const Object& o);
    RmEngineHooks hooks_;
    RmMemoryHooks memory_hooks_;

    RmModelOptions options_;
    mutable std::mutex mutex_;
    std::map<uint32_t, Client> clients_;
    uint32_t next_client_ = 0xc1d00000;
    uint32_t next_token_ = 1;
    std::vector<std::string> log_;
    std::vector<DmaMapping> dma_;
};

}  // namespace baregpu::sim::nvgpu
