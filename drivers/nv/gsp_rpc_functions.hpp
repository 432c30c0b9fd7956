// GSP RPC function and event numbers: open-gpu-kernel-modules 570.144
// src/nvidia/inc/kernel/vgpu/rpc_global_enums.h (NV_VGPU_MSG_FUNCTION_*, NV_VGPU_MSG_EVENT_*).
// Only the ones drivers/nv uses so far; rpc_name() turns any number into text for errors.
#pragma once

#include <cstdint>
#include <string>

namespace baregpu::nv::gsp {

inline constexpr uint32_t kFnAllocMemory = 4;              // NV_VGPU_MSG_FUNCTION_ALLOC_MEMORY
inline constexpr uint32_t kFnUnloadingGuestDriver = 47;    // _UNLOADING_GUEST_DRIVER
inline constexpr uint32_t kFnSetPageDirectory = 54;        // _SET_PAGE_DIRECTORY
inline constexpr uint32_t kFnContinuationRecord = 71;      // _CONTINUATION_RECORD
inline constexpr uint32_t kFnGspSetSystemInfo = 72;        // _GSP_SET_SYSTEM_INFO
inline constexpr uint32_t kFnSetRegistry = 73;             // _SET_REGISTRY
inline constexpr uint32_t kFnGspRmControl = 76;            // _GSP_RM_CONTROL
inline constexpr uint32_t kFnGspRmAlloc = 103;             // _GSP_RM_ALLOC
inline constexpr uint32_t kEvGspInitDone = 0x1001;         // NV_VGPU_MSG_EVENT_GSP_INIT_DONE (4097)
inline constexpr uint32_t kEvGspRunCpuSequencer = 0x1002;  // _GSP_RUN_CPU_SEQUENCER (4098)
inline constexpr uint32_t kEvMmuFaultQueued = 0x1005;      // _MMU_FAULT_QUEUED (4101)
inline constexpr uint32_t kEvOsErrorLog = 0x1006;          // _OS_ERROR_LOG (4102)

// "GSP_RM_CONTROL (76)"; unknown numbers as "RPC 123".
std::string rpc_name(uint32_t function);

}  // namespace baregpu::nv::gsp
