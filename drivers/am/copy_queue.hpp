// The copy queue: SDMA0 queue 0's ring (tinygrad ip.py AM_SDMA, ops_amd.py AMDCopyQueue) as an hcq::Engine.
//
// Every command is a multiple of 8 dwords (NOP-padded), so any run of commands is a valid SDMA
// indirect buffer (INDIRECT needs 8-dword multiples) and bound queues need no repacking:
//   wait       POLL_REGMEM >= on the high dword, then on the low dword. SDMA polls compare 32
//              bits; this pair is exact while the signal's high dword equals the target's when
//              the low compare runs (it is not when the value passes 2^32 * k while a wait for a
//              smaller value with the same high dword is still pending).
//   signal     WRITE linear of the two dwords (one 64-bit write, after every earlier packet)
//   timestamp  TIMESTAMP GET_GLOBAL (the 100 MHz counter)
//   barrier    NOPs (the engine executes in order)
//   copy       COPY_LINEAR per 1 GiB chunk (the 30-bit count); a chunk a later size patch does not
//              need becomes an 8-dword NOP that keeps the addresses, so patches stay in place.
// Submission: packets never straddle the ring end (the rest is NOP-filled); a WRITE of the ticket
// to a fence word ends every submission; pointers are bytes; the ring waits for space instead of
// passing the fence (sdma_packets.hpp's placement rule).
#pragma once

#include "drivers/am/ring_queue.hpp"

namespace baregpu::am {

class AmHcqDevice;

class CopyQueueEngine final : public RingQueue {
public:
    // SDMA0 queue 0, doorbell AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0 (0x100).
    CopyQueueEngine(AmHcqDevice& device, uint64_t ring_bytes);
    ~CopyQueueEngine() override;

    void start();
    void stop() noexcept;
    void restart();

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
    uint64_t max_submit_bytes() const override;
    std::string describe() const override;

    uint64_t ring_bytes() const { return ring_units_; }

private:
    void enable();
    void place(std::span<const uint32_t> words);
    void fill_to_ring_end();
    uint64_t placed_bytes(std::span<const uint32_t> words, uint64_t at) const;
    uint64_t finish_and_ring();

    bool active_ = false;
};

}  // namespace baregpu::am
