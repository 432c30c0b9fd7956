// The host CPU as an HCQ device. Queues are rings in device memory consumed by command
// processor threads (one for compute, one for copies); exec runs workgroups on a thread pool
// with one thread per core; signals and timestamps are written by the command processors as a
// GPU's would be; code objects are x86-64 ELF relocatable objects placed and relocated by our
// own loader (drivers/hostcode/elf_loader.hpp) into the device's address space.
//
// Names: "cpu" and "cpu:N" (independent instances; all CPU devices are one peer group).
// Options (?key=value&...): threads (pool size, default: cores, at most 1024), ring (bytes per
// queue ring, a power of two from 4K to 1G, default 1M), va (address window, default 64G), memory (bytes that may be
// mapped, default half of RAM), staging / staging_slots (copy_in/copy_out slots, default 2M x 4),
// clock_skew_ppm / clock_offset (make the tick counter run fast/slow and start elsewhere, to
// test clock conversion), profile_log (1: the command processors log exec/copy/wait times
// themselves while profiling, the default; 0: the profiler puts timestamp packets around them).
#pragma once

#include "drivers/cpu/address_space.hpp"
#include "drivers/cpu/command_processor.hpp"
#include "drivers/cpu/wake_word.hpp"
#include "drivers/hostcode/thread_pool.hpp"
#include "hcq/device.hpp"
#include "hcq/registry.hpp"

#include <array>
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>

namespace baregpu::cpu {

using hostcode::ThreadPool;

class CpuDevice final : public hcq::Device, private hcq::MemoryBackend {
    struct Token {};

public:
    struct Config {
        unsigned threads = 0;                    // 0: one per core
        uint64_t ring_bytes = 1ull << 20;
        uint64_t va_bytes = 64ull << 30;
        uint64_t memory_bytes = 0;               // 0: half of RAM
        uint64_t staging_bytes = 2ull << 20;
        uint32_t staging_slots = 4;
        int64_t clock_skew_ppm = 0;
        uint64_t clock_offset = 0;
        bool profile_log = true;  // the command processors log their own execution when profiling
    };
    static constexpr uint32_t kMaxSharedBytes = 64 * 1024;
    static constexpr uint32_t kProgramSlots = 4096;
    // Stack a kernel may ask for beyond the ABI's 64 KiB (private_bytes). Workgroups run on the
    // command processor and pool threads, whose stacks are the process default (8 MiB on
    // Debian); this leaves most of it to the runtime.
    static constexpr uint32_t kMaxPrivateBytes = 1u << 20;

    // A program-table slot, as the command processors read it. Every field is written before
    // `entry` is published; a reader that matched entry and generation sees them.
    struct LoadedProgram {
        std::atomic<uint64_t> entry{0};       // 0: free
        std::atomic<uint32_t> generation{0};
        std::atomic<uint32_t> name{0};        // profiler string id
        std::atomic<uint32_t> kernarg_size{0};
        std::atomic<uint32_t> shared_bytes{0};
        std::atomic<uint32_t> max_threads{0};
        std::atomic<uint32_t> num_buffers{0};  // u64 buffer addresses leading the kernel arguments
    };

    // Throws baregpu::Error for a bad name or option.
    static std::shared_ptr<CpuDevice> open(const hcq::DeviceUri& uri);
    // Throws baregpu::Error for a configuration outside the limits open() documents.
    static std::shared_ptr<CpuDevice> create(std::string name, const Config& config);

    CpuDevice(Token, std::string name, const Config& config);
    ~CpuDevice() override;

    // The tick counter timestamps read: nanoseconds of CLOCK_MONOTONIC, skewed by the clock options.
    uint64_t ticks() const noexcept;

    void sleep_for_signal(const hcq::SignalSlot& slot, uint64_t target, uint64_t deadline_ns) override;
    void host_signal_written() noexcept override { signal_event().notify(); }
    // Restarts both command processors past everything submitted (a fault stops a queue where it is).
    void recover() override;
    void map_peer(const hcq::Buffer& buffer) override;

    // For the command processors: the program an exec names, or nullptr when none is loaded
    // there. `handle` = slot | generation << 12, as CpuProgram::slot() gives it: a slot reused
    // by a later program (perhaps at the same address) never matches an exec recorded for the
    // earlier one.
    const LoadedProgram* program(uint32_t handle, uint64_t entry) const noexcept {
        const LoadedProgram& p = programs_[handle & (kProgramSlots - 1)];
        if (entry == 0 || p.entry.load(std::memory_order_acquire) != entry ||
            p.generation.load(std::memory_order_acquire) != (handle >> 12)) {
            return nullptr;
        }
        return &p;
    }
    ThreadPool& pool() { return *pool_; }
    // The profiler's name id of the program behind an exec's handle ("kernel (unloaded)" when
    // its slot was reused since).
    uint32_t program_name(uint32_t handle) const noexcept;
    std::byte* shared_memory(unsigned thread) { return shared_base_ + size_t(thread) * kMaxSharedBytes; }
    // Bumped whenever any CPU device's queue or the host writes a signal.
    static WakeWord& signal_event();

    // A loaded program's image and slot go back here when the program is dropped; both are
    // reused once the timeline passed every submission made until then.
    void retire_program(uint32_t slot, hcq::Buffer image) noexcept;

private:
    std::shared_ptr<hcq::Program> load_program_impl(std::span<const std::byte> code_object, std::string_view kernel) override;
    std::byte* map_memory(GpuVirtualAddress va, uint64_t size, uint64_t page_size, const hcq::BufferOptions& options) override;
    void unmap_memory(GpuVirtualAddress va, uint64_t size, std::byte* cpu) noexcept override;
    // Host memory is this device's memory: an import's device address is its own.
    std::optional<GpuVirtualAddress> map_host_memory(std::byte* data, uint64_t size) override;
    void unmap_host_memory(GpuVirtualAddress va, uint64_t size) noexcept override;
    void collect_retired(uint64_t completed) noexcept override;
    // Returns the handle (slot | generation << 12).
    uint32_t allocate_program_slot();
    void reclaim_programs_locked(uint64_t completed) noexcept;

    Config config_;
    uint64_t clock_origin_;
    AddressSpace space_;
    std::unique_ptr<ThreadPool> pool_;
    std::vector<std::byte> shared_;  // kMaxSharedBytes per pool thread
    std::byte* shared_base_ = nullptr;  // shared_, 64-byte aligned
    std::array<LoadedProgram, kProgramSlots> programs_{};

    std::mutex programs_mutex_;
    std::vector<uint32_t> free_slots_;
    struct RetiredProgram {
        uint64_t timeline_value;
        uint32_t slot;
        hcq::Buffer image;
    };
    std::deque<RetiredProgram> retired_programs_;

    hcq::Buffer compute_ring_, copy_ring_;
    std::unique_ptr<CommandProcessor> compute_, copy_;
};

// Registers the "cpu" scheme. drivers/registry.cpp calls it for every build.
void register_cpu_backend(hcq::Registry& registry);

}  // namespace baregpu::cpu
