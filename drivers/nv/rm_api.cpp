#include "drivers/nv/rm_api.hpp"

#include <fmt/format.h>

namespace baregpu::nv {

NvHandle Rm::alloc_client() {
    NvHandle handle = 0;
    uint32_t status = transport_.alloc(0, 0, &handle, NV01_ROOT_CLIENT, {});
    if (status != NV_OK) {
        throw RmError(device(), fmt::format("rm_alloc of a client ({}) over {} failed: {}", class_name(NV01_ROOT_CLIENT),
                                            transport_.kind(), describe_status(status)),
                      status);
    }
    return handle;
}

NvHandle Rm::alloc(NvHandle client, NvHandle parent, uint32_t cls, std::span<std::byte> params) {
    NvHandle handle = 0;
    uint32_t status = transport_.alloc(client, parent, &handle, cls, params);
    if (status != NV_OK) {
        throw RmError(device(),
                      fmt::format("rm_alloc of {} under object 0x{:x} (client 0x{:x}, {} bytes of parameters) over {} "
                                  "failed: {}",
                                  class_name(cls), parent, client, params.size(), transport_.kind(), describe_status(status)),
                      status);
    }
    return handle;
}

void Rm::control(NvHandle client, NvHandle object, uint32_t cmd, std::span<std::byte> params) {
    uint32_t status = transport_.control(client, object, cmd, params);
    if (status != NV_OK) {
        throw RmError(device(),
                      fmt::format("rm_control {} on object 0x{:x} (client 0x{:x}, {} bytes of parameters) over {} failed: {}",
                                  control_name(cmd), object, client, params.size(), transport_.kind(),
                                  describe_status(status)),
                      status);
    }
}

void Rm::free(NvHandle client, NvHandle parent, NvHandle object) {
    uint32_t status = transport_.free(client, parent, object);
    if (status != NV_OK) {
        throw RmError(device(),
                      fmt::format("rm_free of object 0x{:x} (parent 0x{:x}, client 0x{:x}) over {} failed: {}", object,
                                  parent, client, transport_.kind(), describe_status(status)),
                      status);
    }
}

}  // namespace baregpu::nv
