#include "rm_gsp_server.hpp"

#include "rm_layouts.hpp"

namespace baregpu::sim::nvgpu {

namespace {
constexpr uint32_t kFnFree = 10, kFnSetPageDirectory = 54, kFnGspRmControl = 76, kFnGspRmAlloc = 103;  // rpc_global_enums.h
constexpr size_t kAllocHeader = 32, kControlHeader = 24;
}  // namespace

uint32_t RmGspServer::handle(uint32_t function, std::span<const std::byte> params, std::vector<std::byte>& reply) {
    reply.assign(params.begin(), params.end());
    std::span<std::byte> out(reply);
    switch (function) {
        case kFnGspRmAlloc: {
            if (params.size() < kAllocHeader) return rm::kErrInvalidArgument;
            uint32_t size = rm::load<uint32_t>(params, 20);
            if (kAllocHeader + size != params.size()) return rm::kErrInvalidArgument;
            uint32_t client = rm::load<uint32_t>(params, 0), parent = rm::load<uint32_t>(params, 4);
            uint32_t object = rm::load<uint32_t>(params, 8), cls = rm::load<uint32_t>(params, 12);
            if (cls == rm::kRootClient) client = parent = 0;  // over GSP a client names itself
            if (object == 0) return rm::kErrInvalidObjectNew;     // the client chooses handles over GSP
            uint32_t status = rm_->alloc(client, parent, &object, cls, out.subspan(kAllocHeader, size));
            rm::store<uint32_t>(out, 16, status);
            return status;
        }
        case kFnGspRmControl: {
            if (params.size() < kControlHeader) return rm::kErrInvalidArgument;
            uint32_t size = rm::load<uint32_t>(params, 16);
            if (kControlHeader + size != params.size()) return rm::kErrInvalidArgument;
            uint32_t status = rm_->control(rm::load<uint32_t>(params, 0), rm::load<uint32_t>(params, 4),
                                           rm::load<uint32_t>(params, 8), out.subspan(kControlHeader, size));
            rm::store<uint32_t>(out, 12, status);
            return status;
        }
        case kFnFree: {
            if (params.size() < 16) return rm::kErrInvalidArgument;
            uint32_t status =
                rm_->free(rm::load<uint32_t>(params, 0), rm::load<uint32_t>(params, 4), rm::load<uint32_t>(params, 8));
            rm::store<uint32_t>(out, 12, status);
            return status;
        }
        case kFnSetPageDirectory: {
            // rpc_set_page_directory_v1E_05: hClient 0, hDevice 4, pasid 8, params at 16 {physAddress 16, numEntries 24,
            // flags 28, hVASpace 32, chId 36, subDeviceId 40, pasid 44}; 48 bytes (g_rpc-structures.h 570.144).
            if (params.size() != 48) return rm::kErrInvalidArgument;
            return rm_->set_page_directory(rm::load<uint32_t>(params, 0), rm::load<uint32_t>(params, 4), rm::load<uint32_t>(params, 32),
                                           rm::load<uint64_t>(params, 16), rm::load<uint32_t>(params, 24));
        }
        default: reply.clear(); return rm::kErrNotSupported;
    }
}

}  // namespace baregpu::sim::nvgpu
