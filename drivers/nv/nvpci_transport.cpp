#include "drivers/nv/nvpci_transport.hpp"

#include "drivers/nv/gsp_rpc_functions.hpp"

#include <cstring>
#include <fmt/format.h>
#include <vector>

namespace baregpu::nv {

namespace {

constexpr uint32_t kFnFree = 10;  // NV_VGPU_MSG_FUNCTION_FREE (rpc_global_enums.h)

// rpc_gsp_rm_alloc_v03_00: hClient, hParent, hObject, hClass, status, paramsSize, flags,
// reserved[4], params[].
constexpr size_t kAllocHeader = 32;
// rpc_gsp_rm_control_v03_00: hClient, hObject, cmd, status, paramsSize, flags, params[].
constexpr size_t kControlHeader = 24;

void put(std::vector<std::byte>& b, size_t offset, uint32_t v) { std::memcpy(b.data() + offset, &v, 4); }
uint32_t get(const std::vector<std::byte>& b, size_t offset) {
    uint32_t v;
    std::memcpy(&v, b.data() + offset, 4);
    return v;
}

}  // namespace

uint32_t NvpciTransport::alloc(NvHandle client, NvHandle parent, NvHandle* object, uint32_t cls,
                               std::span<std::byte> params) {
    NvHandle handle = *object;
    if (handle == 0) handle = cls == NV01_ROOT_CLIENT ? next_client_++ : next_object_++;
    // A new client is its own client and parent over GSP.
    NvHandle rpc_client = cls == NV01_ROOT_CLIENT ? handle : client;
    NvHandle rpc_parent = cls == NV01_ROOT_CLIENT ? handle : parent;
    std::vector<std::byte> payload(kAllocHeader + params.size());
    put(payload, 0, rpc_client);
    put(payload, 4, rpc_parent);
    put(payload, 8, handle);
    put(payload, 12, cls);
    put(payload, 20, static_cast<uint32_t>(params.size()));
    if (!params.empty()) std::memcpy(payload.data() + kAllocHeader, params.data(), params.size());
    RpcReply reply = rpc_.call(gsp::kFnGspRmAlloc, payload, timeout_);
    if (reply.payload.size() < kAllocHeader + params.size()) {
        throw ProtocolError(name_, fmt::format("GSP_RM_ALLOC ({}) reply of {} bytes, expected {}", class_name(cls),
                                               reply.payload.size(), kAllocHeader + params.size()));
    }
    uint32_t status = get(reply.payload, 16);
    if (status == NV_OK) status = reply.rpc_result;
    if (status == NV_OK) {
        if (!params.empty()) std::memcpy(params.data(), reply.payload.data() + kAllocHeader, params.size());
        *object = handle;
    }
    return status;
}

uint32_t NvpciTransport::control(NvHandle client, NvHandle object, uint32_t cmd, std::span<std::byte> params) {
    std::vector<std::byte> payload(kControlHeader + params.size());
    put(payload, 0, client);
    put(payload, 4, object);
    put(payload, 8, cmd);
    put(payload, 16, static_cast<uint32_t>(params.size()));
    if (!params.empty()) std::memcpy(payload.data() + kControlHeader, params.data(), params.size());
    RpcReply reply = rpc_.call(gsp::kFnGspRmControl, payload, timeout_);
    if (reply.payload.size() < kControlHeader + params.size()) {
        throw ProtocolError(name_, fmt::format("GSP_RM_CONTROL ({}) reply of {} bytes, expected {}", control_name(cmd),
                                               reply.payload.size(), kControlHeader + params.size()));
    }
    uint32_t status = get(reply.payload, 12);
    if (status == NV_OK) status = reply.rpc_result;
    if (status == NV_OK && !params.empty()) std::memcpy(params.data(), reply.payload.data() + kControlHeader, params.size());
    return status;
}

uint32_t NvpciTransport::set_page_directory(NvHandle client, NvHandle device, NvHandle vaspace, uint64_t root, uint32_t entries) {
    // rpc_set_page_directory_v1E_05 (g_rpc-structures.h 570.144): hClient, hDevice, pasid, then at +16
    // NV0080_CTRL_DMA_SET_PAGE_DIRECTORY_PARAMS {physAddress, numEntries, flags, hVASpace, chId, subDeviceId, pasid};
    // 48 bytes. flags 0x8 (all channels, the root in video memory), subDeviceId 1 (subdevice 0 + 1), no PASID, as
    // tinygrad's nv/ip.py rpc_set_page_directory sends them.
    std::vector<std::byte> payload(48);
    put(payload, 0, client);
    put(payload, 4, device);
    put(payload, 8, 0xffffffffu);
    std::memcpy(payload.data() + 16, &root, 8);
    put(payload, 24, entries);
    put(payload, 28, 0x8u);
    put(payload, 32, vaspace);
    put(payload, 36, 0u);
    put(payload, 40, 1u);
    put(payload, 44, 0xffffffffu);
    return rpc_.call(gsp::kFnSetPageDirectory, payload, timeout_).rpc_result;
}

uint32_t NvpciTransport::free(NvHandle client, NvHandle parent, NvHandle object) {
    // rpc_free_v03_00: NVOS00_PARAMETERS_v03_00 {hRoot, hObjectParent, hObjectOld, status}.
    std::vector<std::byte> payload(16);
    put(payload, 0, client);
    put(payload, 4, parent);
    put(payload, 8, object);
    RpcReply reply = rpc_.call(kFnFree, payload, timeout_);
    uint32_t status = reply.payload.size() >= 16 ? get(reply.payload, 12) : NV_OK;
    return status != NV_OK ? status : reply.rpc_result;
}

}  // namespace baregpu::nv
