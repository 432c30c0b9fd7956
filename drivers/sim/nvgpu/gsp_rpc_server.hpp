// The seam between the simulated GSP's message queues and whatever answers RPCs after boot (the RM
// object model, written separately, plugs in here). The GSP model owns the transport — element
// headers, checksums, sequence numbers, the reply's rpc header — and hands the server only the
// function number and its parameters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace baregpu::sim::nvgpu {

// NV_VGPU_MSG_RESULT_* / NV_STATUS values the GSP model itself answers with (nvstatuscodes.h).
inline constexpr uint32_t kNvOk = 0x00000000;                 // NV_OK
inline constexpr uint32_t kNvErrNotSupported = 0x00000056;    // NV_ERR_NOT_SUPPORTED

class GspRpcServer {
public:
    virtual ~GspRpcServer() = default;
    // One RPC from the command queue. function: NV_VGPU_MSG_FUNCTION_* (rpc_global_enums.h);
    // params: the payload after rpc_message_header_v (the rpc_*_v struct and what follows it).
    // Fill `reply` with the payload the reply carries (usually the same struct with its status
    // and output fields set; empty is allowed) and return the reply header's rpc_result.
    // Called on the thread that rang the doorbell, with the model's lock held: do not call back
    // into the model.
    virtual uint32_t handle(uint32_t function, std::span<const std::byte> params, std::vector<std::byte>& reply) = 0;
};

}  // namespace baregpu::sim::nvgpu
