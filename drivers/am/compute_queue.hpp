// The compute queue: a PM4 ring on a MEC 1 hardware queue (HQD) programmed directly from an MQD,
// without MES or KIQ (tinygrad ip.py AM_GFX.setup_ring), as an hcq::Engine.
//
// Commands (pm4.hpp encodings; every command a multiple of 8 bytes, padded with one-dword NOPs):
//   wait       WAIT_REG_MEM64 >= (64-bit compare), NOP
//   signal     RELEASE_MEM DATA_SEL 2 (64-bit value at end of pipe, caches written back)
//   timestamp  RELEASE_MEM DATA_SEL 3 (the 100 MHz GPU clock)
//   barrier    ACQUIRE_MEM (invalidate and write back every cache); its submission also flushes the
//              HDP from the CPU before the doorbell, so host writes through the BAR are visible
//   exec       a NOP carrying the kernel arguments ("BGKA", the kernarg SGPR index, the bytes),
//              then tinygrad ops_amd.py AMDComputeQueue.exec's dispatch sequence whose kernarg pointer points into that
//              NOP: the arguments travel with the command, so a recorded queue can be submitted
//              again and again (and patched between submissions) without a kernarg arena. Where
//              the NOP lands is known only when it is copied into the ring (submit) or bound to
//              device memory (relocate): both fill in the pointer then.
//
// Submission: the packets are copied into the ring (none straddles the ring end: the rest is
// NOP-filled), followed by a RELEASE_MEM that writes the submission's ticket (the ring's 64-bit
// write pointer in dwords) to a fence word; then the write pointer is stored in memory, the HDP
// flushed, and the doorbell rung with it (tinygrad ops_amd.py AMDQueueDesc.signal_doorbell, AMDComputeQueue._submit). Ring space is
// reclaimed by the fence, not by the CP's read pointer: a dispatch still running may read its
// arguments from the ring after the CP fetched past it.
#pragma once

#include "drivers/am/pm4.hpp"
#include "drivers/am/ring_queue.hpp"

namespace baregpu::am {

class AmHcqDevice;

class ComputeQueueEngine final : public RingQueue {
public:
    // MEC 1 pipe 0 queue `queue`, doorbell slot AMDGPU_NAVI10_DOORBELL_MEC_RING0 + queue.
    ComputeQueueEngine(AmHcqDevice& device, pm4::GcGen gen, uint32_t queue, uint64_t ring_bytes);
    ~ComputeQueueEngine() override;

    // Allocates the ring, control words, EOP buffer and MQD, and activates the HQD.
    void start();
    // Dequeues the HQD (CP_HQD_DEQUEUE_REQUEST, waits for CP_HQD_ACTIVE = 0). Idempotent.
    void stop() noexcept;
    void release() noexcept override;
    // After a fault: dequeue, forget everything in the ring, activate again on the same memory.
    void restart();
    // Its HQD: queue `queue()` of MEC1 pipe 0.
    uint32_t queue() const { return queue_; }

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
    void relocate(std::span<std::byte> commands, GpuVirtualAddress address) override;
    uint64_t submit(std::span<const std::byte> commands) override;
    uint64_t submit_bound(GpuVirtualAddress commands, uint64_t size) override;
    uint64_t max_submit_bytes() const override;
    std::string describe() const override;

    uint32_t doorbell_slot() const { return doorbell_slot_; }
    uint64_t ring_dwords() const { return ring_units_; }

private:
    void activate();
    // Copies `words` into the ring at wptr_ as whole packets, NOP-filling the ring end where a
    // packet would straddle it, and points kernarg NOPs' dispatches at their ring copy.
    void place(std::span<const uint32_t> words);
    void fill_to_ring_end();
    // Dwords `words` take in the ring starting at `at` (padding included).
    uint64_t placed_dwords(std::span<const uint32_t> words, uint64_t at) const;
    void write_ring(uint64_t at, uint32_t word) { ring_words_[at % ring_units_] = word; }
    // Appends the fence, publishes the write pointer and rings the doorbell; returns the ticket.
    uint64_t finish_and_ring();

    pm4::GcGen gen_;
    uint32_t queue_;
    uint32_t doorbell_slot_;
    bool skip_dispatch_packet_;  // SkipStep::dispatch_packet (tests)
    hcq::Buffer eop_, mqd_;
    bool hdp_flush_ = false;  // the submission being placed needs an HDP flush before its doorbell
    uint64_t code_generation_ = 0;  // the device's code_generation() this queue last invalidated for
    // Before a submission: when code was loaded since the last one, an ACQUIRE_MEM that invalidates the
    // instruction cache and GL2 (code written through the BAR bypasses both).
    void invalidate_for_new_code();
    bool active_ = false;
};

}  // namespace baregpu::am
