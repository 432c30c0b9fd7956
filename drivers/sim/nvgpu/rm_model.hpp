// A strict model of GSP-RM's object model as a client sees it — the handles, the parent rules,
// the parameter checks and the NV_STATUS values real RM returns — for the RM classes and controls
// drivers/nv uses. The same model answers nvidia.ko's escape ioctls (fake_nvidia.hpp, the nvk
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
#include <span>
#include <string>
#include <vector>

namespace baregpu::sim::nvgpu {

struct RmModelOptions {
    // What NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2 reports; its branch (570 / 580) decides the
    // FERMI_VASPACE_A parameter size the model expects (48 / 56 bytes, nvos.h per tag).
    std::string driver_version = "570.144";
    uint32_t gpu_id = 0x100;  // NV_ESC_CARD_INFO's gpu_id, GET_ID_INFO_V2's key
    // The classes the GPU has (GET_CLASSLIST_V2); default: AD102's compute-relevant ones.
    std::vector<uint32_t> classes;
};

// What RM tells the channel engines (PBDMA, CE, compute) when a GPFIFO channel is allocated, so
// that its doorbell token runs it: the hooks are wired by whoever composes RM with the engines
// (drivers/registry.cpp, tests), the RM model knows no engine type.
struct RmChannelInfo {
    uint32_t token = 0;
    uint64_t gpfifo_va = 0;
    uint32_t gpfifo_entries = 0;
    uint64_t userd_va = 0;
    uint64_t page_directory_base = 0;  // VRAM offset of the root directory (COPY_SERVER_RESERVED_PDES level 0)
    std::string name;
};
struct RmEngineHooks {
    std::function<void(const RmChannelInfo&)> channel_allocated;  // called with the model's lock held
    std::function<void(uint32_t token)> channel_freed;
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
    // The work-submit token of a GPFIFO channel (what the doorbell carries), 0 when none.
    uint32_t token_of(uint32_t client, uint32_t channel) const;
    // Channels allocated from now on (in a VA space with a page directory) are announced to the engines.
    void set_engine_hooks(RmEngineHooks hooks);

private:
    struct Object {
        uint32_t cls = 0;
        uint32_t parent = 0;  // 0 for a client
        uint64_t size = 0;    // memory objects
        uint32_t token = 0;   // GPFIFO channels
        uint32_t vaspace = 0; // channel groups, context shares
        uint64_t host_address = 0;  // OS descriptors
        bool scheduled = false;
        uint64_t page_directory = 0;      // VA spaces: COPY_SERVER_RESERVED_PDES level 0
        bool has_page_directory = false;
        bool engines_registered = false;  // GPFIFO channels announced through hooks_
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
    RmEngineHooks hooks_;

    RmModelOptions options_;
    mutable std::mutex mutex_;
    std::map<uint32_t, Client> clients_;
    uint32_t next_client_ = 0xc1d00000;
    uint32_t next_token_ = 1;
    std::vector<std::string> log_;
    std::vector<DmaMapping> dma_;
};

}  // namespace baregpu::sim::nvgpu
