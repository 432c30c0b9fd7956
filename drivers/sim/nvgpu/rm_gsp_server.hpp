// GSP-RM's RM: the GspRpcServer that answers GSP_RM_ALLOC (103), GSP_RM_CONTROL (76) and
// FREE (10) from the same RmModel the nvrm fake uses, so both transports meet one object model
// (payload layouts: open-gpu-kernel-modules 570.144 g_rpc-structures.h). Other RPCs:
// NV_ERR_NOT_SUPPORTED.
#pragma once

#include "gsp_rpc_server.hpp"
#include "rm_model.hpp"

#include <memory>

namespace baregpu::sim::nvgpu {

class RmGspServer final : public GspRpcServer {
public:
    explicit RmGspServer(std::shared_ptr<RmModel> rm) : rm_(std::move(rm)) {}
    uint32_t handle(uint32_t function, std::span<const std::byte> params, std::vector<std::byte>& reply) override;
    RmModel& rm() { return *rm_; }

private:
    std::shared_ptr<RmModel> rm_;
};

}  // namespace baregpu::sim::nvgpu
