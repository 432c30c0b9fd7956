// One CPU-device hardware queue: a ring of packets in device memory, a write pointer the host
// advances on submit, a read pointer the worker thread advances as it executes, and a doorbell.
// The worker is the CPU device's command processor: it validates every packet (size, opcode,
// addresses against the page table, program slots) and faults the device on anything invalid,
// then stops, as a GPU's command processor would.
#pragma once

#include "drivers/cpu/address_space.hpp"
#include "drivers/cpu/packets.hpp"
#include "drivers/cpu/wake_word.hpp"
#include "hcq/engine.hpp"
#include "hcq/memory.hpp"

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>
#include <mutex>
#include <thread>

namespace baregpu::cpu {

class CpuDevice;

class CommandProcessor final : public hcq::Engine {
public:
    CommandProcessor(CpuDevice& device, hcq::QueueKind kind, std::string name);
    ~CommandProcessor() override;

    // ring: device memory of a power-of-two size >= 4 KiB, owned by the caller, zeroed.
    void start(std::span<std::byte> ring);
    // Stop the worker (abandoning what is queued) and join it.
    void stop() noexcept;
    // Stops the worker and starts it again past everything submitted so far (recover()): a
    // faulted queue takes work again; what it had not run yet counts as done and never runs.
    void restart();
    // The write pointer of the last submission (for draining).
    uint64_t submitted() const noexcept { return write_ptr_.load(std::memory_order_acquire); }

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
    uint64_t completed_ticket() const noexcept override { return read_ptr_.load(std::memory_order_acquire); }
    void wait_ticket(uint64_t ticket, hcq::Duration timeout) override;
    uint64_t max_submit_bytes() const override { return ring_.size(); }
    std::string describe() const override;
    bool logs_profile() const override { return log_enabled_; }
    uint64_t drain_profile(std::vector<hcq::EngineEvent>& out) override;
    // Off: the profiler brackets commands with timestamp packets instead (the generic path).
    void enable_log(bool on) { log_enabled_ = on; }

private:
    enum class Result { ok, fault, stopped };

    // The worker thread: consume() until stopped; an exception faults the device.
    void run() noexcept;
    void consume();
    // Host side: until ready() or the deadline (host_now_ns), spinning briefly, then sleeping on
    // progress_. Returns ready(); throws DeviceLostError when the device fails meanwhile.
    template <typename Ready>
    bool wait_progress(Ready ready, uint64_t start, uint64_t deadline);
    bool idle_wait(uint64_t rptr);
    void publish_read(uint64_t rptr, bool wake) noexcept;
    void wait_space(uint64_t need);
    void write_ring(std::span<const std::byte> bytes);
    Result execute(const std::byte* packet, uint32_t size, bool indirect, uint64_t where);
    Result execute_packet(const std::byte* packet, uint32_t size, bool indirect, uint64_t where);
    Result execute_wait(uint64_t signal, uint64_t value, uint64_t where);
    Result execute_exec(const std::byte* packet, uint32_t size, uint64_t where);
    Result execute_indirect(uint64_t address, uint64_t size, uint64_t where);
    Result fault(uint64_t where, const std::string& what) noexcept;
    enum class Access : uint8_t { read, write };
    bool check_range(uint64_t address, uint64_t size, Access access, uint64_t where, const char* what, Result& result);

    // The execution log the worker keeps while profiling: begin/end ticks of every exec, copy
    // and wait, written by the worker, drained by the host. Full means dropped, never blocked.
    struct LogRecord {
        Opcode opcode;
        uint32_t program;  // exec: program handle
        uint64_t begin, end;
        uint64_t arg;     // exec: work-items; copy: bytes; wait: value
        uint64_t signal;  // wait: signal address
    };
    static constexpr uint64_t kLogRecords = 1u << 16;
    void log(const LogRecord& record) noexcept;

    CpuDevice& device_;
    std::span<std::byte> ring_;
    uint64_t mask_ = 0;

    // Host side (under submit_mutex_), on its own cache lines: the worker only reads them.
    alignas(64) std::mutex submit_mutex_;
    uint64_t wptr_ = 0;
    uint64_t read_seen_ = 0;  // the last read_ptr_ loaded: space is only re-read when this says full
    alignas(64) std::atomic<uint64_t> write_ptr_{0};
    // Written by both sides (a sleeping worker announces itself here): a line of its own.
    alignas(64) WakeWord doorbell_;

    // Worker side.
    alignas(64) std::atomic<uint64_t> read_ptr_{0};
    std::atomic<uint64_t> executing_{0};  // position (in the ring's lap space) of the packet being executed
    std::atomic<uint32_t> executing_opcode_{0};
    RangeCache pages_;  // worker only
    bool in_indirect_ = false;  // worker only
    std::atomic<uint64_t> barrier_word_{0};
    std::unique_ptr<LogRecord[]> log_records_;  // made by the worker on first use
    std::atomic<LogRecord*> log_published_{nullptr};
    std::atomic<uint64_t> log_write_{0};
    std::atomic<uint64_t> log_dropped_{0};
    alignas(64) std::atomic<uint64_t> log_read_{0};  // host
    std::mutex drain_mutex_;
    bool log_enabled_ = true;
    alignas(64) WakeWord progress_;
    std::atomic<bool> stop_{false};
    std::thread worker_;
};

}  // namespace baregpu::cpu
