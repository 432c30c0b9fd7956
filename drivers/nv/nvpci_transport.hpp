// The `nvpci` RM transport: RM calls as RPCs to the GSP-RM we booted (gsp_boot.hpp) —
// GSP_RM_ALLOC (103), GSP_RM_CONTROL (76) and FREE (10) with the rpc_gsp_rm_alloc_v03_00 /
// rpc_gsp_rm_control_v03_00 / rpc_free_v03_00 payloads (open-gpu-kernel-modules 570.144
// src/nvidia/generated/g_rpc-structures.h, rpc_global_enums.h). Over GSP the client chooses
// every handle (there is no kernel to pick them): clients from 0xc1000000, objects from 0xcf000000.
#pragma once

#include "drivers/nv/gsp_rpc.hpp"
#include "drivers/nv/rm_api.hpp"

#include <chrono>
#include <string>

namespace baregpu::nv {

class NvpciTransport final : public RmTransport {
public:
    // `rpc` must outlive the transport (GspDevice::rpc()). `device`: the name errors carry.
    NvpciTransport(GspRpc& rpc, std::string device, std::chrono::nanoseconds timeout = std::chrono::seconds(10))
        : rpc_(rpc), name_(std::move(device)), timeout_(timeout) {}

    std::string_view kind() const override { return "nvpci"; }
    const std::string& device() const override { return name_; }
    uint32_t alloc(NvHandle client, NvHandle parent, NvHandle* object, uint32_t cls, std::span<std::byte> params) override;
    uint32_t control(NvHandle client, NvHandle object, uint32_t cmd, std::span<std::byte> params) override;
    uint32_t free(NvHandle client, NvHandle parent, NvHandle object) override;
    // NV_VGPU_MSG_FUNCTION_SET_PAGE_DIRECTORY (54): the root page directory (VRAM offset `root`, `entries` entries)
    // of the externally owned VA space `vaspace` under `device` — what GSP-RM runs that VA space's channels on, and
    // what a context share in it needs first. Returns RM's status.
    uint32_t set_page_directory(NvHandle client, NvHandle device, NvHandle vaspace, uint64_t root, uint32_t entries);

private:
    GspRpc& rpc_;
    std::string name_;
    std::chrono::nanoseconds timeout_;
    NvHandle next_client_ = 0xc1000000;
    NvHandle next_object_ = 0xcf000000;
};

}  // namespace baregpu::nv
