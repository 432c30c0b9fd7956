// A device as HCQ sees it: queues, signals, memory, programs, a timeline, and a sticky error
// state. Backends (drivers/cpu, drivers/am, ...) derive from Device and provide Engines, a
// MemoryBackend and the few hooks below; everything else is common code.
//
// Timeline protocol. Each device has a timeline signal. timeline_value() is the next value to
// signal; work is submitted as wait(timeline, timeline_value() - 1) ... signal(timeline,
// next_timeline()), and "everything submitted so far is done" means timeline().value() >=
// timeline_value() - 1. Freed memory, signal slots and program code are retired by that value.
// Reserving a value and submitting the queue that signals it must not interleave with another
// thread doing the same on the same device (hold submission_mutex() when several threads submit).
#pragma once

#include "hcq/memory.hpp"
#include "hcq/program.hpp"
#include "hcq/queue.hpp"
#include "hcq/signal.hpp"
#include "hcq/types.hpp"

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace baregpu::hcq {

class Engine;
class SignalPool;
namespace detail {
class DeviceProfile;
}

struct DeviceLimits {
    uint32_t max_threads_per_group = 0;
    uint32_t max_shared_bytes = 0;   // workgroup-shared memory per workgroup
    uint32_t max_kernarg_bytes = 0;
    Dim3 max_grid;                   // workgroups per dimension
    uint64_t memory_bytes = 0;       // what allocations may map at once
    // The device's own memory is ordinary host memory (the cpu device): every buffer's cpu()
    // pointer is cached RAM the host may read and write directly once the device is idle.
    bool host_memory = false;
    // The device's engines reach host memory (BufferOptions::host) by DMA. False where the driver
    // keeps such buffers as copies it synchronizes over its link (drivers/am behind a USB bridge).
    bool host_dma = true;
    // A queue's wait(signal, v) compares circularly: done while signal - v, as a signed 64-bit number, is >= 0. A
    // signal more than 2^63 ahead of v reads as behind. Hardware whose only wait is wrap-aware (NVIDIA Hopper's
    // ACQ_CIRC_GEQ) sets it; otherwise waits compare as unsigned 64-bit numbers.
    bool circular_waits = false;
};

struct TransferOptions {
    // Between bus peers: the most bytes one peer mapping (one window of the destination's BAR)
    // covers; the transfer maps, copies and retires one window at a time. 0: 256 MiB.
    uint64_t window_bytes = 0;
};

class Device : public std::enable_shared_from_this<Device> {
public:
    virtual ~Device();
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;

    // "cpu", "cpu:1", "am:0000:03:00.0".
    const std::string& name() const { return name_; }
    // The ISA code objects must target: "x86_64", "gfx1100", "sm_89".
    const std::string& arch() const { return arch_; }
    const DeviceLimits& limits() const { return limits_; }
    // Devices of one peer group reach each other's memory and signals at the same addresses.
    const std::string& peer_group() const { return peer_group_; }

    // Queues. Throws DeviceLostError in the error state; UnsupportedError when the device has no
    // such engine.
    ComputeQueue compute_queue(size_t index = 0);
    CopyQueue copy_queue(size_t index = 0);
    size_t compute_engines() const { return compute_.size(); }
    size_t copy_engines() const { return copy_.size(); }

    Signal new_signal(uint64_t initial = 0, std::string name = {});
    // The name of the signal at `address` (this device's or another open one's), else its address.
    std::string signal_name(GpuVirtualAddress address);

    Signal& timeline() { return timeline_; }
    // The timeline's current value (0 before the timeline exists, during construction).
    uint64_t completed_timeline() const noexcept { return timeline_ ? timeline_.value() : 0; }
    uint64_t timeline_value() const { return timeline_value_.load(std::memory_order_acquire); }
    uint64_t next_timeline() { return timeline_value_.fetch_add(1, std::memory_order_acq_rel); }
    std::recursive_mutex& submission_mutex() { return submission_mutex_; }

    // Wait until everything submitted so far is done. On timeout the device enters its error
    // state (a hang) and TimeoutError is thrown.
    void synchronize(Duration timeout = default_timeout());

    Buffer allocate(uint64_t size, const BufferOptions& options = {});
    // [data, data + size) of host memory the caller owns, as a buffer of this device without a
    // copy, where the device can address it (the cpu device: its memory is the host's). `owner`
    // is kept until no submitted work can touch the memory, then released on whichever thread
    // retires it. Throws UnsupportedError naming the device when it cannot (GPUs, so far), or
    // when the range overlaps memory already mapped for it other than the same range imported.
    Buffer import_host_memory(std::byte* data, uint64_t size, std::shared_ptr<void> owner);
    // Load `kernel` from an ELF code object for arch(). Throws baregpu::Error naming what is
    // wrong with the object.
    std::shared_ptr<Program> load_program(std::span<const std::byte> code_object, std::string_view kernel);

    // Host <-> device copies through host-visible staging buffers on the copy queue: the host
    // fills or empties one slot while the device copies another. Any size and alignment. Both
    // are ordered after earlier work on the device's timeline. copy_in returns once `src` was
    // read (src may be reused at once); the device copy may still run, and later work that waits
    // on the timeline sees the data. copy_out returns when the data is in `dst`.
    void copy_in(const Buffer& dst, std::span<const std::byte> src);
    void copy_out(std::span<std::byte> dst, const Buffer& src);
    // Device-to-device copy on src's copy engine into dst mapped into src's device; dst's
    // timeline covers the transfer when it returns (no host wait). Same-device transfers are
    // plain copies. Across peer groups the devices must be bus peers (map_bus_peer): src's copy
    // engine writes into dst's memory through dst's BAR, window by window, and signals both
    // timelines. Throws UnsupportedError naming the reason when they are not.
    static void transfer(const Buffer& dst, const Buffer& src, uint64_t size);
    static void transfer(const Buffer& dst, const Buffer& src, uint64_t size, const TransferOptions& options);

    // Make `buffer` (owned by a peer) reachable by this device's engines at buffer.address().
    virtual void map_peer(const Buffer& buffer);

    // Bus peers: devices with separate GPU VA spaces (different vendors, or each GPU with its own
    // page tables) that reach each other's memory over PCIe — VRAM through the owner's BAR, host
    // memory through this device's IOMMU. Maps [address, address + size) of `owner`'s memory into
    // this device's peer window and returns where this device's engines reach `address`. The
    // mapping stays until this device's timeline passes the value given to the next
    // retire_bus_peer_mappings(). The base class refuses (UnsupportedError); the error of a backend
    // that can names why the platform cannot (small BAR, no peer access, root complexes).
    virtual GpuVirtualAddress map_bus_peer(Device& owner, GpuVirtualAddress address, uint64_t size);
    // The mappings made since the last call are no longer needed once the timeline reaches `value`.
    virtual void retire_bus_peer_mappings(uint64_t value) noexcept { (void)value; }

    // The clock of the link the device sits behind, in ns, where it is not the host's: a modelled
    // link (the simulated USB bridge) advances it by what each transfer would cost instead of
    // sleeping, so figures about transfers are read from it. nullopt: use the host's clock.
    virtual std::optional<uint64_t> link_clock_ns() { return std::nullopt; }

    // Device tick counter frequency (timestamps), in ticks per second.
    uint64_t timestamp_frequency() const { return timestamp_hz_; }

    // The error state. Set by a fault the device reports or by a hang (synchronize timeout);
    // from then on every call that touches the device throws DeviceLostError quoting it.
    bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
    std::string failure() const;
    void check_usable() const {
        if (failed()) throw_failed();
    }
    // Enter the error state (the first message wins) and wake every waiter.
    void fail(const std::string& message) noexcept;
    // Leave the error state without reopening the device, where the backend can: it resets its
    // queues (work in flight is lost; the timeline is set to timeline_value() - 1, so waits on
    // earlier values return) and the device takes work again. Throws UnsupportedError where the
    // backend cannot, and baregpu::Error when the reset itself fails.
    virtual void recover();

    // Read/write pointers of every engine, for error messages.
    std::string queue_state() const;

    MemoryManager& memory() { return *memory_; }

    // Hooks for Signal::wait (backend-specific sleeping) and Signal::set.
    // Sleep until some signal may have changed, the device failed, or deadline_ns (host_now_ns
    // clock) passed. May return early.
    virtual void sleep_for_signal(const SignalSlot& slot, uint64_t target, uint64_t deadline_ns) = 0;
    // The host wrote a signal: wake device queues that wait on signals.
    virtual void host_signal_written() noexcept = 0;
    // Before Signal::try_wait reads `slot` between sleeps and at its deadline: a backend whose
    // signal slots are host copies of device memory (drivers/am over USB) reads the device's value
    // into the slot here, and brings its other host copies up to date when it moved, so that what
    // the waiter reads next is at least as new. Others: nothing to do.
    virtual void refresh_signal(const SignalSlot& slot) noexcept { (void)slot; }

    detail::DeviceProfile* profile() const noexcept { return profile_.load(std::memory_order_acquire); }
    detail::DeviceProfile& ensure_profile();

    // What something beside the driver knows about the kernels an engine ran between two of its
    // timestamps (a simulated chip's interpreter: instructions by unit, bytes, modelled time), as
    // (name, value) pairs the profiler adds to each kernel's trace event. Set once, before the device
    // is used (the registry composes it for the devices whose models count).
    using ExecDetails = std::vector<std::pair<std::string, double>>;
    using ExecDetailsSource = std::function<ExecDetails(const Engine& engine, uint64_t begin_ticks, uint64_t end_ticks)>;
    void set_exec_details(ExecDetailsSource source) { exec_details_ = std::move(source); }
    const ExecDetailsSource& exec_details() const { return exec_details_; }

protected:
    Device(std::string name, std::string arch, DeviceLimits limits, std::string peer_group);

    struct Parts {
        MemoryBackend* memory = nullptr;
        GpuVirtualAddress va_base;
        uint64_t va_size = 0;
        std::vector<Engine*> compute;
        std::vector<Engine*> copy;
        uint64_t timestamp_hz = 1'000'000'000;
        uint64_t staging_slot_bytes = 2ull << 20;  // host<->device copies: slot size and count
        uint32_t staging_slots = 4;
    };
    // In a backend's constructor, before attach(): limits it learns only once it has asked the device.
    void set_limits(const DeviceLimits& limits) { limits_ = limits; }
    // In a backend's constructor, before its engines start: memory manager, signal pool, timeline.
    void attach(const Parts& parts);
    // The end of a backend's constructor, once its engines run (the profiler may submit now).
    void opened();
    // The start of a backend's destructor, while its engines still run: hand the profile over
    // and drop the internal queues.
    void begin_shutdown() noexcept;
    // Then, once its engines stopped: release what the common part owns while the backend's
    // memory still exists.
    void detach() noexcept;
    // For recover(): once the engines are reset, leave the error state and set the timeline to
    // timeline_value() - 1 (everything submitted counts as done; nothing more will run of it).
    void clear_failure() noexcept;

    virtual std::shared_ptr<Program> load_program_impl(std::span<const std::byte> code_object, std::string_view kernel) = 0;
    // Host <-> device copies for a backend whose link has its own staging memory (drivers/am
    // over a USB bridge: the bridge's SRAM, reached by bulk transfers). Called under the
    // submission mutex with the arguments checked; false: use the common staging slots. Same
    // contract as copy_in / copy_out (ordered after earlier work on the timeline).
    virtual bool copy_in_through_link(const Buffer& dst, std::span<const std::byte> src) {
        (void)dst, (void)src;
        return false;
    }
    virtual bool copy_out_through_link(std::span<std::byte> dst, const Buffer& src) {
        (void)dst, (void)src;
        return false;
    }
    // The queue copy_in / copy_out submit on (for the overrides above).
    CopyQueue& internal_copy_queue();
    // Free what the backend itself retires by timeline value (program slots, ...): everything
    // retired at or below `completed` may go. Called whenever the common part collects.
    virtual void collect_retired(uint64_t completed) noexcept { (void)completed; }

private:
    friend class Queue;
    friend class SignalPool;
    friend class detail::DeviceProfile;
    friend class Profiler;
    [[noreturn]] void throw_failed() const;
    static void bus_transfer(const Buffer& dst, const Buffer& src, uint64_t size, const TransferOptions& options);
    // Memory a failed or hung engine may still read: kept until the device is torn down.
    void quarantine(Buffer buffer) noexcept;
    void collect(uint64_t completed);
    Buffer allocate_internal(uint64_t size, const BufferOptions& options);
    std::shared_ptr<Device> handle();

    struct Staging;
    Staging& staging();
    ComputeQueue& internal_compute_queue();

    std::string name_;
    std::string arch_;
    ExecDetailsSource exec_details_;
    DeviceLimits limits_;
    std::string peer_group_;
    uint64_t timestamp_hz_ = 1'000'000'000;
    std::vector<Engine*> compute_;
    std::vector<Engine*> copy_;

    std::unique_ptr<MemoryManager> memory_;
    std::unique_ptr<SignalPool> signals_;
    Signal timeline_;
    alignas(64) std::atomic<uint64_t> timeline_value_{1};
    std::recursive_mutex submission_mutex_;
    std::optional<CopyQueue> internal_copy_;        // under submission_mutex_
    std::optional<ComputeQueue> internal_compute_;  // under submission_mutex_

    alignas(64) std::atomic<bool> failed_{false};
    mutable std::mutex failure_mutex_;
    std::string failure_;

    std::unique_ptr<Staging> staging_;  // under submission_mutex_
    std::mutex quarantine_mutex_;
    std::vector<Buffer> quarantine_;
    uint64_t staging_slot_bytes_ = 2ull << 20;
    uint32_t staging_slots_ = 4;

    std::atomic<detail::DeviceProfile*> profile_{nullptr};
    std::mutex profile_mutex_;
    std::unique_ptr<detail::DeviceProfile> profile_owner_;
};

}  // namespace baregpu::hcq
