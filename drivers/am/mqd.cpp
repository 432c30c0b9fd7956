// Compute MQD builder: see mqd.hpp for the layout's source.
#include "drivers/am/mqd.hpp"

#include "base/error.hpp"
#include "drivers/am/dwords.hpp"

#include <bit>
#include <fmt/format.h>

namespace baregpu::am::mqd {

namespace {
void check_aligned(uint64_t address, const char* what) {
    if (address % 256 != 0)
        throw Error("", fmt::format("compute MQD: {} {:#x} is not 256-byte aligned (the register takes address >> 8)",
                                    what, address));
}
// log2(bytes / 4) - 1: CP_HQD_PQ_CONTROL.QUEUE_SIZE and CP_HQD_EOP_CONTROL.EOP_SIZE (Linux
// gfx_v11_0_compute_mqd_init: order_base_2(ring_size / 4) - 1).
uint32_t size_field(uint64_t bytes, uint64_t min_bytes, const char* what) {
    if (bytes < min_bytes || !std::has_single_bit(bytes))
        throw Error("", fmt::format("compute MQD: {} of {} bytes must be a power of two of at least {}", what, bytes,
                                    min_bytes));
    return static_cast<uint32_t>(std::countr_zero(bytes / 4)) - 1;
}
}  // namespace

ComputeMqd build_compute_mqd(const ComputeQueueConfig& c) {
    check_aligned(c.mqd_mc_address, "MQD address");
    check_aligned(c.ring_va, "ring");
    check_aligned(c.eop_va, "EOP buffer");
    if (c.rptr_va % 8 != 0 || c.wptr_va % 8 != 0)
        throw Error("", fmt::format("compute MQD: rptr {:#x} / wptr {:#x} must be 8-byte aligned", c.rptr_va, c.wptr_va));
    uint32_t queue_size = size_field(c.ring_bytes, 256, "ring");
    uint32_t eop_size = size_field(c.eop_bytes, 256, "EOP buffer");
    uint32_t doorbell_offset = c.doorbell_slot * 2;  // dwords (Linux gfx_v11_0_compute_mqd_init: DOORBELL_OFFSET = doorbell_index)
    if ((doorbell_offset << kDoorbellOffsetShift) > kDoorbellOffsetMask)
        throw Error("", fmt::format("compute MQD: doorbell slot {} does not fit DOORBELL_OFFSET", c.doorbell_slot));

    ComputeMqd m{};
    m[dw::header] = kMqdHeader;
    for (uint32_t se : {dw::compute_static_thread_mgmt_se0, dw::compute_static_thread_mgmt_se1,
                        dw::compute_static_thread_mgmt_se2, dw::compute_static_thread_mgmt_se3,
                        dw::compute_static_thread_mgmt_se4, dw::compute_static_thread_mgmt_se5,
                        dw::compute_static_thread_mgmt_se6, dw::compute_static_thread_mgmt_se7})
        m[se] = 0xffffffffu;
    m[dw::cp_mqd_base_addr_lo] = lo(c.mqd_mc_address);
    m[dw::cp_mqd_base_addr_hi] = hi(c.mqd_mc_address);
    m[dw::cp_hqd_vmid] = 0;
    m[dw::cp_hqd_persistent_state] = kPersistentPreloadReq | 0x55u << kPersistentPreloadSizeShift;
    m[dw::cp_hqd_pipe_priority] = 2;
    m[dw::cp_hqd_queue_priority] = 0xf;
    m[dw::cp_hqd_quantum] = 0x111;
    m[dw::cp_hqd_pq_base_lo] = lo(c.ring_va >> 8);
    m[dw::cp_hqd_pq_base_hi] = hi(c.ring_va >> 8);
    m[dw::cp_hqd_pq_rptr_report_addr_lo] = lo(c.rptr_va);
    m[dw::cp_hqd_pq_rptr_report_addr_hi] = hi(c.rptr_va);
    m[dw::cp_hqd_pq_wptr_poll_addr_lo] = lo(c.wptr_va);
    m[dw::cp_hqd_pq_wptr_poll_addr_hi] = hi(c.wptr_va);
    m[dw::cp_hqd_pq_doorbell_control] = doorbell_offset << kDoorbellOffsetShift | kDoorbellEn;
    // gfx_v11_0_compute_mqd_init (gfx_v12_0 the same): QUEUE_SIZE, RPTR_BLOCK_SIZE, UNORD_DISPATCH 1 ("to avoid
    // a potential deadlock in GC 10.x and newer"), PRIV_STATE 1 and KMD_QUEUE 1 for a kernel-owned queue
    // (CP_HQD_PQ_CONTROL bits 28, 30, 31 in gc_11_0_0_sh_mask.h / gc_12_0_0_sh_mask.h). tinygrad leaves
    // UNORD_DISPATCH 0.
    m[dw::cp_hqd_pq_control] = queue_size << kPqControlQueueSizeShift | 5u << kPqControlRptrBlockSizeShift |
                               kPqControlUnordDispatch | kPqControlPrivState | kPqControlKmdQueue;
    m[dw::cp_hqd_ib_control] = 3u << kIbControlMinIbAvailSizeShift;
    m[dw::cp_hqd_hq_status0] = 0x20004000;
    m[dw::cp_mqd_control] = kMqdControlPrivState;
    m[dw::cp_hqd_eop_base_addr_lo] = lo(c.eop_va >> 8);
    m[dw::cp_hqd_eop_base_addr_hi] = hi(c.eop_va >> 8);
    m[dw::cp_hqd_eop_control] = eop_size << kEopSizeShift;
    m[dw::cp_hqd_aql_control] = 0;  // PM4 queue
    return m;
}

}  // namespace baregpu::am::mqd
