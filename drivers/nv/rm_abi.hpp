// The RM (Resource Manager) object ABI the driver speaks to nvidia.ko and to GSP-RM: class
// numbers, control commands and their parameter structures. Layouts from NVIDIA
// open-gpu-kernel-modules (tag 570.144 unless a struct says otherwise); each struct names its
// header. All are plain little-endian C layouts (LP64, NV_DECLARE_ALIGNED(x, 8) = alignas(8)).
//
// Layouts that differ between driver branches are versioned (RmBranch): the driver detects the
// branch from NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2 first and encodes per branch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace baregpu::nv {

using NvHandle = uint32_t;

// Classes (src/common/sdk/nvidia/inc/class/cl*.h, g_allclasses.h).
inline constexpr uint32_t NV01_ROOT_CLIENT = 0x00000041;           // cl0041.h
inline constexpr uint32_t NV01_DEVICE_0 = 0x00000080;              // cl0080.h
inline constexpr uint32_t NV20_SUBDEVICE_0 = 0x00002080;           // cl2080.h
inline constexpr uint32_t NV01_MEMORY_SYSTEM = 0x0000003e;         // cl003e.h
inline constexpr uint32_t NV1_MEMORY_USER = 0x00000040;            // cl0040.h
inline constexpr uint32_t NV01_MEMORY_VIRTUAL = 0x00000070;        // cl0070.h
inline constexpr uint32_t NV01_MEMORY_SYSTEM_OS_DESCRIPTOR = 0x00000071;  // cl0071.h
inline constexpr uint32_t FERMI_CONTEXT_SHARE_A = 0x00009067;      // cl9067.h
inline constexpr uint32_t FERMI_VASPACE_A = 0x000090f1;            // cl90f1.h
inline constexpr uint32_t KEPLER_CHANNEL_GROUP_A = 0x0000a06c;     // cla06c.h
inline constexpr uint32_t TURING_USERMODE_A = 0x0000c461;          // clc461.h
inline constexpr uint32_t HOPPER_USERMODE_A = 0x0000c661;          // clc661.h
inline constexpr uint32_t AMPERE_CHANNEL_GPFIFO_A = 0x0000c56f;    // clc56f.h
inline constexpr uint32_t HOPPER_CHANNEL_GPFIFO_A = 0x0000c86f;    // clc86f.h
inline constexpr uint32_t BLACKWELL_CHANNEL_GPFIFO_A = 0x0000c96f; // clc96f.h
inline constexpr uint32_t AMPERE_DMA_COPY_B = 0x0000c7b5;          // clc7b5.h
inline constexpr uint32_t HOPPER_DMA_COPY_A = 0x0000c8b5;          // clc8b5.h
inline constexpr uint32_t BLACKWELL_DMA_COPY_B = 0x0000cab5;       // clcab5.h
inline constexpr uint32_t AMPERE_COMPUTE_B = 0x0000c7c0;           // clc7c0.h
inline constexpr uint32_t ADA_COMPUTE_A = 0x0000c9c0;              // clc9c0.h
inline constexpr uint32_t HOPPER_COMPUTE_A = 0x0000cbc0;           // clcbc0.h
inline constexpr uint32_t BLACKWELL_COMPUTE_B = 0x0000cec0;        // clcec0.h

// "ADA_COMPUTE_A (0xc9c0)"; unknown classes by number.
std::string class_name(uint32_t cls);

// Control commands (src/common/sdk/nvidia/inc/ctrl/...).
inline constexpr uint32_t NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2 = 0x13e;  // ctrl0000system.h
inline constexpr uint32_t NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2 = 0x205;           // ctrl0000gpu.h
inline constexpr uint32_t NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2 = 0x800292;      // ctrl0080gpu.h
inline constexpr uint32_t NVA06C_CTRL_CMD_GPFIFO_SCHEDULE = 0xa06c0101;         // ctrla06c.h
inline constexpr uint32_t NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN = 0xc36f0108;  // ctrlc36f.h
inline constexpr uint32_t NV90F1_CTRL_CMD_VASPACE_COPY_SERVER_RESERVED_PDES = 0x90f10106;  // ctrl90f1.h

// "NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2 (0x800292)".
std::string control_name(uint32_t cmd);

// nvos.h: NV2080_ENGINE_TYPE_GRAPHICS (cl2080_notification.h), the channel group's engine.
inline constexpr uint32_t NV2080_ENGINE_TYPE_GRAPHICS = 1;

// The driver branches whose layouts we know. Earlier than 570 is refused. 570 (570-574), 575 (575-579)
// and 580 (580-599) differ in GPFIFO_SCHEDULE (bSkipEnable from 575), GET_CLASSLIST_V2 (200 entries from
// 580) and NV_VASPACE_ALLOCATION_PARAMETERS (pasid from 580).
enum class RmBranch { r570, r575, r580 };
const char* branch_name(RmBranch branch);

// cl0080.h NV0080_ALLOC_PARAMETERS.
struct Nv0080AllocParameters {
    uint32_t deviceId;
    NvHandle hClientShare;
    NvHandle hTargetClient;
    NvHandle hTargetDevice;
    uint32_t flags;
    uint32_t pad0;
    uint64_t vaSpaceSize;
    uint64_t vaStartInternal;
    uint64_t vaLimitInternal;
    uint32_t vaMode;  // NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES = 0 (nvos.h)
    uint32_t pad1;
};
static_assert(sizeof(Nv0080AllocParameters) == 56 && offsetof(Nv0080AllocParameters, vaMode) == 48);

// cl2080.h NV2080_ALLOC_PARAMETERS.
struct Nv2080AllocParameters {
    uint32_t subDeviceId;
};

// cl0070.h NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS.
struct NvMemoryVirtualAllocationParams {
    uint64_t offset;
    uint64_t limit;
    NvHandle hVASpace;
    uint32_t pad;
};
static_assert(sizeof(NvMemoryVirtualAllocationParams) == 24);

// nvos.h NV_VASPACE_ALLOCATION_PARAMETERS: 570 ends at vaBase (48 bytes); 580 adds pasid at
// +48 (56 bytes). Encode with vaspace_params_size(branch).
struct NvVaspaceAllocationParameters {
    uint32_t index;
    uint32_t flags;
    uint64_t vaSize;
    uint64_t vaStartInternal;
    uint64_t vaLimitInternal;
    uint32_t bigPageSize;
    uint32_t pad0;
    uint64_t vaBase;
    uint32_t pasid;  // 580 and later only
    uint32_t pad1;
};
static_assert(offsetof(NvVaspaceAllocationParameters, vaBase) == 40 && offsetof(NvVaspaceAllocationParameters, pasid) == 48);
inline constexpr uint32_t NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED = 1u << 3;  // nvos.h
inline constexpr uint32_t NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING = 1u << 6;
inline constexpr uint32_t vaspace_params_size(RmBranch branch) { return branch == RmBranch::r580 ? 56 : 48; }

// nvos.h NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS.
struct NvChannelGroupAllocationParameters {
    NvHandle hObjectError;
    NvHandle hObjectEccError;
    NvHandle hVASpace;
    uint32_t engineType;
    uint8_t bIsCallingContextVgpuPlugin;  // NvBool
    uint8_t pad[3];
};
static_assert(sizeof(NvChannelGroupAllocationParameters) == 20);

// nvos.h NV_CTXSHARE_ALLOCATION_PARAMETERS.
struct NvCtxshareAllocationParameters {
    NvHandle hVASpace;
    uint32_t flags;
    uint32_t subctxId;  // read only with SUBCONTEXT_SPECIFIED
};
// nvos.h NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT: SYNC 0, ASYNC 1, SPECIFIED 2 (kernel_channel_group.c
// asserts SYNC == 0 and ASYNC == 1). ASYNC: RM picks a free VEID.
inline constexpr uint32_t NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC = 1;

// alloc/alloc_channel.h NV_MEMORY_DESC_PARAMS and NV_CHANNEL_ALLOC_PARAMS (NV_MAX_SUBDEVICES 8,
// CC_CHAN_ALLOC_IV_SIZE_DWORD 3, CC_CHAN_ALLOC_NONCE_SIZE_DWORD 8); the same in 570 and 580.
struct NvMemoryDescParams {
    uint64_t base;
    uint64_t size;
    uint32_t addressSpace;
    uint32_t cacheAttrib;
};
struct NvChannelAllocParams {
    NvHandle hObjectError;
    NvHandle hObjectBuffer;
    uint64_t gpFifoOffset;
    uint32_t gpFifoEntries;
    uint32_t flags;
    NvHandle hContextShare;
    NvHandle hVASpace;
    NvHandle hUserdMemory[8];
    uint64_t userdOffset[8];
    uint32_t engineType;
    uint32_t cid;
    uint32_t subDeviceId;
    NvHandle hObjectEccError;
    NvMemoryDescParams instanceMem;
    NvMemoryDescParams userdMem;
    NvMemoryDescParams ramfcMem;
    NvMemoryDescParams mthdbufMem;
    NvHandle hPhysChannelGroup;
    uint32_t internalFlags;
    NvMemoryDescParams errorNotifierMem;
    NvMemoryDescParams eccErrorNotifierMem;
    uint32_t ProcessID;
    uint32_t SubProcessID;
    uint32_t encryptIv[3];
    uint32_t decryptIv[3];
    uint32_t hmacNonce[8];
    uint32_t tpcConfigID;
    uint32_t pad;
};
static_assert(offsetof(NvChannelAllocParams, hUserdMemory) == 32 && offsetof(NvChannelAllocParams, userdOffset) == 64);
static_assert(offsetof(NvChannelAllocParams, engineType) == 128 && offsetof(NvChannelAllocParams, internalFlags) == 244);
static_assert(sizeof(NvChannelAllocParams) == 368);

// nvos.h NV_MEMORY_ALLOCATION_PARAMS (NV1_MEMORY_USER, NV01_MEMORY_SYSTEM).
struct NvMemoryAllocationParams {
    uint32_t owner;
    uint32_t type;   // NVOS32_TYPE_IMAGE 0, NVOS32_TYPE_NOTIFIER 13 (nvos.h)
    uint32_t flags;
    uint32_t width;
    uint32_t height;
    int32_t pitch;
    uint32_t attr;
    uint32_t attr2;
    uint32_t format;
    uint32_t comprCovg;
    uint32_t zcullCovg;
    uint32_t pad0;
    uint64_t rangeLo;
    uint64_t rangeHi;
    uint64_t size;
    uint64_t alignment;
    uint64_t offset;
    uint64_t limit;
    uint64_t address;
    uint32_t ctagOffset;
    NvHandle hVASpace;
    uint32_t internalflags;
    uint32_t tag;
    int32_t numaNode;
    uint32_t pad1;
};
static_assert(offsetof(NvMemoryAllocationParams, size) == 64 && offsetof(NvMemoryAllocationParams, numaNode) == 120);
static_assert(sizeof(NvMemoryAllocationParams) == 128);

// ctrl0000system.h NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS (MAX_STRING_SIZE 256).
struct Nv0000CtrlSystemGetBuildVersionV2Params {
    char driverVersionBuffer[256];
    char versionBuffer[256];
    char driverBranch[256];
    char titleBuffer[256];
    uint32_t changelistNumber;
    uint32_t officialChangelistNumber;
};

// ctrl0000gpu.h NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS.
struct Nv0000CtrlGpuGetIdInfoV2Params {
    uint32_t gpuId;
    uint32_t gpuFlags;
    uint32_t deviceInstance;
    uint32_t subDeviceInstance;
    uint32_t sliStatus;
    uint32_t boardId;
    uint32_t gpuInstance;
    int32_t numaId;
};

// ctrl0080gpu.h NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS: NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE is 100 in
// 570/575 and 200 from 580 (404 / 804 bytes). RM checks the size exactly (resserv rs_resource.c
// resControlLookup: NV_ERR_INVALID_PARAM_STRUCT), so encode with classlist_params_size(branch).
inline constexpr uint32_t classlist_max_size(RmBranch branch) { return branch == RmBranch::r580 ? 200 : 100; }
inline constexpr uint32_t classlist_params_size(RmBranch branch) { return 4 + 4 * classlist_max_size(branch); }
struct Nv0080CtrlGpuGetClasslistV2Params {
    uint32_t numClasses;
    uint32_t classList[200];
};
static_assert(sizeof(Nv0080CtrlGpuGetClasslistV2Params) == 804);

// ctrla06fgpfifo.h NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS (= NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS): bEnable,
// bSkipSubmit in 570; bSkipEnable from 575 (2 / 3 bytes, checked exactly as above).
inline constexpr uint32_t gpfifo_schedule_params_size(RmBranch branch) { return branch == RmBranch::r570 ? 2 : 3; }
struct NvA06cCtrlGpfifoScheduleParams {
    uint8_t bEnable;
    uint8_t bSkipSubmit;
    uint8_t bSkipEnable;  // 575 and later only
};

// ctrl90f1.h (570.144) NV90F1_CTRL_VASPACE_COPY_SERVER_RESERVED_PDES_PARAMS: the client's page
// directory levels (root first) for a VA range, mirrored by GSP-RM (tinygrad's NVPCI golden context).
inline constexpr uint32_t GMMU_FMT_MAX_LEVELS = 6;
inline constexpr uint32_t GMMU_APERTURE_VIDEO = 1;  // gpu_vaspace.c: levels in VRAM
struct Nv90f1CtrlCopyServerReservedPdesParams {
    uint32_t hSubDevice;
    uint32_t subDeviceId;
    uint64_t pageSize;
    uint64_t virtAddrLo;
    uint64_t virtAddrHi;
    uint32_t numLevelsToCopy;
    struct Level {
        uint64_t physAddress;
        uint64_t size;
        uint32_t aperture;
        uint8_t pageShift;
    } levels[GMMU_FMT_MAX_LEVELS];
};
static_assert(sizeof(Nv90f1CtrlCopyServerReservedPdesParams) == 184 &&
              offsetof(Nv90f1CtrlCopyServerReservedPdesParams, levels) == 40);

// ctrlc36f.h NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS.
struct NvC36fCtrlGetWorkSubmitTokenParams {
    uint32_t workSubmitToken;
};

}  // namespace baregpu::nv
