// The compute MQD (memory queue descriptor) for a directly programmed HQD, Linux
// gfx_v11_0_compute_mqd_init / tinygrad ip.py AM_GFX.setup_ring.
// Layout: Linux drivers/gpu/drm/amd/include/v11_structs.h `struct v11_compute_mqd` and v12_structs.h
// `struct v12_compute_mqd`: 512 dwords (2048 bytes); the dword offsets below are the ones the header's
// comments give, and are the same in both (v12 only renames dword 178, cp_hqd_gds_resource_state, to a
// reserved slot). Dwords 0x80..0xB7 mirror the registers CP_MQD_BASE_ADDR (gc_11_0_0_offset.h 0x1fa9) ..
// CP_HQD_PQ_WPTR_HI (0x1fe0), which compute_queue.cpp writes one by one; gc_12_0_0_offset.h has the same
// contiguous block at the same offsets in the same order (every register the builder fills sits at
// 0x1fa9 + dword - 0x80 there too; v12_structs.h dwords 128..183 name them in that order, dword 178
// reserved where the register file has CP_HQD_GDS_RESOURCE_STATE), so one layout serves both.
#pragma once

#include "drivers/am/pm4.hpp"

#include <array>
#include <cstdint>
#include <span>

namespace baregpu::am::mqd {

inline constexpr std::size_t kDwords = 512;  // sizeof(struct v11_compute_mqd) / 4 == sizeof(struct v12_compute_mqd) / 4
using ComputeMqd = std::array<uint32_t, kDwords>;
static_assert(sizeof(ComputeMqd) == 2048);

// Dword offsets (v11_structs.h / v12_structs.h comments "offset: N").
namespace dw {
inline constexpr uint32_t header = 0;
inline constexpr uint32_t compute_static_thread_mgmt_se0 = 23, compute_static_thread_mgmt_se1 = 24,
                          compute_static_thread_mgmt_se2 = 26, compute_static_thread_mgmt_se3 = 27,
                          compute_static_thread_mgmt_se4 = 44, compute_static_thread_mgmt_se5 = 45,
                          compute_static_thread_mgmt_se6 = 46, compute_static_thread_mgmt_se7 = 47;
inline constexpr uint32_t cp_mqd_base_addr_lo = 128, cp_mqd_base_addr_hi = 129, cp_hqd_active = 130, cp_hqd_vmid = 131,
                          cp_hqd_persistent_state = 132, cp_hqd_pipe_priority = 133, cp_hqd_queue_priority = 134,
                          cp_hqd_quantum = 135, cp_hqd_pq_base_lo = 136, cp_hqd_pq_base_hi = 137, cp_hqd_pq_rptr = 138,
                          cp_hqd_pq_rptr_report_addr_lo = 139, cp_hqd_pq_rptr_report_addr_hi = 140,
                          cp_hqd_pq_wptr_poll_addr_lo = 141, cp_hqd_pq_wptr_poll_addr_hi = 142,
                          cp_hqd_pq_doorbell_control = 143, cp_hqd_pq_control = 145, cp_hqd_ib_control = 149,
                          cp_hqd_dequeue_request = 152, cp_hqd_hq_status0 = 160, cp_mqd_control = 162,
                          cp_hqd_eop_base_addr_lo = 165, cp_hqd_eop_base_addr_hi = 166, cp_hqd_eop_control = 167,
                          cp_hqd_aql_control = 181, cp_hqd_pq_wptr_lo = 182, cp_hqd_pq_wptr_hi = 183;
}  // namespace dw

// The register block the HQD is programmed from: MQD dwords [0x80, 0xB7] -> registers [0x1fa9, 0x1fe0].
inline constexpr uint32_t kRegBlockFirstDword = dw::cp_mqd_base_addr_lo, kRegBlockLastDword = dw::cp_hqd_pq_wptr_hi;
inline constexpr uint32_t kCpMqdBaseAddr = 0x1fa9, kCpHqdPqWptrHi = 0x1fe0;  // gc_11/gc_12_0_0_offset.h, BASE_IDX 0
static_assert(kRegBlockLastDword - kRegBlockFirstDword == kCpHqdPqWptrHi - kCpMqdBaseAddr);

// Register fields (gc_11_0_0_sh_mask.h; gc_12_0_0_sh_mask.h the same).
inline constexpr uint32_t kPqControlQueueSizeShift = 0, kPqControlRptrBlockSizeShift = 8;       // CP_HQD_PQ_CONTROL
inline constexpr uint32_t kPqControlUnordDispatch = 1u << 28, kPqControlPrivState = 1u << 30, kPqControlKmdQueue = 1u << 31;
inline constexpr uint32_t kDoorbellOffsetShift = 2, kDoorbellOffsetMask = 0x0FFFFFFC, kDoorbellEn = 1u << 30;
inline constexpr uint32_t kEopSizeShift = 0;                                                    // CP_HQD_EOP_CONTROL
inline constexpr uint32_t kPersistentPreloadReq = 1u << 0, kPersistentPreloadSizeShift = 8;     // CP_HQD_PERSISTENT_STATE
inline constexpr uint32_t kIbControlMinIbAvailSizeShift = 20;  // CP_HQD_IB_CONTROL, mask 0x00300000
inline constexpr uint32_t kMqdControlPrivState = 1u << 8;                                       // CP_MQD_CONTROL
inline constexpr uint32_t kMqdHeader = 0xC0310800;  // Linux v11_structs.h / gfx_v11_0_compute_mqd_init

// amdgpu_doorbell.h AMDGPU_NAVI10_DOORBELL_MEC_RING0.
inline constexpr uint32_t kDoorbellMecRing0 = 0x003;

struct ComputeQueueConfig {
    pm4::GcGen gen = pm4::GcGen::gc11;
    uint64_t mqd_mc_address = 0;  // MC address of this MQD in VRAM (256-byte aligned)
    uint64_t ring_va = 0;         // 256-byte aligned
    uint64_t ring_bytes = 0;      // power of two, >= 256 bytes
    uint64_t rptr_va = 0, wptr_va = 0;
    uint64_t eop_va = 0;          // 256-byte aligned; an EOP buffer is mandatory
    uint64_t eop_bytes = 0x1000;  // power of two
    uint32_t doorbell_slot = kDoorbellMecRing0;  // 64-bit doorbell index in BAR2
};

// Fills a compute MQD as tinygrad AM_GFX.setup_ring and Linux gfx_v11_0_compute_mqd_init do.
// Throws on a misaligned base or a size that is not a power of two.
ComputeMqd build_compute_mqd(const ComputeQueueConfig& c);

// The dwords written to CP_MQD_BASE_ADDR .. CP_HQD_PQ_WPTR_HI, in register order.
inline std::span<const uint32_t> register_block(const ComputeMqd& m) {
    return std::span<const uint32_t>(m).subspan(kRegBlockFirstDword, kRegBlockLastDword - kRegBlockFirstDword + 1);
}

}  // namespace baregpu::am::mqd
