// An HCQ queue on a GPFIFO channel (clc56f.h; tinygrad ops_nv.py NVComputeQueue): the compute queue (ADA_COMPUTE_A
// on subchannel 1) and the copy queue (AMPERE_DMA_COPY_B on subchannel 4) are the same engine with a
// different channel behind it; both bind the copy class on subchannel 4 (a compute channel's GRCE) for
// timestamps.
//
// Commands (pushbuffer method streams, gpfifo.hpp / compute_methods.hpp / ce_methods.hpp encodings):
//   wait       host SEM_* ACQ_STRICT_GEQ, 64-bit (clc56f.h)
//   signal     host SEM_* RELEASE with RELEASE_TIMESTAMP: value at the signal, GPU time at +8 (HCQ's layout)
//   timestamp  host RELEASE_TIMESTAMP into the queue's 16-byte scratch, then a CE copy of its time word
//              to the destination (NVIDIA semaphores only write {payload, time} pairs, never a bare time)
//   barrier    host WFI
//   exec       a compute NO_OPERATION (clc6c0.h 0x100, non-incrementing) whose data carries 256 bytes of
//              slack, the QMD V03 and the kernel arguments (constant buffer 0, right after the QMD), then
//              SEND_PCAS_A / SEND_SIGNALING_PCAS2_B SCHEDULE of that QMD. Where the command lands (submit /
//              relocate) the QMD and arguments move to the first 256-byte aligned address in the slack
//              (SEND_PCAS_A is QMD >> 8) and their addresses are filled in.
//   copy       CE OFFSET_IN/OUT, LINE_LENGTH_IN, LAUNCH_DMA pitch 1-D (chunks of < 4 GiB)
//
// Submission: the commands are copied into the queue's command ring (host memory, not wrapping inside
// a submission), followed by a 64-bit release of the submission's ticket to a fence word; one GP entry
// covers both; GpFifoRing never overwrites an entry GPGet has not passed (it waits, bounded); then
// USERD.GPPut and the doorbell (NV_VIRTUAL_FUNCTION_DOORBELL = work-submit token).
#pragma once

#include "drivers/nv/gpfifo.hpp"
#include "drivers/nv/qmd.hpp"

#include "drivers/nv/gpfifo.hpp"
#include "hcq/engine.hpp"
#include "hcq/memory.hpp"

#include <cstdint>
#include <mutex>
#include <optional>

namespace baregpu::nv {

class NvHcqDevice;

inline constexpr unsigned kHostSubchannel = 0, kComputeSubchannel = 1, kCopySubchannel = 4;

class ChannelQueue final : public hcq::Engine {
public:
    struct Config {
        hcq::QueueKind kind = hcq::QueueKind::compute;
        std::string name;
        uint32_t gpfifo_entries = 1024;   // power of two
        uint64_t ring_bytes = 1ull << 20; // command ring, power of two >= 4 KiB
    };
    ChannelQueue(NvHcqDevice& device, Config config);
    ~ChannelQueue() override;

    // Allocates ring, USERD and command memory, the RM channel (+ engine objects, token), binds the
    // classes to their subchannels.
    void start();
    // Frees the RM channel (RM unregisters it from the engines). Idempotent, never throws.
    void stop() noexcept;
    void release() noexcept;
    // After a fault: RM frees the channel and allocates a new one on the same memory (a new token).
    void restart();

    uint32_t token() const { return token_; }

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
    uint64_t completed_ticket() const noexcept override;
    void wait_ticket(uint64_t ticket, hcq::Duration timeout) override;
    uint64_t max_submit_bytes() const override;
    std::string describe() const override;

private:
    bool compute() const { return config_.kind == hcq::QueueKind::compute; }
    void open_channel();
    void open_channel_locked();  // caller holds mutex_
    // Appends `dwords` padded to a multiple of 8 bytes with a filler method.
    uint32_t* append(hcq::CommandBuffer& out, size_t dwords);
    void emit(hcq::CommandBuffer& out, const PushBuffer& pb);
    uint32_t userd_gp_get() const;
    // Blocks (default timeout, fault polling) until completed_ticket() >= position.
    void wait_completed(uint64_t position, uint64_t bytes);
    // Places `bytes` at the next 8-byte aligned ring position (wrapping to the ring start when they do
    // not fit before its end); returns the ring offset.
    uint64_t reserve(uint64_t bytes);
    void push_entry(uint64_t va, uint64_t bytes);
    void ring_doorbell();

    NvHcqDevice& device_;
    Config config_;
    hcq::Buffer channel_mem_;  // GP ring, then USERD (512-byte aligned)
    hcq::Buffer ring_;         // command ring (host memory)
    hcq::Buffer control_;      // fence word at +0, timestamp scratch at +0x100
    uint64_t userd_offset_ = 0;
    // From the GPU's classes (start()): the QMD version its compute class reads, and its host class.
    QmdVersion qmd_version_ = QmdVersion::v03_00;
    HostClass host_ = HostClass::ampere_c56f;
    uint32_t rm_memory_ = 0, rm_channel_ = 0;
    uint32_t token_ = 0;
    std::optional<GpFifoRing> gpfifo_;
    mutable std::mutex mutex_;
    uint64_t wptr_ = 0;  // bytes since start, ring position = wptr_ % ring_bytes
    bool started_ = false;
};

}  // namespace baregpu::nv
