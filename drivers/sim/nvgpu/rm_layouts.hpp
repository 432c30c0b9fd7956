// The model's own copy of the RM class, control and parameter facts it checks
// (open-gpu-kernel-modules 570.144 and 580.65.06: src/common/sdk/nvidia/inc/class/cl*.h,
// ctrl/*, nvos.h, alloc/alloc_channel.h, nvstatuscodes.h). Offsets are byte offsets in the
// little-endian LP64 layouts.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

namespace baregpu::sim::nvgpu::rm {

// nvstatuscodes.h
inline constexpr uint32_t kOk = 0x00;
inline constexpr uint32_t kErrInsertDuplicateName = 0x19;
inline constexpr uint32_t kErrInvalidArgument = 0x1F;
inline constexpr uint32_t kErrInvalidClass = 0x22;
inline constexpr uint32_t kErrInvalidClient = 0x23;
inline constexpr uint32_t kErrInvalidLimit = 0x2E;
inline constexpr uint32_t kErrInvalidOffset = 0x37;
inline constexpr uint32_t kErrInvalidParamStruct = 0x3A;
inline constexpr uint32_t kErrInvalidAddress = 0x1E;
inline constexpr uint32_t kErrInvalidObjectHandle = 0x33;
inline constexpr uint32_t kErrInvalidObjectNew = 0x34;
inline constexpr uint32_t kErrInvalidObjectParent = 0x36;
inline constexpr uint32_t kErrInvalidState = 0x40;
inline constexpr uint32_t kErrNotSupported = 0x56;
inline constexpr uint32_t kErrObjectNotFound = 0x57;
inline constexpr uint32_t kErrNoMemory = 0x51;

// Classes.
inline constexpr uint32_t kRootClient = 0x41, kDevice = 0x80, kSubdevice = 0x2080;
inline constexpr uint32_t kMemorySystem = 0x3e, kMemoryUser = 0x40, kMemoryVirtual = 0x70, kMemoryOsDescriptor = 0x71;
inline constexpr uint32_t kContextShare = 0x9067, kVaspace = 0x90f1, kChannelGroup = 0xa06c;
inline constexpr uint32_t kTuringUsermode = 0xc461, kHopperUsermode = 0xc661;
inline constexpr uint32_t kAmpereGpfifo = 0xc56f, kHopperGpfifo = 0xc86f, kBlackwellGpfifo = 0xc96f;
inline constexpr uint32_t kAmpereDmaCopyB = 0xc7b5, kHopperDmaCopyA = 0xc8b5, kBlackwellDmaCopyB = 0xcab5;
inline constexpr uint32_t kAmpereComputeB = 0xc7c0, kAdaComputeA = 0xc9c0, kHopperComputeA = 0xcbc0,
                          kBlackwellComputeB = 0xcec0;

// Parameter sizes.
inline constexpr uint32_t kDeviceParams = 56;        // NV0080_ALLOC_PARAMETERS
inline constexpr uint32_t kSubdeviceParams = 4;      // NV2080_ALLOC_PARAMETERS
inline constexpr uint32_t kMemoryVirtualParams = 24; // NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS
inline constexpr uint32_t kVaspaceParams570 = 48;    // NV_VASPACE_ALLOCATION_PARAMETERS, 570
inline constexpr uint32_t kVaspaceParams580 = 56;    // ... 580: + pasid at 48
inline constexpr uint32_t kChannelGroupParams = 20;  // NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS
inline constexpr uint32_t kCtxshareParams = 12;      // NV_CTXSHARE_ALLOCATION_PARAMETERS
inline constexpr uint32_t kChannelParams = 368;      // NV_CHANNEL_ALLOC_PARAMS
inline constexpr uint32_t kMemoryParams = 128;       // NV_MEMORY_ALLOCATION_PARAMS

// Field offsets the model reads.
inline constexpr size_t kDeviceDeviceId = 0;
inline constexpr size_t kMemoryVirtualOffset = 0, kMemoryVirtualLimit = 8;  // NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS
inline constexpr size_t kMemoryVirtualVaspace = 16;  // NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS.hVASpace (0: the device's default)
// kern_gmmu.c: maxVASize of the GMMU (49 bits on MMU v2: Turing to Ada; 57 on v3: Hopper on), what an
// NV01_MEMORY_VIRTUAL with hVASpace 0 is checked against.
inline constexpr uint64_t kMaxVaSizeV2 = uint64_t{1} << 49, kMaxVaSizeV3 = uint64_t{1} << 57;
inline constexpr size_t kVaspaceFlags = 4;           // NV_VASPACE_ALLOCATION_PARAMETERS.flags
inline constexpr size_t kVaspaceVaSize = 8, kVaspaceVaBase = 40;  // ... vaSize, vaBase
inline constexpr uint32_t kVaspaceFlagsExternallyOwned = 1u << 3;  // NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED
inline constexpr size_t kChannelObjectError = 0;     // NV_CHANNEL_ALLOC_PARAMS.hObjectError (the error notifier)
// clc361.h: the usermode (doorbell) region is 64 KiB (NVC361_NV_USERMODE__SIZE).
inline constexpr uint64_t kUsermodeBytes = 0x10000;
// nvgputypes.h NvNotification: timeStamp 0 (8 bytes), info32 8, info16 12, status 14; 16 bytes.
inline constexpr size_t kNotificationBytes = 16;
inline constexpr size_t kChannelGroupVaspace = 8, kChannelGroupEngineType = 12;
inline constexpr size_t kCtxshareVaspace = 0, kCtxshareFlags = 4, kCtxshareSubctxId = 8;
// nvos.h NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT 1:0: SYNC 0, ASYNC 1, SPECIFIED 2 (kernel_channel_group.c
// ct_asserts SYNC == 0 and ASYNC == 1).
inline constexpr uint32_t kCtxshareSync = 0, kCtxshareAsync = 1, kCtxshareSpecified = 2;
inline constexpr size_t kChannelGpFifoOffset = 8, kChannelGpFifoEntries = 16, kChannelContextShare = 24,
                        kChannelUserdMemory0 = 32, kChannelUserdOffset0 = 64, kChannelEngineType = 128;
inline constexpr size_t kMemorySize = 64, kMemoryAlignment = 72, kMemoryOffset = 80, kMemoryLimit = 88;
inline constexpr uint32_t kEngineTypeGraphics = 1;  // NV2080_ENGINE_TYPE_GRAPHICS

// NVOS46_FLAGS_DMA_OFFSET_FIXED (nvos.h 15:15).
inline constexpr uint32_t kNvos46DmaOffsetFixed = 1u << 15;

// Controls and their parameter sizes.
inline constexpr uint32_t kCtrlBuildVersionV2 = 0x13e, kBuildVersionV2Params = 1032;
inline constexpr uint32_t kCtrlGetIdInfoV2 = 0x205, kGetIdInfoV2Params = 32;
// GET_CLASSLIST_V2: NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE 100 in 570/575, 200 from 580 (ctrl0080gpu.h per tag).
inline constexpr uint32_t kCtrlGetClasslistV2 = 0x800292, kGetClasslistV2Params570 = 404, kGetClasslistV2Params580 = 804;
// GPFIFO_SCHEDULE: {bEnable, bSkipSubmit} in 570, + bSkipEnable from 575 (ctrla06fgpfifo.h per tag).
inline constexpr uint32_t kCtrlGpfifoSchedule = 0xa06c0101, kGpfifoScheduleParams570 = 2, kGpfifoScheduleParams575 = 3;
inline constexpr uint32_t kCtrlWorkSubmitToken = 0xc36f0108, kWorkSubmitTokenParams = 4;
// ctrl90f1.h NV90F1_CTRL_CMD_VASPACE_COPY_SERVER_RESERVED_PDES (570.144): hSubDevice 0, subDeviceId 4,
// pageSize 8, virtAddrLo 16, virtAddrHi 24, numLevelsToCopy 32, levels[GMMU_FMT_MAX_LEVELS = 6] from 40,
// 24 bytes each {physAddress 0, size 8, aperture 16, pageShift 20}; 184 bytes.
inline constexpr uint32_t kCtrlCopyServerReservedPdes = 0x90f10106, kCopyServerReservedPdesParams = 184;
inline constexpr size_t kPdesSubdevice = 0, kPdesPageSize = 8, kPdesVirtLo = 16, kPdesVirtHi = 24, kPdesNumLevels = 32,
                        kPdesLevels = 40, kPdesLevelBytes = 24, kPdesLevelPhys = 0, kPdesLevelSize = 8, kPdesLevelAperture = 16;
inline constexpr uint32_t kPdesMaxLevels = 6;
inline constexpr uint32_t kGmmuApertureVideo = 1;  // GMMU_APERTURE_VIDEO (gpu_vaspace.c fills it for VRAM levels)

template <class T>
T load(std::span<const std::byte> bytes, size_t offset) {
    T value{};
    std::memcpy(&value, bytes.data() + offset, sizeof(T));
    return value;
}
template <class T>
void store(std::span<std::byte> bytes, size_t offset, T value) {
    std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

}  // namespace baregpu::sim::nvgpu::rm
