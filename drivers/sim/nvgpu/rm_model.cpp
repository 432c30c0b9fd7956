#include "rm_model.hpp"

#include "rm_layouts.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

namespace baregpu::sim::nvgpu {

using namespace rm;

namespace {

bool is_gpfifo(uint32_t cls) { return cls == kAmpereGpfifo || cls == kHopperGpfifo || cls == kBlackwellGpfifo; }
bool is_engine(uint32_t cls) {
    return cls == rm::kAmpereDmaCopyB || cls == rm::kHopperDmaCopyA || cls == kBlackwellDmaCopyB || cls == rm::kAmpereComputeB ||
           cls == rm::kAdaComputeA || cls == rm::kHopperComputeA || cls == kBlackwellComputeB;
}
bool is_memory(uint32_t cls) { return cls == kMemoryUser || cls == kMemorySystem; }
bool is_usermode(uint32_t cls) { return cls == kTuringUsermode || cls == kHopperUsermode; }
bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// The class a parent must have, per class (RM's resource descriptors, rmapi/resource_list.h).
// 0: the parent is the client itself.
bool parent_allowed(uint32_t cls, uint32_t parent_cls) {
    switch (cls) {
        case kDevice: return parent_cls == kRootClient;
        case kSubdevice:
        case kMemoryVirtual:
        case kVaspace:
        case kChannelGroup:
        case kMemoryUser:
        case kMemorySystem: return parent_cls == kDevice;
        case kTuringUsermode:
        case kHopperUsermode: return parent_cls == kSubdevice;
        case kContextShare: return parent_cls == kChannelGroup;
        default:
            if (is_gpfifo(cls)) return parent_cls == kChannelGroup;
            if (is_engine(cls)) return is_gpfifo(parent_cls);
            return false;
    }
}

// The parameter sizes a class accepts; 0 in the list means "no parameters" is accepted too.
bool known_class(uint32_t cls) {
    return cls == kDevice || cls == kSubdevice || cls == kMemoryVirtual || cls == kVaspace || cls == kChannelGroup ||
           cls == kContextShare || is_memory(cls) || is_usermode(cls) || is_gpfifo(cls) || is_engine(cls);
}

// The class a control is exported by (its interface, the cmd's top 16 bits).
bool control_target_ok(uint32_t cmd, uint32_t cls) {
    switch (cmd) {
        case kCtrlBuildVersionV2:
        case kCtrlGetIdInfoV2: return cls == kRootClient;
        case kCtrlGetClasslistV2: return cls == kDevice;
        case kCtrlGpfifoSchedule: return cls == kChannelGroup;
        case kCtrlWorkSubmitToken: return is_gpfifo(cls);
        case kCtrlCopyServerReservedPdes: return cls == kVaspace;
        default: return false;
    }
}

// The size each control exports for the driver branch `major` (g_*_nvoc.c per tag).
uint32_t control_size(uint32_t cmd, unsigned major) {
    switch (cmd) {
        case kCtrlBuildVersionV2: return kBuildVersionV2Params;
        case kCtrlGetIdInfoV2: return kGetIdInfoV2Params;
        case kCtrlGetClasslistV2: return major >= 580 ? kGetClasslistV2Params580 : kGetClasslistV2Params570;
        case kCtrlGpfifoSchedule: return major >= 575 ? kGpfifoScheduleParams575 : kGpfifoScheduleParams570;
        case kCtrlWorkSubmitToken: return kWorkSubmitTokenParams;
        case kCtrlCopyServerReservedPdes: return kCopyServerReservedPdesParams;
        default: return 0;
    }
}

}  // namespace

RmModel::RmModel(RmModelOptions options) : options_(std::move(options)) {
    if (options_.classes.empty()) {
        // AD102's channel, engine and usermode classes (what an Ada GPU's GET_CLASSLIST includes of them).
        options_.classes = {kTuringUsermode, kAmpereGpfifo, rm::kAmpereDmaCopyB, rm::kAdaComputeA};
    }
}

bool RmModel::has_class(uint32_t cls) const {
    if (!(is_usermode(cls) || is_gpfifo(cls) || is_engine(cls))) return true;  // software classes: always
    return std::find(options_.classes.begin(), options_.classes.end(), cls) != options_.classes.end();
}

unsigned RmModel::driver_major() const {
    unsigned major = 0;
    for (char c : options_.driver_version) {
        if (c < '0' || c > '9') break;
        major = major * 10 + static_cast<unsigned>(c - '0');
    }
    return major;
}

uint32_t RmModel::vaspace_params_size() const { return driver_major() >= 580 ? kVaspaceParams580 : kVaspaceParams570; }

uint32_t RmModel::device_of(const Client& client, uint32_t handle) const {
    for (int depth = 0; depth < 8; ++depth) {
        auto it = client.objects.find(handle);
        if (it == client.objects.end()) return 0;
        if (it->second.cls == kDevice) return handle;
        handle = it->second.parent;
    }
    return 0;
}

uint32_t RmModel::alloc_os_descriptor(uint32_t client, uint32_t parent, uint32_t object, uint64_t address, uint64_t limit) {
    std::lock_guard lock(mutex_);
    uint32_t status = kOk;
    auto c = clients_.find(client);
    if (c == clients_.end()) {
        status = kErrInvalidClient;
    } else if (!c->second.objects.count(parent) || c->second.objects.at(parent).cls != kDevice) {
        status = kErrInvalidObjectParent;
    } else if (object == 0 || c->second.objects.count(object)) {
        status = object == 0 ? kErrInvalidObjectNew : kErrInsertDuplicateName;
    } else if (address == 0 || address % 4096 != 0 || (limit + 1) % 4096 != 0) {
        status = kErrInvalidArgument;  // whole pages only: the kernel pins pages
    } else {
        Object o{kMemoryOsDescriptor, parent};
        o.size = limit + 1;
        o.host_address = address;
        o.backing = RmBacking{false, address};
        c->second.objects[object] = o;
    }
    log_.push_back(fmt::format("alloc_memory os descriptor 0x{:x} at 0x{:x} (+0x{:x}) -> 0x{:x}", object, address, limit + 1, status));
    return status;
}

uint32_t RmModel::check_cpu_map(uint32_t client, uint32_t device, uint32_t memory, uint64_t offset, uint64_t length) const {
    std::lock_guard lock(mutex_);
    auto c = clients_.find(client);
    if (c == clients_.end()) return kErrInvalidClient;
    auto m = c->second.objects.find(memory);
    if (m == c->second.objects.end() || !(is_memory(m->second.cls) || is_usermode(m->second.cls))) return kErrInvalidObjectHandle;
    if (device_of(c->second, device) == 0 || device_of(c->second, device) != device_of(c->second, memory)) {
        return kErrInvalidObjectParent;
    }
    if (length == 0 || offset + length > m->second.size || offset + length < offset) return kErrInvalidLimit;
    return kOk;
}

uint32_t RmModel::map_dma(uint32_t client, uint32_t device, uint32_t dma, uint32_t memory, uint64_t offset,
                          uint64_t length, uint32_t flags, uint64_t* dma_offset) {
    std::lock_guard lock(mutex_);
    uint32_t status = kOk;
    auto c = clients_.find(client);
    if (c == clients_.end()) {
        status = kErrInvalidClient;
    } else {
        auto d = c->second.objects.find(dma);
        auto m = c->second.objects.find(memory);
        if (d == c->second.objects.end() || d->second.cls != kMemoryVirtual) {
            status = kErrInvalidObjectHandle;
        } else if (m == c->second.objects.end() || !(is_memory(m->second.cls) || m->second.cls == kMemoryOsDescriptor)) {
            status = kErrInvalidObjectHandle;
        } else if (device_of(c->second, device) == 0 || device_of(c->second, dma) != device_of(c->second, device) ||
                   device_of(c->second, memory) != device_of(c->second, device)) {
            status = kErrInvalidObjectParent;
        } else if (length == 0 || offset + length > m->second.size || offset + length < offset) {
            status = kErrInvalidLimit;
        } else if (!(flags & kNvos46DmaOffsetFixed) || *dma_offset % 4096 != 0) {
            status = kErrInvalidOffset;
        } else {
            // The VA space: the hDma's hVASpace, or the device's default one (NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS).
            uint32_t space = d->second.vaspace;
            Object* vas = nullptr;
            if (space == 0) {
                space = device_of(c->second, device);
                vas = &c->second.objects[space];
                if (memory_hooks_.new_page_directory && !vas->has_page_directory) {
                    if (auto pdb = memory_hooks_.new_page_directory()) {
                        vas->page_directory = *pdb;
                        vas->has_page_directory = true;
                    }
                }
            } else if (auto v = c->second.objects.find(space); v != c->second.objects.end()) {
                vas = &v->second;
            }
            // gpu_vaspace.c gvaspaceAlloc: no RM mappings in a VA space someone else owns.
            if (vas == nullptr)
                status = kErrInvalidObjectHandle;  // the hDma's VA space is gone
            else if (vas->externally_owned)
                status = kErrNotSupported;
            for (const DmaMapping& other : dma_) {
                if (status == kOk && other.client == client && other.space == space && *dma_offset < other.va + other.length &&
                    other.va < *dma_offset + length) {
                    status = kErrInvalidAddress;  // the VA range is taken
                }
            }
            DmaMapping mapping{*dma_offset, length, client, memory, offset, space, std::nullopt};
            if (status == kOk && memory_hooks_.map) {
                // RM owns this VA space's tables: write the PTEs. Memory without a placement (NV01_MEMORY_SYSTEM
                // is not modelled behind a GPU) cannot be mapped.
                const std::optional<RmBacking>& b = m->second.backing;
                if (!b || !vas->has_page_directory) {
                    status = kErrNotSupported;
                } else if (!memory_hooks_.map(vas->page_directory, *dma_offset, length, RmBacking{b->vram, b->address + offset})) {
                    status = kErrNoMemory;
                } else {
                    mapping.pdb = vas->page_directory;
                }
            }
            if (status == kOk) dma_.push_back(mapping);
        }
    }
    log_.push_back(fmt::format("map_dma memory 0x{:x} (+0x{:x}, 0x{:x} bytes) at 0x{:x} -> 0x{:x}", memory, offset, length,
                               *dma_offset, status));
    return status;
}

std::vector<RmModel::DmaMapping> RmModel::dma_mappings() const {
    std::lock_guard lock(mutex_);
    return dma_;
}

uint64_t RmModel::memory_size(uint32_t client, uint32_t memory) const {
    std::lock_guard lock(mutex_);
    auto c = clients_.find(client);
    if (c == clients_.end()) return 0;
    auto m = c->second.objects.find(memory);
    return m == c->second.objects.end() ? 0 : m->second.size;
}

uint32_t RmModel::alloc(uint32_t client, uint32_t parent, uint32_t* object, uint32_t cls, std::span<std::byte> params) {
    std::lock_guard lock(mutex_);
    uint32_t requested = *object;
    uint32_t status = alloc_locked(client, parent, object, cls, params);
    log_.push_back(fmt::format("alloc 0x{:x} under 0x{:x} (client 0x{:x}, handle 0x{:x}, {} bytes) -> 0x{:x}", cls, parent,
                               client, requested, params.size(), status));
    return status;
}

uint32_t RmModel::alloc_locked(uint32_t client, uint32_t parent, uint32_t* object, uint32_t cls,
                               std::span<std::byte> params) {
    if (cls == kRootClient) {
        if (client != 0 || parent != 0) return kErrInvalidObjectParent;
        if (!params.empty()) return kErrInvalidArgument;
        uint32_t handle = *object != 0 ? *object : next_client_++;
        if (clients_.count(handle)) return kErrInsertDuplicateName;
        clients_[handle].objects[handle] = Object{kRootClient, 0};
        *object = handle;
        return kOk;
    }
    auto c = clients_.find(client);
    if (c == clients_.end()) return kErrInvalidClient;
    Client& owner = c->second;
    auto p = owner.objects.find(parent);
    if (p == owner.objects.end()) return kErrInvalidObjectParent;
    if (!known_class(cls) || !has_class(cls)) return kErrInvalidClass;
    if (!parent_allowed(cls, p->second.cls)) return kErrInvalidObjectParent;
    if (*object != 0 && owner.objects.count(*object)) return kErrInsertDuplicateName;

    Object created{cls, parent};
    if (uint32_t status = check_params(owner, p->second, parent, cls, params, created); status != kOk) return status;

    uint32_t handle = *object;
    if (handle == 0) {
        while (owner.objects.count(owner.next_handle)) ++owner.next_handle;
        handle = owner.next_handle++;
    }
    // Ampere on: the work-submit token is chid | runlistId << 16 (kernel_fifo_ga100.c kfifoGenerateWorkSubmitToken).
    if (is_gpfifo(cls)) created.token = next_token_++ | options_.runlist_id << 16;
    owner.objects[handle] = created;
    *object = handle;
    if (is_gpfifo(cls)) channel_allocated(owner, client, handle, params);
    return kOk;
}

uint32_t RmModel::check_params(Client& client, const Object& parent_object, uint32_t parent, uint32_t cls,
                               std::span<std::byte> params, Object& created) {
    auto size_is = [&](uint32_t expected, bool optional) {
        return params.size() == expected || (optional && params.empty());
    };
    auto child_of = [&](uint32_t handle, uint32_t want_parent) {
        auto it = client.objects.find(handle);
        return it != client.objects.end() && it->second.parent == want_parent ? &it->second : nullptr;
    };
    switch (cls) {
        case kDevice:
            if (!size_is(kDeviceParams, false)) return kErrInvalidArgument;
            // rmapi/alloc_free.c (the Device case before the object is built): deviceId >= NV_MAX_DEVICES (32)
            // is NV_ERR_INVALID_ARGUMENT, a device instance with no GPU NV_ERR_INVALID_STATE. The model has one
            // GPU, at options().device_instance (what GET_ID_INFO_V2 reports for its gpu_id).
            if (load<uint32_t>(params, kDeviceDeviceId) >= 32) return kErrInvalidArgument;
            if (load<uint32_t>(params, kDeviceDeviceId) != options_.device_instance) return kErrInvalidState;
            return kOk;
        case kSubdevice: return size_is(kSubdeviceParams, true) ? kOk : kErrInvalidArgument;
        case kMemoryVirtual: {
            if (!size_is(kMemoryVirtualParams, true)) return kErrInvalidArgument;
            const uint32_t vaspace = params.empty() ? 0 : load<uint32_t>(params, kMemoryVirtualVaspace);
            // mem_mgr/virt_mem_range.c vmrangeConstruct: the range ends below maxVA — the VA space's vasLimit + 1
            // when hVASpace names one, else the GMMU's maxVASize — or NV_ERR_INVALID_LIMIT; offset below it, or
            // NV_ERR_INVALID_OFFSET. limit 0 means "up to maxVA".
            uint64_t max_va = options_.max_va_size;
            if (vaspace != 0) {
                const Object* vas = child_of(vaspace, parent);
                if (!vas || vas->cls != kVaspace) return kErrInvalidObjectHandle;
                max_va = vas->va_limit + 1;
            }
            const uint64_t limit = params.empty() ? 0 : load<uint64_t>(params, kMemoryVirtualLimit);
            if (limit != 0) {
                if (limit >= max_va) return kErrInvalidLimit;
                max_va = limit + 1;
            }
            if (!params.empty() && load<uint64_t>(params, kMemoryVirtualOffset) >= max_va) return kErrInvalidOffset;
            if (!params.empty()) store<uint64_t>(params, kMemoryVirtualLimit, max_va - 1);  // the limit returned to the client
            created.vaspace = vaspace;
            return kOk;
        }
        case kVaspace: {
            if (!size_is(vaspace_params_size(), false)) return kErrInvalidArgument;
            created.externally_owned = (load<uint32_t>(params, kVaspaceFlags) & kVaspaceFlagsExternallyOwned) != 0;
            // gpu_vaspace.c gvaspaceConstruct: vasLimit = vaBase + vaSize - 1 (vaSize 0: the GMMU's whole range).
            const uint64_t va_base = load<uint64_t>(params, kVaspaceVaBase), va_size = load<uint64_t>(params, kVaspaceVaSize);
            created.va_limit = va_size != 0 ? va_base + va_size - 1 : options_.max_va_size - 1;
            // RM builds the tables of a VA space it owns (the model: only with a GPU behind it).
            if (!created.externally_owned && memory_hooks_.new_page_directory) {
                std::optional<uint64_t> pdb = memory_hooks_.new_page_directory();
                if (!pdb) return kErrNoMemory;
                created.page_directory = *pdb;
                created.has_page_directory = true;
            }
            return kOk;
        }
        case kChannelGroup: {
            if (!size_is(kChannelGroupParams, false)) return kErrInvalidArgument;
            if (load<uint32_t>(params, kChannelGroupEngineType) != kEngineTypeGraphics) return kErrInvalidArgument;
            uint32_t vaspace = load<uint32_t>(params, kChannelGroupVaspace);
            if (vaspace != 0) {
                const Object* vas = child_of(vaspace, parent);
                if (!vas || vas->cls != kVaspace) return kErrInvalidObjectHandle;
            }
            created.vaspace = vaspace;
            return kOk;
        }
        case kContextShare: {
            if (!size_is(kCtxshareParams, false)) return kErrInvalidArgument;
            uint32_t vaspace = load<uint32_t>(params, kCtxshareVaspace);
            auto it = client.objects.find(vaspace);
            if (it == client.objects.end() || it->second.cls != kVaspace || it->second.parent != parent_object.parent) {
                return kErrInvalidObjectHandle;
            }
            // kernel_ctxshare.c kctxshareapiConstruct: an externally owned VA space must have its page directory
            // (SET_PAGE_DIRECTORY) before a context share is made in it.
            if (it->second.externally_owned && !it->second.has_page_directory) return kErrInvalidState;
            if (parent_object.vaspace != 0 && parent_object.vaspace != vaspace) return kErrInvalidArgument;
            created.vaspace = vaspace;
            created.subcontext = load<uint32_t>(params, kCtxshareFlags) & 3;
            return kOk;
        }
        case kMemoryUser:
        case kMemorySystem: {
            if (!size_is(kMemoryParams, false)) return kErrInvalidArgument;
            uint64_t size = load<uint64_t>(params, kMemorySize);
            uint64_t alignment = load<uint64_t>(params, kMemoryAlignment);
            if (size == 0 || (alignment != 0 && !is_power_of_two(alignment))) return kErrInvalidArgument;
            created.size = size;
            if (cls == kMemoryUser && memory_hooks_.alloc_vram) {
                std::optional<uint64_t> at = memory_hooks_.alloc_vram(size, std::max<uint64_t>(alignment, 4096));
                if (!at) return kErrNoMemory;
                created.backing = RmBacking{true, *at};
                store<uint64_t>(params, kMemoryOffset, *at);
            }
            store<uint64_t>(params, kMemoryLimit, size - 1);
            return kOk;
        }
        default: break;
    }
    if (is_usermode(cls)) {
        created.size = kUsermodeBytes;
        return params.empty() ? kOk : kErrInvalidArgument;
    }
    if (is_engine(cls)) return params.empty() ? kOk : kErrInvalidArgument;
    if (is_gpfifo(cls)) {
        if (!size_is(kChannelParams, false)) return kErrInvalidArgument;
        const Object* share = child_of(load<uint32_t>(params, kChannelContextShare), parent);
        if (!share || share->cls != kContextShare) return kErrInvalidObjectHandle;
        uint32_t entries = load<uint32_t>(params, kChannelGpFifoEntries);
        if (entries < 2 || !is_power_of_two(entries)) return kErrInvalidArgument;
        if (load<uint64_t>(params, kChannelGpFifoOffset) % 8 != 0) return kErrInvalidArgument;
        auto userd = client.objects.find(load<uint32_t>(params, kChannelUserdMemory0));
        if (userd == client.objects.end() || !is_memory(userd->second.cls)) return kErrInvalidObjectHandle;
        uint64_t offset = load<uint64_t>(params, kChannelUserdOffset0);
        // USERD is 512 bytes, 512-aligned (clc56f.h AmpereAControlGPFifo; NV_RAMUSERD_BASE_SHIFT 9).
        if (offset % 512 != 0 || offset + 512 > userd->second.size) return kErrInvalidArgument;
        if (load<uint32_t>(params, kChannelEngineType) != 0 && load<uint32_t>(params, kChannelEngineType) != kEngineTypeGraphics) {
            return kErrInvalidArgument;
        }
        // The error notifier: a memory object of the same device, room for the NvNotification array
        // (kernel_channel.c: memGetByHandleAndDevice, NV_CHANNELGPFIFO_NOTIFICATION_TYPE__SIZE_1 = 3 entries).
        if (uint32_t error = load<uint32_t>(params, kChannelObjectError); error != 0) {
            auto e = client.objects.find(error);
            if (e == client.objects.end() || !(is_memory(e->second.cls) || e->second.cls == kMemoryOsDescriptor) ||
                device_of(client, error) != device_of(client, parent))
                return kErrInvalidObjectHandle;
            if (e->second.size < 3 * kNotificationBytes) return kErrInvalidArgument;
            created.error_notifier = error;
        }
        return kOk;
    }
    return kErrInvalidClass;
}

uint32_t RmModel::set_page_directory(uint32_t client, uint32_t device, uint32_t vaspace, uint64_t root, uint32_t entries) {
    std::lock_guard lock(mutex_);
    uint32_t status = kOk;
    auto c = clients_.find(client);
    if (c == clients_.end()) {
        status = kErrInvalidClient;
    } else if (auto d = c->second.objects.find(device); d == c->second.objects.end() || d->second.cls != kDevice) {
        status = kErrInvalidObjectHandle;
    } else if (auto v = c->second.objects.find(vaspace);
               v == c->second.objects.end() || v->second.cls != kVaspace || v->second.parent != device) {
        status = kErrInvalidObjectHandle;
    } else if (root % 4096 != 0 || entries == 0) {
        status = kErrInvalidArgument;
    } else {
        v->second.page_directory = root;
        v->second.has_page_directory = true;
    }
    log_.push_back(fmt::format("set_page_directory 0x{:x} of 0x{:x} (client 0x{:x}) at {:#x}, {} entries -> 0x{:x}", vaspace, device,
                               client, root, entries, status));
    return status;
}

uint32_t RmModel::control(uint32_t client, uint32_t object, uint32_t cmd, std::span<std::byte> params) {
    std::lock_guard lock(mutex_);
    uint32_t status = control_locked(client, object, cmd, params);
    log_.push_back(fmt::format("control 0x{:x} on 0x{:x} (client 0x{:x}, {} bytes) -> 0x{:x}", cmd, object, client,
                               params.size(), status));
    return status;
}

uint32_t RmModel::control_locked(uint32_t client, uint32_t object, uint32_t cmd, std::span<std::byte> params) {
    auto c = clients_.find(client);
    if (c == clients_.end()) return kErrInvalidClient;
    // resserv rs_resource.c resControlLookup: the object, then the command among its class's exported
    // methods (NV_ERR_NOT_SUPPORTED), then the exported parameter size, exactly (NV_ERR_INVALID_PARAM_STRUCT).
    const uint32_t expected = control_size(cmd, driver_major());
    auto o = c->second.objects.find(object);
    if (o == c->second.objects.end()) return kErrInvalidObjectHandle;
    if (expected == 0 || !control_target_ok(cmd, o->second.cls)) return kErrNotSupported;
    if (params.size() != expected) return kErrInvalidParamStruct;

    switch (cmd) {
        case kCtrlBuildVersionV2: {
            std::fill(params.begin(), params.end(), std::byte{0});
            const std::string& v = options_.driver_version;
            // driverVersionBuffer, versionBuffer, driverBranch, titleBuffer: 256 chars each.
            std::memcpy(params.data(), v.data(), std::min<size_t>(v.size(), 255));
            std::memcpy(params.data() + 256, v.data(), std::min<size_t>(v.size(), 255));
            std::string branch = "r" + v.substr(0, v.find('.')) + "_00";
            std::memcpy(params.data() + 512, branch.data(), std::min<size_t>(branch.size(), 255));
            return kOk;
        }
        case kCtrlGetIdInfoV2: {
            if (load<uint32_t>(params, 0) != options_.gpu_id) return kErrInvalidArgument;
            store<uint32_t>(params, 8, options_.device_instance);  // deviceInstance
            store<uint32_t>(params, 12, 0);                        // subDeviceInstance
            return kOk;
        }
        case kCtrlGetClasslistV2: {
            std::vector<uint32_t> list = {kDevice, kSubdevice, kMemorySystem, kMemoryUser, kMemoryVirtual,
                                          kContextShare, kVaspace, kChannelGroup};
            list.insert(list.end(), options_.classes.begin(), options_.classes.end());
            store<uint32_t>(params, 0, static_cast<uint32_t>(list.size()));
            const size_t room = (params.size() - 4) / 4;
            for (size_t i = 0; i < list.size() && i < room; ++i) store<uint32_t>(params, 4 + 4 * i, list[i]);
            return kOk;
        }
        case kCtrlGpfifoSchedule: {
            bool has_channel = false;
            for (const auto& [handle, obj] : c->second.objects) has_channel |= obj.parent == object && is_gpfifo(obj.cls);
            if (!has_channel) return kErrInvalidState;  // nothing to schedule
            o->second.scheduled = static_cast<uint8_t>(params[0]) != 0;
            return kOk;
        }
        case kCtrlWorkSubmitToken: store<uint32_t>(params, 0, o->second.token); return kOk;
        case kCtrlCopyServerReservedPdes: {
            // gpu_vaspace.c gvaspaceCopyServerReservedPdes: unicast (a subdevice of this device, or 0),
            // 1..GMMU_FMT_MAX_LEVELS levels, the range aligned to pageSize; level 0 is the root
            // directory the client wrote, which RM then uses as the VA space's page directory.
            uint32_t sub = load<uint32_t>(params, kPdesSubdevice);
            if (sub != 0) {
                auto s = c->second.objects.find(sub);
                if (s == c->second.objects.end() || s->second.cls != kSubdevice || s->second.parent != o->second.parent)
                    return kErrInvalidObjectHandle;
            }
            uint64_t page = load<uint64_t>(params, kPdesPageSize), lo = load<uint64_t>(params, kPdesVirtLo),
                     hi = load<uint64_t>(params, kPdesVirtHi);
            uint32_t levels = load<uint32_t>(params, kPdesNumLevels);
            if (levels == 0 || levels > kPdesMaxLevels || page == 0 || !is_power_of_two(page) || lo % page != 0 ||
                (hi + 1) % page != 0 || hi < lo)
                return kErrInvalidArgument;
            for (uint32_t i = 0; i < levels; ++i) {
                size_t at = kPdesLevels + i * kPdesLevelBytes;
                uint64_t phys = load<uint64_t>(params, at + kPdesLevelPhys), size = load<uint64_t>(params, at + kPdesLevelSize);
                if (phys % 4096 != 0 || size == 0 || load<uint32_t>(params, at + kPdesLevelAperture) != kGmmuApertureVideo)
                    return kErrInvalidArgument;  // the model keeps page tables in VRAM only
            }
            // It edits only a server-owned range of RM's own page-table walker and returns NV_OK doing nothing when
            // the VA space has none (gpu_vaspace.c gvaspaceCopyServerReservedPdes): it is not how a client's page
            // directory reaches RM (SET_PAGE_DIRECTORY is).
            return kOk;
        }
        default: return kErrNotSupported;
    }
}

void RmModel::free_tree(Client& client, uint32_t client_handle, uint32_t handle) {
    std::vector<uint32_t> children;
    for (const auto& [h, obj] : client.objects) {
        if (obj.parent == handle && h != handle) children.push_back(h);
    }
    for (uint32_t child : children) free_tree(client, client_handle, child);
    auto it = client.objects.find(handle);
    if (it != client.objects.end() && is_gpfifo(it->second.cls) && it->second.engines_registered && hooks_.channel_freed) {
        hooks_.channel_freed(it->second.token);
    }
    // Mappings of a freed memory object, or in a freed VA space, go with it (RM unmaps on free).
    drop_mappings([&](const DmaMapping& m) { return m.client == client_handle && (m.memory == handle || m.space == handle); });
    if (it != client.objects.end()) release_memory(it->second);
    client.objects.erase(handle);
}

void RmModel::drop_mappings(const std::function<bool(const DmaMapping&)>& which) {
    std::erase_if(dma_, [&](const DmaMapping& m) {
        if (!which(m)) return false;
        if (m.pdb && memory_hooks_.unmap) memory_hooks_.unmap(*m.pdb, m.va, m.length);
        return true;
    });
}

void RmModel::release_memory(const Object& o) {
    // The VRAM goes back to RM's heap; a freed VA space's tables are not reclaimed (README).
    if (o.backing && o.backing->vram && memory_hooks_.free_vram) memory_hooks_.free_vram(o.backing->address, o.size);
}

uint32_t RmModel::free(uint32_t client, uint32_t parent, uint32_t object) {
    std::lock_guard lock(mutex_);
    uint32_t status = kOk;
    auto c = clients_.find(client);
    if (c == clients_.end()) {
        status = kErrInvalidClient;
    } else if (object == client) {
        for (const auto& [h, obj] : c->second.objects) {
            if (is_gpfifo(obj.cls) && obj.engines_registered && hooks_.channel_freed) hooks_.channel_freed(obj.token);
        }
        drop_mappings([&](const DmaMapping& m) { return m.client == client; });
        for (const auto& [h, obj] : c->second.objects) release_memory(obj);
        clients_.erase(c);
    } else if (!c->second.objects.count(object)) {
        status = kErrObjectNotFound;
    } else {
        free_tree(c->second, client, object);
    }
    log_.push_back(fmt::format("free 0x{:x} (parent 0x{:x}, client 0x{:x}) -> 0x{:x}", object, parent, client, status));
    return status;
}

size_t RmModel::object_count() const {
    std::lock_guard lock(mutex_);
    size_t n = 0;
    for (const auto& [handle, client] : clients_) n += client.objects.size();
    return n;
}

uint32_t RmModel::class_of(uint32_t client, uint32_t object) const {
    std::lock_guard lock(mutex_);
    auto c = clients_.find(client);
    if (c == clients_.end()) return 0;
    auto o = c->second.objects.find(object);
    return o == c->second.objects.end() ? 0 : o->second.cls;
}

void RmModel::set_engine_hooks(RmEngineHooks hooks) {
    std::lock_guard lock(mutex_);
    hooks_ = std::move(hooks);
}

void RmModel::set_memory_hooks(RmMemoryHooks hooks) {
    std::lock_guard lock(mutex_);
    memory_hooks_ = std::move(hooks);
}

std::optional<RmBacking> RmModel::backing_of(uint32_t client, uint32_t memory) const {
    std::lock_guard lock(mutex_);
    auto c = clients_.find(client);
    if (c == clients_.end()) return std::nullopt;
    auto m = c->second.objects.find(memory);
    return m == c->second.objects.end() ? std::nullopt : m->second.backing;
}

std::string RmModel::robust_channel_error(uint32_t token, uint32_t xid, uint64_t timestamp_ns) {
    std::lock_guard lock(mutex_);
    for (auto& [client_handle, client] : clients_) {
        for (auto& [handle, obj] : client.objects) {
            if (!is_gpfifo(obj.cls) || obj.token != token) continue;
            std::string name = fmt::format("channel {} (handle {:#x} of client {:#x})", token, handle, client_handle);
            auto e = client.objects.find(obj.error_notifier);
            if (obj.error_notifier == 0 || e == client.objects.end() || !e->second.backing || !memory_hooks_.write) {
                log_.push_back(fmt::format("robust channel error {} on {}: no error notifier", xid, name));
                return name;
            }
            // NV_CHANNELGPFIFO_NOTIFICATION_TYPE_ERROR = entry 0; RM fills timeStamp, info32, info16, then status.
            std::byte n[kNotificationBytes]{};
            std::memcpy(n, &timestamp_ns, 8);
            std::memcpy(n + 8, &xid, 4);
            const uint16_t engine = kEngineTypeGraphics, status = 0xffff;
            std::memcpy(n + 12, &engine, 2);
            memory_hooks_.write(*e->second.backing, std::span<const std::byte>(n, 14));
            std::memcpy(n + 14, &status, 2);
            memory_hooks_.write(RmBacking{e->second.backing->vram, e->second.backing->address + 14},
                                std::span<const std::byte>(n + 14, 2));
            log_.push_back(fmt::format("robust channel error {} on {}: error notifier 0x{:x} written", xid, name, obj.error_notifier));
            return name;
        }
    }
    return {};
}

void RmModel::channel_allocated(Client& owner, uint32_t client, uint32_t handle, std::span<const std::byte> params) {
    Object& ch = owner.objects[handle];
    if (!hooks_.channel_allocated) return;
    // The VA space: the context share's (the channel's hContextShare), whose page directory the
    // client handed over with COPY_SERVER_RESERVED_PDES. Without one, RM would build its own page
    // tables; the model has none, so such a channel is never made runnable (its doorbell is a violation).
    auto share = owner.objects.find(load<uint32_t>(params, kChannelContextShare));
    if (share == owner.objects.end()) return;
    auto vas = owner.objects.find(share->second.vaspace);
    if (vas == owner.objects.end() || !vas->second.has_page_directory) return;
    RmChannelInfo info;
    info.token = ch.token;
    info.gpfifo_va = load<uint64_t>(params, kChannelGpFifoOffset);
    info.gpfifo_entries = load<uint32_t>(params, kChannelGpFifoEntries);
    // Simplification (README) where memory objects have no placement (GSP-RM under nvpci): real RM reaches USERD
    // physically (the memory object's pages); the model takes USERD's GPU VA as gpFifoOffset +
    // userdOffset[0], i.e. the ring at offset 0 of hUserdMemory[0] mapped contiguously (tinygrad's layout
    // with offset 0: the ring, then USERD).
    info.userd_va = info.gpfifo_va + load<uint64_t>(params, kChannelUserdOffset0);
    // With RM placing memory (nvidia.ko's RM, memory hooks) USERD is what real RM uses: the physical pages of
    // hUserdMemory[0] at userdOffset[0] (kernel_channel.c kchannelConstruct → kernel_channel_gv100.c
    // kchannelGetUserdInfo, memdescGetPhysAddr). Whatever GPU VA the client mapped elsewhere is not looked at.
    if (auto userd = owner.objects.find(load<uint32_t>(params, kChannelUserdMemory0));
        userd != owner.objects.end() && userd->second.backing && userd->second.backing->vram)
        info.userd_vram = userd->second.backing->address + load<uint64_t>(params, kChannelUserdOffset0);
    info.page_directory_base = vas->second.page_directory;
    info.gpfifo_class = ch.cls;
    info.name = fmt::format("channel {} (handle {:#x} of client {:#x})", ch.token, handle, client);
    hooks_.channel_allocated(info);
    ch.engines_registered = true;
}

std::optional<uint32_t> RmModel::subcontext_mode(uint32_t client, uint32_t ctxshare) const {
    std::lock_guard lock(mutex_);
    auto c = clients_.find(client);
    if (c == clients_.end()) return std::nullopt;
    auto o = c->second.objects.find(ctxshare);
    if (o == c->second.objects.end() || o->second.cls != kContextShare) return std::nullopt;
    return o->second.subcontext;
}

uint32_t RmModel::token_of(uint32_t client, uint32_t channel) const {
    std::lock_guard lock(mutex_);
    auto c = clients_.find(client);
    if (c == clients_.end()) return 0;
    auto o = c->second.objects.find(channel);
    return o == c->second.objects.end() ? 0 : o->second.token;
}

std::vector<std::string> RmModel::log() const {
    std::lock_guard lock(mutex_);
    return log_;
}

}  // namespace baregpu::sim::nvgpu
