// The simulated AD102's channel engines: one engine thread that plays the PBDMA for every
// registered GPFIFO channel (pbdma.cpp) and the engines behind its subchannels — the copy engine
// AMPERE_DMA_COPY_A/B (copy_engine.cpp) and the compute class (compute_engine.cpp, QMD V03 launches
// of host-code kernels). Every memory access goes through the MMU (mmu.hpp) with the channel's
// page directory. A bad method, an unknown class or an MMU fault stops the channel and keeps an
// EngineFault for the RM model to report; other channels go on.
//
// Threading: doorbell() only queues the token and wakes the engine thread, as the USERMODE
// doorbell does on hardware (clc361.h NVC361_NOTIFY_CHANNEL_PENDING); it takes its own small lock,
// never the one the engine thread holds while it executes, so a BAR0 write does not wait for a
// kernel or a long copy to finish; while a kernel's CTAs run the engine lock is released too, so
// status queries and waits keep their timeouts (unregister / reset wait for the kernel). The thread runs channels
// until each is idle (GPGet == GPPut), faulted, or waiting on a semaphore acquire; waiting channels
// are re-polled (hardware re-checks an acquire on a timer, clc56f.h SEM_EXECUTE ACQ_*). Waits in
// the API take a timeout and return false when it passes.
#pragma once

#include "channel.hpp"
#include "drivers/hostcode/grid_launcher.hpp"
#include "drivers/hostcode/loaded_object.hpp"
#include "mmu.hpp"

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace baregpu::sim::nvgpu {

class GpuEngines {
public:
    // `vram`: the model's VRAM; `port`: the bus (system memory, time), may be null in unit tests.
    GpuEngines(std::string device, std::span<std::byte> vram, pci::sim::SimPort* port);
    ~GpuEngines();
    GpuEngines(const GpuEngines&) = delete;
    GpuEngines& operator=(const GpuEngines&) = delete;

    // The RM model calls these when a channel is allocated / freed. `token` is the channel's work
    // submit token (what the driver writes to the doorbell). Throws baregpu::Error for a token in use
    // or a ring of zero entries.
    void register_channel(uint32_t token, ChannelState state);
    void unregister_channel(uint32_t token);
    // Power-on state: every channel forgotten (a function reset). Waits for the engine thread's pass.
    void reset();

    // The doorbell: the channel has new GP entries. Returns false (and does nothing) for an unknown token.
    bool doorbell(uint32_t token);

    std::optional<EngineFault> fault(uint32_t token) const;
    ChannelStatus status(uint32_t token) const;
    uint32_t gp_get(uint32_t token) const;           // the PBDMA's GPGet (also written to USERD)
    uint64_t nonstall_interrupts(uint32_t token) const;
    uint64_t kernels_launched(uint32_t token) const;

    // Waits until the channel has executed everything up to GPPut, or faulted. false on timeout.
    bool wait_idle(uint32_t token, std::chrono::milliseconds timeout) const;
    // Waits until the channel reaches `status`. false on timeout.
    bool wait_status(uint32_t token, ChannelStatus status, std::chrono::milliseconds timeout) const;

    const Mmu& mmu() const { return mmu_; }

    // A cubin this GPU was given (what a CUDA program would hand the driver): the model reads its kernels' .text,
    // .nv.info and .nv.shared itself, so that a launch whose PROGRAM_ADDRESS holds one of those kernels is checked
    // against what the SASS needs (its SM, registers, barriers, shared memory, parameter bank). SASS is not
    // executed: a launch that passes counts in cubin_launches() and releases its semaphores. Throws baregpu::Error
    // for a file that is not an EM_CUDA ELF64.
    void add_cubin(std::span<const std::byte> elf);
    uint64_t cubin_launches() const;
    struct CubinKernelFacts {
        std::string name;
        uint32_t sm = 0, registers = 0, barriers = 0, shared_bytes = 0, param_offset = 0, param_size = 0;
        std::vector<std::byte> text_head;  // the first bytes of its SASS, to recognise it at PROGRAM_ADDRESS
    };

    // Optional hooks, called on the engine thread without the engines' lock: a non-stall
    // interrupt (NON_STALL_INTERRUPT, CE LAUNCH_DMA INTERRUPT_TYPE) and a channel fault.
    void set_hooks(std::function<void(uint32_t token)> nonstall, std::function<void(const EngineFault&)> fault);

    struct Channel;  // internal

private:
    enum class Step { ok, blocked, fault };

    std::string device_;
    std::span<std::byte> vram_;
    pci::sim::SimPort* port_;
    Mmu mmu_;
    mutable std::mutex mutex_;  // channels_ and everything the engine thread executes with
    // The doorbell side (lock order: mutex_ before bell_mutex_; the engine thread never holds both while waiting).
    mutable std::mutex bell_mutex_;
    std::condition_variable bell_cv_;
    std::set<uint32_t> tokens_;   // registered channels, for doorbell()'s answer
    std::vector<uint32_t> rung_;  // doorbells not yet taken by the engine thread
    // What the engine thread took (swapped with rung_, cleared after use): the two buffers keep their
    // capacity, so a doorbell (on the ringing CPU thread) does not allocate once warmed up.
    std::vector<uint32_t> rung_taken_;
    bool stop_ = false;           // under bell_mutex_
    mutable std::condition_variable progress_cv_;
    std::map<uint32_t, std::unique_ptr<Channel>> channels_;
    std::function<void(uint32_t)> on_nonstall_;
    std::function<void(const EngineFault&)> on_fault_;
    std::vector<uint32_t> nonstall_pending_;
    std::vector<EngineFault> faults_pending_;
    hostcode::GridLauncher launcher_;
    std::map<std::pair<uint64_t, uint64_t>, std::shared_ptr<hostcode::LoadedObject>> images_;  // (image_va, image_hash)
    std::unique_lock<std::mutex>* engine_lock_ = nullptr;  // the engine thread's hold on mutex_
    bool kernel_running_ = false;  // mutex_ is released while CTAs run; channels stay put meanwhile
    std::thread thread_;
    std::vector<CubinKernelFacts> cubin_kernels_;  // under mutex_
    uint64_t cubin_launches_ = 0;
    // The copy engine's staging buffer (engine thread only), kept at its largest size: a new one per
    // copy zero-filled and faulted in fresh pages, an eighth of an acceptance run's time.
    std::vector<std::byte> copy_staging_;

    void engine_thread();
    const Channel& channel(uint32_t token) const;
    bool rung(uint32_t token) const;  // a doorbell for token waits for the engine thread
    uint64_t now_ns() const;

    // pbdma.cpp
    void run_channel(Channel& c);
    Step method(Channel& c, unsigned subchannel, uint32_t method, uint32_t data);
    Step host_method(Channel& c, unsigned subchannel, uint32_t method, uint32_t data);
    Step sem_execute(Channel& c, uint32_t data);
    Step stop(Channel& c, EngineFault f);
    Step mmu_fault(Channel& c, const MmuFault& f, const char* during);
    bool read64(Channel& c, uint64_t va, uint64_t& out, const char* during);
    bool write_bytes(Channel& c, uint64_t va, std::span<const std::byte> data, const char* during);
    bool read_userd(Channel& c, uint64_t offset, uint32_t& out, const char* during);
    bool write_userd(Channel& c, uint64_t offset, uint32_t value, const char* during);

    // copy_engine.cpp
    Step copy_method(Channel& c, unsigned subchannel, uint32_t method, uint32_t data);
    // compute_engine.cpp
    Step compute_method(Channel& c, unsigned subchannel, uint32_t method, uint32_t data);
    Step launch_qmd(Channel& c, unsigned subchannel, uint64_t qmd_va, unsigned depth);
    std::shared_ptr<hostcode::LoadedObject> load_image(Channel& c, uint64_t image_va, uint64_t image_size, uint64_t image_hash,
                                          std::string& what);
};

}  // namespace baregpu::sim::nvgpu
