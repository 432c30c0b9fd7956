// One RM API over two transports. `RmTransport` is what a transport implements: nvidia.ko's
// escape ioctls (nvrm_transport.hpp) or RPCs to a GSP-RM we booted ourselves (nvpci). `Rm` is
// what the rest of drivers/nv calls: typed alloc / control / free that throw RmError naming the
// class or control, the object and the NV_STATUS. Everything above it — devices, VA spaces,
// channel groups, channels, engines (rm_device.hpp) — is shared by both transports.
#pragma once

#include "base/error.hpp"
#include "drivers/nv/nv_status.hpp"
#include "drivers/nv/rm_abi.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace baregpu::nv {

class RmTransport {
public:
    virtual ~RmTransport() = default;
    // "nvrm", "nvpci": for messages.
    virtual std::string_view kind() const = 0;
    // The device every error names ("nvrm:/dev/nvidia0", "nvpci:0000:01:00.0").
    virtual const std::string& device() const = 0;

    // Allocate `cls` under `parent` in `client` (client 0 and parent 0 allocate a new client).
    // `*object` in: the handle the caller chose, or 0 to let RM choose; out: the handle.
    // Returns the NV_STATUS; transport failures (an ioctl refused, an RPC timeout) throw.
    virtual uint32_t alloc(NvHandle client, NvHandle parent, NvHandle* object, uint32_t cls,
                           std::span<std::byte> params) = 0;
    virtual uint32_t control(NvHandle client, NvHandle object, uint32_t cmd, std::span<std::byte> params) = 0;
    virtual uint32_t free(NvHandle client, NvHandle parent, NvHandle object) = 0;
};

// An RM call returned a status other than NV_OK.
class RmError : public Error {
public:
    RmError(std::string device, const std::string& message, uint32_t status)
        : Error(std::move(device), message), status_(status) {}
    uint32_t status() const noexcept { return status_; }

private:
    uint32_t status_;
};

class Rm {
public:
    explicit Rm(RmTransport& transport) : transport_(transport) {}

    RmTransport& transport() { return transport_; }
    const std::string& device() const { return transport_.device(); }

    // A new client (NV01_ROOT_CLIENT); its handle is the `client` of every later call.
    NvHandle alloc_client();
    NvHandle alloc(NvHandle client, NvHandle parent, uint32_t cls, std::span<std::byte> params);
    template <class Params>
    NvHandle alloc(NvHandle client, NvHandle parent, uint32_t cls, Params& params) {
        return alloc(client, parent, cls, std::as_writable_bytes(std::span(&params, 1)));
    }
    // With a size other than sizeof(Params) (layouts that differ per driver branch).
    template <class Params>
    NvHandle alloc(NvHandle client, NvHandle parent, uint32_t cls, Params& params, size_t size) {
        return alloc(client, parent, cls, std::as_writable_bytes(std::span(&params, 1)).first(size));
    }
    NvHandle alloc_empty(NvHandle client, NvHandle parent, uint32_t cls) { return alloc(client, parent, cls, {}); }

    void control(NvHandle client, NvHandle object, uint32_t cmd, std::span<std::byte> params);
    template <class Params>
    void control(NvHandle client, NvHandle object, uint32_t cmd, Params& params) {
        control(client, object, cmd, std::as_writable_bytes(std::span(&params, 1)));
    }
    // The first `size` bytes of `params`: a layout that grew between driver branches.
    template <class Params>
    void control(NvHandle client, NvHandle object, uint32_t cmd, Params& params, size_t size) {
        control(client, object, cmd, std::as_writable_bytes(std::span(&params, 1)).first(size));
    }

    void free(NvHandle client, NvHandle parent, NvHandle object);

private:
    RmTransport& transport_;
};

}  // namespace baregpu::nv
