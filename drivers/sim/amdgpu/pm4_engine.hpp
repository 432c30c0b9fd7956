// The compute command processor (MEC, me 1) of a GC 11 or GC 12 chip: hardware queue descriptors (HQDs)
// activated from registers the way Linux gfx_v11_0_kiq/compute queue init and tinygrad's AM
// driver program them directly (tinygrad ip.py AM_GFX.setup_ring), doorbell kicks on BAR2
// (tinygrad ops_amd.py AMDQueueDesc.signal_doorbell), and a PM4 type-3 interpreter (Linux nvd.h
// opcodes) over the ring, every fetch and every write through the VMID 0 walker
// (gmc.hpp) — a page fault posts its IH entry and hangs the queue.
//
// Registers (gc_11_0_0_offset.h, BASE_IDX 0 unless said): CP_HQD_ACTIVE 0x1fab, CP_HQD_VMID 0x1fac,
// CP_HQD_PQ_BASE/_HI 0x1fb1/0x1fb2 (address >> 8), CP_HQD_PQ_RPTR_REPORT_ADDR/_HI 0x1fb4/0x1fb5,
// CP_HQD_PQ_WPTR_POLL_ADDR/_HI 0x1fb6/0x1fb7, CP_HQD_PQ_DOORBELL_CONTROL 0x1fb8, CP_HQD_PQ_CONTROL
// 0x1fba, CP_HQD_DEQUEUE_REQUEST 0x1fc1, CP_HQD_EOP_BASE_ADDR/_HI 0x1fce/0x1fcf (>> 8),
// CP_HQD_EOP_CONTROL 0x1fd0; GRBM_GFX_CNTL 0x0900 and CP_MEC_RS64_CNTL 0x2904, BASE_IDX 1.
// (CP_HQD_*, GRBM_GFX_CNTL, COMPUTE_* read in torvalds/linux gc_11_0_0_offset.h at 0e8655b4;
// CP_MEC_RS64_CNTL's offset and its PIPEn_ACTIVE bits 26-29 / MEC_HALT bit 30 as gc_11_0_0_sh_mask.h has
// them from the same header. gc_12_0_0_offset.h / gc_12_0_0_sh_mask.h (torvalds/linux,
// read for the queues) have each of these registers at the same BASE_IDX and offset and the same
// fields: GRBM_GFX_CNTL PIPEID/MEID/QUEUEID, CP_MEC_RS64_CNTL MEC_PIPE0_RESET 16 / _ACTIVE 26 /
// MEC_HALT 30, CP_HQD_PQ_CONTROL.QUEUE_SIZE 5:0, CP_HQD_PQ_DOORBELL_CONTROL OFFSET 27:2 / EN 30.)
// The HQD registers are plain storage that the activation snapshots for the queue GRBM_GFX_CNTL
// selects (reads are not banked per queue).
//
// Strict: every malformed packet is a port violation and the queue stops for good (hung) until it
// is dequeued and activated again.
#pragma once

#include "drivers/sim/amdgpu/chip.hpp"
#include "drivers/sim/amdgpu/gmc.hpp"
#include "drivers/sim/amdgpu/ih.hpp"

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::sim::amdgpu {

// What DISPATCH_DIRECT hands to the dispatch hook: the state SET_SH_REG built up
// (COMPUTE_PGM_LO/HI, COMPUTE_NUM_THREAD_X/Y/Z, COMPUTE_USER_DATA_0..15) and the packet's grid.
struct Dispatch {
    uint32_t pipe = 0, queue = 0;
    uint64_t program = 0;                  // (COMPUTE_PGM_HI << 32 | COMPUTE_PGM_LO) << 8
    std::array<uint32_t, 3> grid{};        // workgroups (DISPATCH_DIRECT DIM_X/Y/Z)
    std::array<uint32_t, 3> block{};       // COMPUTE_NUM_THREAD_X/Y/Z.NUM_THREAD_FULL
    std::array<uint32_t, 16> user_sgprs{};  // COMPUTE_USER_DATA_0..15
    uint32_t initiator = 0;                // COMPUTE_DISPATCH_INITIATOR
    uint32_t pgm_rsrc1 = 0, pgm_rsrc2 = 0, pgm_rsrc3 = 0;
    // The kernarg pointer, read from the user SGPRs at `index` (a pair): the caller knows where
    // its kernel descriptor puts it.
    uint64_t sgpr_pair(unsigned index) const {
        return index + 1 < user_sgprs.size() ? (uint64_t{user_sgprs[index + 1]} << 32) | user_sgprs[index] : 0;
    }
};
using DispatchHook = std::function<void(const Dispatch&)>;

namespace pm4 {
// nvd.h
inline constexpr uint32_t kNop = 0x10, kDispatchDirect = 0x15, kWaitRegMem = 0x3C, kIndirectBuffer = 0x3F,
                          kEventWrite = 0x46, kReleaseMem = 0x49, kAcquireMem = 0x58, kSetShReg = 0x76,
                          kSetUconfigReg = 0x79, kWaitRegMem64 = 0x93;
// A type-3 NOP whose count field is 0x3FFF is one dword, header only (Linux gfx_v11_0.c
// gfx_v11_0_ring_funcs_compute/_gfx .nop = PACKET3(PACKET3_NOP, 0x3FFF), which amdgpu_ring_insert_nop
// and amdgpu_ring_commit's alignment padding repeat dword by dword), not a 16 K-dword packet.
inline constexpr uint32_t kNopOneDwordCount = 0x3FFF;
inline constexpr uint32_t kSetShRegStart = 0x2c00, kSetShRegEnd = 0x3000;  // PACKET3_SET_SH_REG_START/END
inline constexpr uint32_t kSetUconfigRegStart = 0xc000, kSetUconfigRegEnd = 0x10000;
// irqsrcs_gfx_11_0_0.h GFX_11_0_0__SRCID__CP_EOP_INTERRUPT
inline constexpr uint8_t kSrcIdCpEop = 181;
}  // namespace pm4

class HostExecutor;
class NativeExecutor;
class GcRegs;

class ComputeEngine {
public:
    ComputeEngine(Chip& chip, Gmc& gmc, Ih& ih);

    bool enabled() const { return regs_.hqd_active != 0; }  // GC 11 and GC 12
    // After a register write has been stored: HQD activation / dequeue.
    void register_written(uint32_t address, uint32_t value);
    // A BAR2 write at `offset` (bytes); true when it was one of this engine's doorbells.
    bool doorbell(uint64_t offset, unsigned width, uint64_t value);

    // DISPATCH_DIRECT: the hook when one is set (tests), else the host-code executor runs it.
    DispatchHook on_dispatch;
    HostExecutor* executor = nullptr;
    // The chip's own machine code (native_exec.hpp): every program that is not a host-code descriptor.
    NativeExecutor* native = nullptr;
    // The banked GC registers (the MEC pipes' program counters); unset in unit use: not checked.
    GcRegs* gc_regs = nullptr;
    // Fault injection: while set, a dispatch never completes (the queue stays on it, waiting).
    std::atomic<bool> hang_dispatches{false};
    // The engine thread's re-poll: runs every queue that waits (WAIT_REG_MEM, a held dispatch).
    void poll();
    bool any_waiting() const;
    // Register access for WAIT_REG_MEM with MEM_SPACE 0 (the model's BAR5 decode, side effects
    // included: a write to GPU_HDP_FLUSH_REQ is an HDP flush). Absolute dword addresses.
    std::function<uint32_t(uint32_t)> reg_read;
    std::function<void(uint32_t, uint32_t)> reg_write;

    struct QueueStatus {
        bool active = false, hung = false, waiting = false;
        uint64_t rptr = 0;  // dwords consumed since activation
        uint64_t dispatches = 0;
    };
    QueueStatus status(uint32_t pipe, uint32_t queue) const;
    // Every queue goes. While a kernel runs (the model's lock released, host_exec.hpp) the
    // running queue's removal waits for the kernel to end, as a dequeue waits for waves to drain.
    void reset();

private:
    struct Queue {
        uint32_t pipe = 0, queue = 0;
        uint64_t ring_va = 0;
        uint64_t ring_dwords = 0;
        uint64_t rptr_report = 0, wptr_poll = 0, eop_va = 0;
        uint32_t doorbell_dword = 0;  // CP_HQD_PQ_DOORBELL_CONTROL.DOORBELL_OFFSET (dwords)
        uint64_t rptr = 0;
        bool hung = false, waiting = false;
        bool remove_pending = false;  // dequeued or reset while its kernel ran: goes when it ends
        uint64_t dispatches = 0;
        // An INDIRECT_BUFFER being executed (resumable when a WAIT_REG_MEM inside it blocks).
        bool in_ib = false;
        uint64_t ib_va = 0, ib_dwords = 0, ib_pos = 0;
        std::array<uint32_t, pm4::kSetShRegEnd - pm4::kSetShRegStart> sh{};
        std::map<uint32_t, uint32_t> uconfig;
    };
    struct Regs {
        uint32_t hqd_active = 0, hqd_vmid = 0, pq_base = 0, pq_base_hi = 0, rptr_report = 0, rptr_report_hi = 0,
                 wptr_poll = 0, wptr_poll_hi = 0, doorbell_control = 0, pq_control = 0, dequeue_request = 0,
                 eop_base = 0, eop_base_hi = 0, eop_control = 0, grbm_gfx_cntl = 0, mec_rs64_cntl = 0;
    };

    void activate();
    void run(Queue& q);
    // Executes the packet at `words` (already bounds-checked). Returns false when the queue must
    // stop (hung, or a wait is not satisfied: then `q.waiting`).
    enum class Step { next, wait, stop };
    Step execute(Queue& q, const std::vector<uint32_t>& words, const std::string& where, bool in_ib);
    bool read(Queue& q, uint64_t va, std::span<std::byte> out);
    bool write(Queue& q, uint64_t va, std::span<const std::byte> data);
    bool read32(Queue& q, uint64_t va, uint32_t& v);
    void hang(Queue& q, const std::string& what, const std::string& where, const std::string& source);
    std::string name(const Queue& q) const;

    Chip& chip_;
    Gmc& gmc_;
    Ih& ih_;
    Regs regs_;
    std::map<uint32_t, Queue> queues_;  // key pipe * 8 + queue
    // The SQ instruction cache: the first bytes of every program a dispatch fetched since the last
    // ACQUIRE_MEM with GCR_CNTL GLI_INV and GL2_INV (soc15d.h), by program address. CPU writes
    // through BAR0/HDP reach memory, not the caches (Linux gfx_v11_0_emit_mem_sync invalidates both
    // at the start of every IB for that reason).
    std::map<uint64_t, std::array<std::byte, 64>> icache_;
    // The queue whose kernel runs with the model's lock released; removals of it are deferred.
    std::optional<uint32_t> running_;
    void remove(uint32_t key);
    void finish_pending();  // the deferred removals, once no kernel runs
};

// The 100 MHz GPU clock counter RELEASE_MEM data_sel 3 and SDMA TIMESTAMP write (tinygrad ops_amd.py AMDSignal timestamps:
// timestamp_divider 100 → 10 ns per tick), from modelled time.
inline uint64_t gpu_clock(const Chip& chip) { return chip.timestamp_now() / 10; }

}  // namespace baregpu::sim::amdgpu
