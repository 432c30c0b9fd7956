// What a backend implements for each hardware queue it has (a compute ring, a copy engine):
// encoding HCQ commands into its packet format, patching encoded packets in place, and putting
// command bytes in front of the hardware. Everything else about queues (recording order, patch
// bookkeeping, bind, hazards, profiling) is common code in hcq/queue.cpp.
#pragma once

#include "base/address.hpp"
#include "hcq/command_buffer.hpp"
#include "hcq/types.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace baregpu::hcq {

class Program;
enum class ProfileKind : uint8_t;

// One command as an engine's own execution log saw it (Engine::logs_profile()).
struct EngineEvent {
    ProfileKind kind;
    uint32_t name_id;  // in Profiler's string table
    uint64_t begin_ticks;
    uint64_t end_ticks;
    uint64_t arg;  // bytes (copy), work-items (exec), awaited value (wait)
};

// A patchable scalar field of an encoded command.
enum class Field : uint8_t {
    signal_address,  // wait / signal: the signal's address
    signal_value,    // wait / signal: the value
    timestamp_address,
    copy_dst,
    copy_src,
    copy_size,
};

class Engine {
public:
    Engine(QueueKind kind, std::string name) : kind_(kind), name_(std::move(name)) {}
    virtual ~Engine() = default;
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    QueueKind kind() const { return kind_; }
    // "compute", "copy:0": the profiler's track name and what errors call this queue.
    const std::string& name() const { return name_; }

    // Encoding: append exactly one command. Must not allocate beyond CommandBuffer growth and
    // must not throw for valid arguments (the queue validated them).
    virtual void encode_wait(CommandBuffer& out, GpuVirtualAddress signal, uint64_t value) = 0;
    virtual void encode_signal(CommandBuffer& out, GpuVirtualAddress signal, uint64_t value) = 0;
    // Write the device's tick counter (u64) to dst once every earlier command completed.
    virtual void encode_timestamp(CommandBuffer& out, GpuVirtualAddress dst) = 0;
    virtual void encode_memory_barrier(CommandBuffer& out) = 0;
    virtual void encode_exec(CommandBuffer& out, const Program& program, std::span<const std::byte> kernargs, Dim3 grid,
                             Dim3 block) = 0;
    virtual void encode_copy(CommandBuffer& out, GpuVirtualAddress dst, GpuVirtualAddress src, uint64_t size) = 0;

    // Patching one encoded command (its bytes, in host memory or bound device memory).
    virtual void patch(std::span<std::byte> command, Field field, uint64_t value) = 0;
    // Overwrite kernarg bytes [offset, offset + bytes.size()) of an exec command.
    virtual void patch_exec_args(std::span<std::byte> command, uint32_t offset, std::span<const std::byte> bytes) = 0;
    virtual void patch_exec_dims(std::span<std::byte> command, Dim3 grid, Dim3 block) = 0;

    // Put commands in front of the hardware: copy them into the ring (blocking, with timeout,
    // while the ring is full) and ring the doorbell. Returns a ticket: the submission is done
    // once completed_ticket() >= ticket. Throws TimeoutError when the ring stays full,
    // UnsupportedError when commands.size() > max_submit_bytes().
    virtual uint64_t submit(std::span<const std::byte> commands) = 0;
    // Commands were copied to device memory at `address` (Queue::bind): fix what in them
    // depends on where they live (an engine whose commands carry their own kernel arguments
    // points the dispatch at them). Called before the first submit_bound of that memory.
    virtual void relocate(std::span<std::byte> commands, GpuVirtualAddress address) {
        (void)commands;
        (void)address;
    }
    // Submit commands that already live in device memory (bind()) without copying them.
    virtual uint64_t submit_bound(GpuVirtualAddress commands, uint64_t size) = 0;
    virtual uint64_t completed_ticket() const noexcept = 0;
    // Block until completed_ticket() >= ticket. Throws TimeoutError (with describe()) or
    // DeviceLostError.
    virtual void wait_ticket(uint64_t ticket, Duration timeout) = 0;
    // The largest command run submit() accepts (the ring size).
    virtual uint64_t max_submit_bytes() const = 0;
    // "compute: rptr=0x1a0 wptr=0x2c0 ..." for error messages.
    virtual std::string describe() const = 0;

    // Profiling. An engine that logs its own execution while Profiler::active() (begin and end
    // ticks of every exec, copy and wait, as hardware performance counters or thread traces
    // do) returns true here; queues then add nothing to its command stream and the profiler
    // drains the log instead. Other engines get two timestamp commands around each command.
    virtual bool logs_profile() const { return false; }
    // Move the events logged since the last call into `out`; returns how many were dropped
    // because the log was full.
    virtual uint64_t drain_profile(std::vector<EngineEvent>& out) {
        (void)out;
        return 0;
    }

private:
    QueueKind kind_;
    std::string name_;
};

}  // namespace baregpu::hcq
