// One GPFIFO channel as the simulated AD102's engines see it: what the RM model tells the engines
// when it allocates the channel (ChannelState), the PBDMA's decode position, and the per-subchannel
// state of the classes bound with SET_OBJECT. Offsets and fields from open-gpu-kernel-modules
// src/common/sdk/nvidia/inc/class/clc56f.h (AMPERE_CHANNEL_GPFIFO_A), typed here on the model's own.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace baregpu::sim::nvgpu {

enum class MmuFormat;

// clc56f.h AmpereAControlGPFifo (USERD, 512 bytes): GPGet at 0x88 (read-only to the host), GPPut at 0x8c.
inline constexpr uint64_t kUserdGpGet = 0x88;
inline constexpr uint64_t kUserdGpPut = 0x8c;

struct ChannelState {
    uint64_t gpfifo_va = 0;     // GPU VA of the GP entry ring (8 bytes an entry)
    uint32_t gpfifo_entries = 0;
    uint64_t userd_va = 0;      // GPU VA of the channel's USERD (512 bytes), when userd_vram is not set
    // Where RM placed USERD physically: the VRAM offset of hUserdMemory[0] + userdOffset[0] (kernel_channel_gv100.c
    // kchannelGetUserdInfo: memdescGetPhysAddr of that memory). The PBDMA reads GPPut there, not through the MMU.
    std::optional<uint64_t> userd_vram;
    uint64_t page_directory_base = 0;  // VRAM offset of the root page directory
    MmuFormat mmu_format{};
    std::string name;           // for messages, e.g. "channel 3 (runlist 0)"
    uint32_t host_class = 0;    // the channel's GPFIFO class (0: AMPERE_CHANNEL_GPFIFO_A's rules)
};

// What stopped a channel: the RM model reports it (e.g. as a ROBUST_CHANNEL error notifier).
struct EngineFault {
    enum class Kind { mmu, bad_method, bad_class, bad_launch, bad_gp_entry } kind = Kind::bad_method;
    uint32_t token = 0;          // the channel's doorbell token
    uint64_t address = 0;        // the faulting VA (mmu), the GP entry VA, or the QMD VA
    uint32_t subchannel = 0;
    uint32_t method = 0;         // method byte offset (bad_method / bad_class / bad_launch)
    uint32_t data = 0;           // the method's data
    std::string what;            // the whole story, naming the channel
};

enum class ChannelStatus { idle, running, acquire_pending, faulted };
const char* channel_status_name(ChannelStatus s);

// The classes this model binds with SET_OBJECT (NVC56F_SET_OBJECT_NVCLASS 15:0).
inline constexpr uint32_t kAmpereDmaCopyA = 0xc6b5;  // clc6b5.h
inline constexpr uint32_t kAmpereDmaCopyB = 0xc7b5;  // clc7b5.h
inline constexpr uint32_t kAmpereComputeA = 0xc6c0;  // clc6c0.h
inline constexpr uint32_t kAmpereComputeB = 0xc7c0;  // clc7c0.h
inline constexpr uint32_t kAdaComputeA = 0xc9c0;     // clc9c0.h
inline constexpr uint32_t kHopperChannelGpfifoA = 0xc86f;  // clc86f.h
inline constexpr uint32_t kHopperDmaCopyA = 0xc8b5;   // clc8b5.h: the same methods as clc7b5.h for 1-D copies
inline constexpr uint32_t kHopperComputeA = 0xcbc0;   // clcbc0.h: QMD V04_00

}  // namespace baregpu::sim::nvgpu
