// One KGSL draw context as an HCQ engine: HCQ commands encoded as A6xx PM4 (type-4 register
// writes, type-7 packets with parity), copied into a command ring in GPU memory and submitted as
// one IB per submission with IOCTL_KGSL_GPU_COMMAND. KGSL queues at most 49 unstarted submissions
// per context and then blocks GPU_COMMAND for up to 10 s before failing it with ETIMEDOUT
// (adreno_dispatch.c: _context_drawqueue_size 50, _context_queue_wait 10000 ms,
// _wait_for_room_in_context_queue): submissions beyond what KGSL holds wait in the engine and are
// handed over as earlier ones retire (on every submit, wait and sleep), so submit never blocks on
// work the caller has yet to release; ETIMEDOUT is back-pressure, never device loss. Tickets are
// the context's KGSL timestamps (u32, per context) extended to 64 bits. Every kernel wait has a
// finite timeout and loops; a wait that times out or fails puts the device in its error state
// with a message naming the context, the awaited timestamp and the last retired one.
//
// Encodings (all multiples of 8 bytes; a 1-dword CP_NOP pads odd lengths):
//   wait(s, v)      64-bit >= from 32-bit compares: CP_WAIT_REG_MEM(hi >= H); CP_COND_EXEC(while
//                   hi == H, wrap-around window 2^31) { CP_WAIT_REG_MEM(lo >= L) }
//   signal(s, v)    CP_WAIT_FOR_IDLE; CP_EVENT_WRITE(CACHE_FLUSH_TS) to the scratch page (A7xx:
//                   CP_EVENT_WRITE7(CACHE_CLEAN) with WRITE_ENABLED, EV_WRITE_USER_32B, as KGSL's
//                   adreno_gen7_ringbuffer.c writes its timestamps; mesa never uses CACHE_FLUSH_TS
//                   on A7XX);
//                   CP_WAIT_MEM_WRITES; CP_MEM_WRITE(lo, hi): two 32-bit writes, low word first,
//                   so a reader never sees more than the final value
//   timestamp(dst)  CP_WAIT_FOR_IDLE; CP_REG_TO_MEM(CP_ALWAYS_ON_COUNTER, 2 dwords, 64B)
//   memory_barrier  CACHE_FLUSH_TS (A7xx: CACHE_CLEAN); CP_EVENT_WRITE(CACHE_INVALIDATE) (A7xx:
//                   CACHE_INVALIDATE7);
//                   CP_WAIT_MEM_WRITES; CP_WAIT_FOR_IDLE
//   exec            CP_SET_MARKER(RM6_COMPUTE); the program state of mesa computerator's
//                   cs_program_emit (SP_MODE_CNTL, SP_UPDATE_CNTL, SP_CS_CONST_CONFIG, SP_CS_CNTL_0/1,
//                   SP_CS_BASE, SP_CS_PVT_MEM_*, SP_CS_CONFIG, SP_CS_INSTR_SIZE; A7XX also
//                   SP_PS_WAVE_CNTL, SP_REG_PROG_ID_*, SP_CS_WIE_CNTL_0/1); CP_LOAD_STATE6_FRAG
//                   (ST6_SHADER, SS6_INDIRECT) of the program; SP_CS_NDRANGE_0..6, the work-group
//                   registers and SP_CS_KERNEL_GROUP_X..Z (A7XX: + SP_CS_NDRANGE_7) in one packet;
//                   CP_LOAD_STATE6_FRAG(SS6_DIRECT constants = the kernel arguments, inline);
//                   CP_EXEC_CS(groups)
//   copy            an exec of the device's copy program: {dst u64, src u64, size u64}, 1 group
#pragma once

#include "drivers/qcom/a6xx_registers.hpp"
#include "drivers/qcom/kgsl_device.hpp"
#include "drivers/qcom/pm4.hpp"
#include "drivers/qcom/qcom_program.hpp"
#include "hcq/engine.hpp"
#include "hcq/memory.hpp"

#include <atomic>
#include <vector>
#include <mutex>

namespace baregpu::hcq {
class Device;
}

namespace baregpu::qcom {

class QcomEngine final : public hcq::Engine {
public:
    struct Shared {
        GpuVirtualAddress scratch;  // a dword CACHE_FLUSH_TS may write (the flush target)
        GpuVirtualAddress one;      // a dword that holds 1 (CP_COND_EXEC's BOOL_ADDR)
        const QcomProgram* copy_program = nullptr;  // for encode_copy; null: copies unsupported
        Generation generation;                       // A6xx or A7xx packets and registers
    };

    QcomEngine(hcq::Device& device, KgslDevice& kgsl, hcq::QueueKind kind, std::string name, uint32_t context_id);
    ~QcomEngine() override;
    // ring: CPU-mapped GPU memory (SVM: its CPU address is its GPU address), a multiple of 8
    // bytes. Before the first submission.
    void start(hcq::Buffer ring, const Shared& shared);

    uint32_t context_id() const { return context_.load(std::memory_order_acquire); }
    // Device::recover: continue on a fresh KGSL context (the old one, invalidated by a fault, was
    // destroyed). Tickets stay monotonic: everything submitted before counts as completed.
    void restart(uint32_t context_id);
    // Drop the ring (device teardown, after draining).
    void release() noexcept;
    // The last submitted ticket (handed to KGSL or still held back).
    uint64_t submitted() const noexcept { return submitted_.load(std::memory_order_acquire); }
    // The last ticket handed to KGSL.
    uint64_t queued() const noexcept { return queued_.load(std::memory_order_acquire); }
    // Submissions held back while KGSL's drawqueue is full.
    uint64_t held_back() const;
    // At most this many of our submissions are in KGSL unretired (KGSL's drawqueue, lowered when
    // KGSL answers ETIMEDOUT: context_drawqueue_size is a sysfs tunable).
    uint32_t drawqueue_depth() const;
    // The device's other engine: its held-back submissions are handed over whenever this one
    // waits, since this one's work may wait for that one's signals.
    void set_sibling(QcomEngine* sibling) { sibling_ = sibling; }
    // Hands over what KGSL has room for, here and on the sibling; false when that failed the device.
    bool feed_all() noexcept;
    // One bounded kernel wait for the next timestamp to retire (Device::sleep_for_signal): returns
    // at once when nothing is pending. Fails the device when the wait fails with an errno other
    // than ETIMEDOUT/EINTR.
    void sleep_once(uint32_t timeout_ms) noexcept;

    void encode_wait(hcq::CommandBuffer& out, GpuVirtualAddress signal, uint64_t value) override;
    void encode_signal(hcq::CommandBuffer& out, GpuVirtualAddress signal, uint64_t value) override;
    void encode_timestamp(hcq::CommandBuffer& out, GpuVirtualAddress dst) override;
    void encode_memory_barrier(hcq::CommandBuffer& out) override;
    void encode_exec(hcq::CommandBuffer& out, const hcq::Program& program, std::span<const std::byte> kernargs, hcq::Dim3 grid,
                     hcq::Dim3 block) override;
    void encode_copy(hcq::CommandBuffer& out, GpuVirtualAddress dst, GpuVirtualAddress src, uint64_t size) override;
    void patch(std::span<std::byte> command, hcq::Field field, uint64_t value) override;
    void patch_exec_args(std::span<std::byte> command, uint32_t offset, std::span<const std::byte> bytes) override;
    void patch_exec_dims(std::span<std::byte> command, hcq::Dim3 grid, hcq::Dim3 block) override;
    uint64_t submit(std::span<const std::byte> commands) override;
    uint64_t submit_bound(GpuVirtualAddress commands, uint64_t size) override;
    uint64_t completed_ticket() const noexcept override;
    void wait_ticket(uint64_t ticket, hcq::Duration timeout) override;
    uint64_t max_submit_bytes() const override { return ring_.size(); }
    std::string describe() const override;

private:
    bool a7xx() const { return shared_.generation.family == Generation::a7xx; }
    // The write-back event with its write: A6xx CP_EVENT_WRITE(CACHE_FLUSH_TS), or A7xx
    // CP_EVENT_WRITE7(CACHE_CLEAN | WRITE_ENABLED) (KGSL adreno_gen7_ringbuffer.c; mesa
    // freedreno_gpu_event.h maps a cache clean to CACHE_CLEAN on A7XX).
    uint32_t flush_event() const { return a7xx() ? pm4::event_write7_0(pm4::CACHE_CLEAN, true) : uint32_t(pm4::CACHE_FLUSH_TS); }
    uint64_t extend(uint32_t timestamp, uint64_t near) const noexcept;
    // The KGSL timestamp (of the current context) of a ticket.
    uint32_t kgsl_timestamp(uint64_t ticket) const noexcept { return uint32_t(ticket - base_.load(std::memory_order_acquire)); }
    uint64_t submit_ib(uint64_t gpuaddr, uint64_t bytes);
    // Hands held-back submissions to KGSL while its drawqueue has room. Fails the device (and
    // throws DeviceLostError) when GPU_COMMAND fails with anything but ETIMEDOUT / EAGAIN.
    void feed_drawqueue();
    void feed_drawqueue_locked();  // under drawqueue_mutex_
    // Under drawqueue_mutex_: one GPU_COMMAND if KGSL's drawqueue has room; false (nothing
    // submitted) when it has none. `ticket` gets KGSL's timestamp as a ticket, which must be
    // `promised` unless that is 0.
    bool hand_over_locked(uint64_t ib, uint64_t bytes, uint64_t promised, uint64_t& ticket);
    // The device error for a wait on `ticket` that failed with `err` (0: ran out of time).
    std::string wait_failure(uint64_t ticket, int err, double waited_ms) const;
    void encode_dispatch(hcq::CommandBuffer& out, uint64_t program_address, const ShaderState& shader, std::span<const std::byte> kernargs,
                         hcq::Dim3 grid, hcq::Dim3 block);

    hcq::Device& device_;
    KgslDevice& kgsl_;
    std::atomic<uint32_t> context_;
    std::atomic<uint64_t> base_{0};  // tickets of earlier contexts: this context's timestamp t is ticket base_ + t
    hcq::Buffer ring_;
    Shared shared_;

    mutable std::mutex submit_mutex_;
    uint64_t head_ = 0;  // linear write position in the ring (under submit_mutex_)
    struct InFlight {
        uint64_t begin, end, ticket;  // ring bytes [begin, end) (linear), empty for bound IBs
        uint64_t ib, ib_bytes;        // the IB as submitted
    };
    // What the oldest unretired IB is probably stuck on: its first wait whose condition does not
    // hold now (KGSL does not expose the CP's read pointer).
    std::string stuck_on(uint64_t ib, uint64_t bytes) const;
    // Unretired submissions, oldest first: a fixed ring (submitting does not allocate).
    static constexpr size_t kMaxInFlight = 4096;
    std::vector<InFlight> in_flight_ = std::vector<InFlight>(kMaxInFlight);  // under submit_mutex_
    uint64_t in_flight_head_ = 0, in_flight_tail_ = 0;                         // under submit_mutex_
    bool in_flight_empty() const { return in_flight_head_ == in_flight_tail_; }
    InFlight& in_flight_front() { return in_flight_[in_flight_head_ % kMaxInFlight]; }
    // Drop retired entries; with `need_room`, wait (bounded) for the oldest while the ring is full.
    void retire_in_flight(bool need_room);
    void push_in_flight(const InFlight& f);
    std::atomic<uint64_t> submitted_{0};
    std::atomic<uint64_t> queued_{0};  // the last ticket KGSL took
    QcomEngine* sibling_ = nullptr;
    mutable std::atomic<uint64_t> completed_{0};
    // Submissions KGSL has yet to take, oldest first (a fixed ring, never more than in flight).
    struct HeldBack {
        uint64_t ib, bytes, ticket;
    };
    // KGSL's default: _context_drawqueue_size (50) minus the one slot _wait_for_room_in_context_queue keeps free.
    static constexpr uint32_t kKgslDrawqueue = 49;
    mutable std::mutex drawqueue_mutex_;  // after submit_mutex_ when both are held
    std::vector<HeldBack> held_ = std::vector<HeldBack>(kMaxInFlight);  // under drawqueue_mutex_
    uint64_t held_head_ = 0, held_tail_ = 0;                            // under drawqueue_mutex_
    uint32_t depth_ = kKgslDrawqueue;                                   // under drawqueue_mutex_
};

}  // namespace baregpu::qcom
