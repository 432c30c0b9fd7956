// GpuEngines::Channel: the engine thread's per-channel state (internal to gpu_engines, pbdma,
// copy_engine and compute_engine).
#pragma once

#include "gpu_engines.hpp"

namespace baregpu::sim::nvgpu {

inline constexpr uint32_t kMethodSpace = 0x4000;  // method byte offsets kept per subchannel

struct GpuEngines::Channel {
    uint32_t token = 0;
    ChannelState state;
    ChannelStatus status = ChannelStatus::idle;
    bool pending = false;  // doorbell rung since the last run
    uint32_t gp_get = 0;
    // The GP entry being executed: its pushbuffer segment and the next dword.
    bool in_segment = false;
    uint64_t segment_va = 0;
    std::vector<uint32_t> segment;
    size_t segment_pos = 0;
    // The method header being executed (clc56f.h NVC56F_DMA_SEC_OP): may continue into the next segment.
    uint32_t sec_op = 0, header_subchannel = 0, header_method = 0, remaining = 0;
    bool first_done = false;
    std::array<uint32_t, 8> classes{};  // SET_OBJECT per subchannel; 0 = none
    std::array<std::vector<uint32_t>, 8> methods;  // last data per method, per subchannel
    // Host semaphore (SEM_ADDR_LO/HI, SEM_PAYLOAD_LO/HI).
    uint64_t sem_va = 0;
    uint64_t sem_payload = 0;
    std::optional<EngineFault> fault;
    uint64_t nonstall = 0, kernels = 0, acquire_polls = 0;

    uint32_t mthd(unsigned subch, uint32_t offset) const {
        const auto& m = methods[subch];
        return offset / 4 < m.size() ? m[offset / 4] : 0;
    }
};

}  // namespace baregpu::sim::nvgpu
