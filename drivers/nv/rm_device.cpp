#include "drivers/nv/rm_device.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

namespace baregpu::nv {

namespace {

// The VA space every device asks for: [4 KiB, 4 KiB + vaSize), within the 49-bit GMMU v2 range.
constexpr uint64_t kVaBase = 0x1000, kVaSize = 0x1fffffb000000ull;

uint32_t pick(const std::vector<uint32_t>& available, std::initializer_list<uint32_t> preferred, const char* what,
              const std::string& device) {
    for (uint32_t cls : preferred) {
        if (std::find(available.begin(), available.end(), cls) != available.end()) return cls;
    }
    std::string wanted, offered;
    for (uint32_t cls : preferred) wanted += (wanted.empty() ? "" : ", ") + class_name(cls);
    for (uint32_t cls : available) offered += fmt::format("{}0x{:x}", offered.empty() ? "" : " ", cls);
    throw UnsupportedError(device, fmt::format("the GPU offers no {} class baregpu knows (wanted one of {}; GET_CLASSLIST_V2 "
                                               "listed {})",
                                               what, wanted, offered.empty() ? "nothing" : offered));
}

}  // namespace

RmClasses pick_classes(const std::vector<uint32_t>& available, const std::string& device) {
    RmClasses c;
    c.usermode = pick(available, {HOPPER_USERMODE_A, TURING_USERMODE_A}, "usermode (doorbell)", device);
    c.gpfifo = pick(available, {BLACKWELL_CHANNEL_GPFIFO_A, HOPPER_CHANNEL_GPFIFO_A, AMPERE_CHANNEL_GPFIFO_A},
                    "GPFIFO channel", device);
    c.compute = pick(available, {BLACKWELL_COMPUTE_B, HOPPER_COMPUTE_A, ADA_COMPUTE_A, AMPERE_COMPUTE_B}, "compute", device);
    c.copy = pick(available, {BLACKWELL_DMA_COPY_B, HOPPER_DMA_COPY_A, AMPERE_DMA_COPY_B}, "copy engine", device);
    return c;
}

RmDevice::RmDevice(RmTransport& transport, NvHandle client, RmBranch branch)
    : rm_(transport), client_(client), branch_(branch) {}

RmDevice::~RmDevice() {
    if (device_ == 0) return;
    try {
        rm_.free(client_, client_, device_);  // RM frees the subtree, children first
    } catch (const Error&) {
        // The transport is gone (GPU lost, GSP dead): nothing is left to free.
    }
}

std::unique_ptr<RmDevice> RmDevice::open(RmTransport& transport, NvHandle client, RmBranch branch,
                                         uint32_t device_instance, RmVaspaceOwner owner,
                                         const std::function<void(RmDevice&)>& vaspace_ready) {
    std::unique_ptr<RmDevice> d(new RmDevice(transport, client, branch));
    Rm& rm = d->rm_;

    Nv0080AllocParameters device{};
    device.deviceId = device_instance;
    device.hClientShare = client;
    device.vaMode = 0;  // NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES
    d->device_ = rm.alloc(client, client, NV01_DEVICE_0, device);

    Nv2080AllocParameters subdevice{0};
    d->subdevice_ = rm.alloc(client, d->device_, NV20_SUBDEVICE_0, subdevice);

    auto alloc_vaspace = [&] {
        NvVaspaceAllocationParameters vaspace{};
        if (owner == RmVaspaceOwner::driver)
            vaspace.flags = NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING | NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED;
        vaspace.vaBase = kVaBase;
        vaspace.vaSize = kVaSize;
        d->vaspace_ = rm.alloc(client, d->device_, FERMI_VASPACE_A, vaspace, vaspace_params_size(branch));
    };
    // RM-owned: the VA space first, for the hDma to name it.
    if (owner == RmVaspaceOwner::rm) alloc_vaspace();
    NvMemoryVirtualAllocationParams virtmem{};
    if (owner == RmVaspaceOwner::rm) {
        // Bound to our VA space, the range must end inside it (virt_mem_range.c vmrangeConstruct: limit <
        // the VAS's vaBase + vaSize, else NV_ERR_INVALID_LIMIT); its last byte: maps land where the caller says.
        virtmem.hVASpace = d->vaspace_;
        virtmem.limit = kVaBase + kVaSize - 1;
    } else {
        virtmem.limit = 0x1ffffffffffffull;  // hVASpace 0: checked against the GMMU's 49-bit maximum instead
    }
    d->virtmem_ = rm.alloc(client, d->device_, NV01_MEMORY_VIRTUAL, virtmem);

    auto classes = std::make_unique<Nv0080CtrlGpuGetClasslistV2Params>();
    std::memset(classes.get(), 0, sizeof(*classes));
    rm.control(client, d->device_, NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, *classes, classlist_params_size(branch));
    d->class_list_.assign(classes->classList, classes->classList + std::min(classes->numClasses, classlist_max_size(branch)));
    d->classes_ = pick_classes(d->class_list_, transport.device());

    d->usermode_ = rm.alloc_empty(client, d->subdevice_, d->classes_.usermode);

    if (owner == RmVaspaceOwner::driver) alloc_vaspace();
    if (vaspace_ready) vaspace_ready(*d);

    NvChannelGroupAllocationParameters group{};
    group.engineType = NV2080_ENGINE_TYPE_GRAPHICS;
    d->channel_group_ = rm.alloc(client, d->device_, KEPLER_CHANNEL_GROUP_A, group);

    NvCtxshareAllocationParameters share{};
    share.hVASpace = d->vaspace_;
    share.flags = NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC;
    d->ctxshare_ = rm.alloc(client, d->channel_group_, FERMI_CONTEXT_SHARE_A, share);
    return d;
}

NvHandle RmDevice::alloc_vram(uint64_t size, uint64_t alignment) {
    NvMemoryAllocationParams params{};
    params.owner = client_;
    params.type = 0;  // NVOS32_TYPE_IMAGE
    params.size = size;
    params.alignment = alignment;
    return rm_.alloc(client_, device_, NV1_MEMORY_USER, params);
}

RmChannel RmDevice::create_channel(const RmChannelSpec& spec) {
    NvChannelAllocParams params{};
    params.gpFifoOffset = spec.gpfifo_va;
    params.gpFifoEntries = spec.entries;
    params.hContextShare = ctxshare_;
    params.hUserdMemory[0] = spec.memory;
    params.userdOffset[0] = spec.userd_offset;
    params.engineType = 0;  // the group's (graphics)
    params.cid = next_cid_++;
    params.hObjectError = spec.error_notifier;
    RmChannel channel;
    channel.channel = rm_.alloc(client_, channel_group_, classes_.gpfifo, params);
    channel.engine_class = spec.engine_class;
    channel.engine = rm_.alloc_empty(client_, channel.channel, spec.engine_class);
    NvC36fCtrlGetWorkSubmitTokenParams token{};
    rm_.control(client_, channel.channel, NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, token);
    channel.work_submit_token = token.workSubmitToken;
    return channel;
}

void RmDevice::copy_server_reserved_pdes(uint64_t root, uint64_t root_bytes, uint8_t root_page_shift, uint64_t va_lo,
                                         uint64_t va_hi) {
    Nv90f1CtrlCopyServerReservedPdesParams p{};
    p.hSubDevice = subdevice_;
    p.pageSize = uint64_t{1} << root_page_shift;
    p.virtAddrLo = va_lo;
    p.virtAddrHi = va_hi;
    p.numLevelsToCopy = 1;
    p.levels[0] = {root, root_bytes, GMMU_APERTURE_VIDEO, root_page_shift};
    rm_.control(client_, vaspace_, NV90F1_CTRL_CMD_VASPACE_COPY_SERVER_RESERVED_PDES, p);
}

void RmDevice::schedule() {
    NvA06cCtrlGpfifoScheduleParams params{1, 0, 0};
    rm_.control(client_, channel_group_, NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, params, gpfifo_schedule_params_size(branch_));
}

}  // namespace baregpu::nv
