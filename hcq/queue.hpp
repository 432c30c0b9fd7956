// Queues: record commands on the host, then submit them to the device's hardware queue.
//
//   q.wait(dev.timeline(), dev.timeline_value() - 1)
//    .exec(program, args, grid, block)
//    .signal(dev.timeline(), dev.next_timeline())
//    .submit();
//
// Recording is host-only and cheap: after the first use of a queue, re-recording the same shape
// of work does not allocate, and neither does submit(). A recorded queue may be submitted any
// number of times; its commands can be patched in place between submissions through the
// CommandId each command got (last() right after recording it). bind() moves the commands into
// device memory so that later submissions only hand the device a pointer; patching a bound
// queue first waits until the device finished its previous submission of it.
//
// A queue is used by one thread at a time. Signals, buffers and programs named in recorded
// commands must stay alive while submissions using them may run.
#pragma once

#include "hcq/command_buffer.hpp"
#include "hcq/memory.hpp"
#include "hcq/program.hpp"
#include "hcq/signal.hpp"
#include "hcq/types.hpp"

#include <memory>
#include <vector>

namespace baregpu::hcq {

class Device;
class Engine;
namespace detail {
class DeviceProfile;
}

class Queue {
public:
    Queue(Queue&& other) noexcept = default;
    Queue& operator=(Queue&& other) noexcept;
    Queue(const Queue&) = delete;
    Queue& operator=(const Queue&) = delete;
    // Waits (bounded) for the last submission of a bound queue before freeing its memory.
    ~Queue();

    Device& device() const { return *device_; }
    QueueKind kind() const;
    const Engine& engine() const { return *engine_; }

    // Number of commands recorded (including the profiler's own timestamps when profiling).
    size_t size() const { return records_.size(); }
    // The id of the most recently recorded command. Throws std::logic_error when empty.
    CommandId last() const;
    bool bound() const { return static_cast<bool>(bound_); }
    uint64_t bytes() const { return commands_.size(); }

    // Hand the recorded commands to the device. Throws DeviceLostError when the device is in
    // its error state, TimeoutError when its ring stays full for the default timeout (a hang:
    // the device enters its error state), UnsupportedError when an unbound queue is larger
    // than the ring (bind() it).
    void submit();
    // Move the commands into device memory; later submissions pass only their address.
    // Recording more commands afterwards throws std::logic_error until reset().
    void bind();
    // Forget every command (capacity is kept). Waits for a bound queue's last submission.
    void reset();

    // In-place updates of recorded commands. Each throws std::logic_error when `id` is not a
    // command of the right kind.
    void update_wait(CommandId id, const Signal& signal, uint64_t value);
    void update_wait_value(CommandId id, uint64_t value);
    void update_signal(CommandId id, const Signal& signal, uint64_t value);
    void update_signal_value(CommandId id, uint64_t value);
    void update_timestamp(CommandId id, const Signal& signal);
    void update_copy(CommandId id, GpuVirtualAddress dst, GpuVirtualAddress src, uint64_t size);
    void update_copy_dst(CommandId id, GpuVirtualAddress dst);
    void update_copy_src(CommandId id, GpuVirtualAddress src);
    void update_exec_buffer(CommandId id, uint32_t index, const Buffer& buffer);
    void update_exec_address(CommandId id, uint32_t index, GpuVirtualAddress address);
    void update_exec_value(CommandId id, uint32_t index, uint32_t value);
    void update_exec_dims(CommandId id, Dim3 grid, Dim3 block);

protected:
    Queue(Device& device, Engine& engine, std::shared_ptr<Device> keep_alive);

    void record_wait(const Signal& signal, uint64_t value);
    void record_signal(const Signal& signal, uint64_t value);
    void record_timestamp(const Signal& signal);
    void record_memory_barrier();
    void record_exec(const KernelArgs& args, Dim3 grid, Dim3 block);
    void record_copy(GpuVirtualAddress dst, GpuVirtualAddress src, uint64_t size);

private:
    enum class Kind : uint8_t { wait, signal, timestamp, barrier, exec, copy, profile_timestamp };
    struct Record {
        Kind kind;
        uint32_t offset;
        uint32_t size;
        const Program* program;  // exec only
    };
    // A command the profiler brackets with two timestamps (patched per submission).
    struct ProfiledSpan {
        uint32_t begin;  // record index of the first timestamp
        uint32_t end;
        uint32_t name_id;
        uint8_t kind;
        uint64_t arg;  // bytes (copy), work-items (exec), awaited value (wait)
    };

    void check_recordable() const;
    // Throws std::invalid_argument when grid/block exceed the kernel's or the device's limits.
    void check_launch(const KernelInfo& kernel, Dim3 grid, Dim3 block) const;
    Record& start_record(Kind kind);
    void finish_record(Record& record, bool user);
    uint32_t record_profile_timestamp();
    const Record& record_of(CommandId id, Kind kind) const;
    std::span<std::byte> writable(const Record& record);
    void wait_idle(Duration timeout);
    void patch_profile_slots();

    std::shared_ptr<Device> keep_alive_;  // declared first: destroyed last
    Device* device_;
    Engine* engine_;
    CommandBuffer commands_;
    std::vector<Record> records_;
    std::vector<ProfiledSpan> spans_;
    uint32_t last_user_ = 0;
    Buffer bound_;
    uint64_t last_ticket_ = 0;
    bool submitted_bound_ = false;
};

class ComputeQueue : public Queue {
public:
    // Stall the queue until signal.value() >= value.
    ComputeQueue& wait(const Signal& signal, uint64_t value) {
        record_wait(signal, value);
        return *this;
    }
    // Once every earlier command completed, set signal.value() = value.
    ComputeQueue& signal(const Signal& signal, uint64_t value) {
        record_signal(signal, value);
        return *this;
    }
    // Once every earlier command completed, write the device's tick counter to signal.timestamp().
    ComputeQueue& timestamp(const Signal& signal) {
        record_timestamp(signal);
        return *this;
    }
    // Make host and peer writes visible to the kernels that follow.
    ComputeQueue& memory_barrier() {
        record_memory_barrier();
        return *this;
    }
    // Launch grid.x*y*z workgroups of block.x*y*z work-items. Throws std::invalid_argument when
    // the program belongs to another device or the block exceeds the kernel's or device's limit.
    ComputeQueue& exec(const Program& program, const KernelArgs& args, Dim3 grid, Dim3 block);

private:
    friend class Device;
    friend class detail::DeviceProfile;
    ComputeQueue(Device& device, Engine& engine, std::shared_ptr<Device> keep_alive)
        : Queue(device, engine, std::move(keep_alive)) {}
};

class CopyQueue : public Queue {
public:
    CopyQueue& wait(const Signal& signal, uint64_t value) {
        record_wait(signal, value);
        return *this;
    }
    CopyQueue& signal(const Signal& signal, uint64_t value) {
        record_signal(signal, value);
        return *this;
    }
    CopyQueue& timestamp(const Signal& signal) {
        record_timestamp(signal);
        return *this;
    }
    // Copy `size` bytes. Addresses are device virtual addresses (a peer's buffer must be mapped
    // into this device first: Device::map_peer).
    CopyQueue& copy(GpuVirtualAddress dst, GpuVirtualAddress src, uint64_t size) {
        record_copy(dst, src, size);
        return *this;
    }
    // Throws std::out_of_range when size exceeds either buffer.
    CopyQueue& copy(const Buffer& dst, const Buffer& src, uint64_t size);

private:
    friend class Device;
    friend class detail::DeviceProfile;
    CopyQueue(Device& device, Engine& engine, std::shared_ptr<Device> keep_alive)
        : Queue(device, engine, std::move(keep_alive)) {}
};

}  // namespace baregpu::hcq
