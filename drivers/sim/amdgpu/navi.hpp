// A strict simulated AMD Navi31 (RX 7900 XTX) or Navi48 (RX 9070 XT) for the simulated PCI bus:
// the registers, firmware handshakes and memory structures a kernel-bypass driver (drivers/am,
// tinygrad's runtime/support/am) meets during bring-up, each checked the way the chip or its firmware checks it.
//
// BARs: BAR0 = VRAM (64-bit prefetchable, 1 GiB — real boards have 24 / 16 GiB; the model's
// VRAM is its state file's), BAR2 = doorbells (2 MiB; 64-bit writes at an active compute
// queue's or SDMA0 queue 0's slot kick that engine, pm4_engine.hpp / sdma_engine.hpp), BAR5 = MMIO registers (1 MiB).
// The engines run asynchronously, as on hardware: a doorbell write only records the kick and
// wakes the model's engine thread, which runs the kicked queues (compute dispatches execute as
// host code, host_exec.hpp) and re-polls every waiting queue every ~30 µs of real time. State lives in a MAP_SHARED file
// (state_file.hpp) so it survives the model, the bus and the process. What is modelled and what
// is not: README.md next to this file.
#pragma once

#include "drivers/pci/sim_device_model.hpp"
#include "drivers/sim/amdgpu/asic.hpp"
#include "drivers/sim/amdgpu/gmc.hpp"
#include "drivers/sim/amdgpu/native_exec.hpp"
#include "drivers/sim/amdgpu/pm4_engine.hpp"
#include "drivers/sim/amdgpu/sdma_engine.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace baregpu::sim::amdgpu {

struct ModelOptions {
    Asic asic = Asic::navi31;
    std::string state_dir;     // empty: $BAREGPU_SIM_STATE_DIR or /tmp/baregpu-sim-<uid>
    std::string firmware_dir;  // where the PSP finds the known-good files; empty: the simulated devices' search path (drivers/sim/firmware_path.hpp)
    // A chip nobody else can see: its state lives in anonymous memory (no state file is created,
    // opened or mapped; state_dir is ignored) and is gone with the model. Always powered on. For
    // looking at what the chip presents on the bus (`baregpu devices`) without touching, or
    // creating, the state a driver in another process may be using.
    bool ephemeral = false;
};

std::unique_ptr<pci::sim::SimDeviceModel> make_model(const ModelOptions& options);

class NaviModel final : public pci::sim::SimDeviceModel {
public:
    explicit NaviModel(const ModelOptions& options);
    ~NaviModel() override;

    pci::sim::DeviceSpec spec() const override;
    void connect(pci::sim::SimPort& port) override;
    void disconnect() override { stop_engines(); }
    uint64_t mmio_read(unsigned bar, uint64_t offset, unsigned width) override;
    void mmio_write(unsigned bar, uint64_t offset, unsigned width, uint64_t value) override;
    // Navi dGPUs advertise no FLR (spec: function_level_reset = false): never called by the bus.
    void function_reset() override {}
    // A USB link's host observes device memory: let the engines run to idle or a memory wait first
    // (at once when nothing is queued, running or waiting: the driver reading back its own page
    // tables must not pay an engine pass per dword).
    void settle(std::chrono::milliseconds bound) override;

    // ---- fault injection and test hooks ----
    // The SMU stops answering messages (both mailboxes) until cleared or power_cycle().
    void inject_smu_hang(bool hang);
    // The next PSP ring command with this GFX_CMD_ID answers `status` instead of executing.
    void inject_psp_error(uint32_t gfx_cmd_id, uint32_t status);
    // What an engine does when it touches GPU virtual address `va` in VMID 0: translated through
    // the hub's page table (or the system aperture); an unmapped or read-only target raises a
    // protection fault (latched status + address, an IH entry) and returns false.
    bool gpu_access(uint64_t va, size_t bytes, bool write, VmClient client = VmClient::gfx);
    bool gpu_read(uint64_t va, std::span<std::byte> out, VmClient client = VmClient::gfx);
    bool gpu_write(uint64_t va, std::span<const std::byte> data, VmClient client = VmClient::gfx);
    // When set, called for every DISPATCH_DIRECT a compute queue executes INSTEAD of running the
    // kernel (host_exec.hpp), on the engine thread with the model's lock held: the hook must not
    // call back into the model. An empty hook restores execution.
    void set_dispatch_hook(DispatchHook hook);
    // What the last dispatch of the chip's own machine code did (native_exec.hpp): counts and time.
    NativeDispatchReport native_report() const;
    // Every native dispatch's counts and modelled time, summed.
    NativeDispatchReport native_totals() const;
    // What MEC1 pipe `pipe` queue `queue` ran between two GPU timestamps (NativeExecutor::between).
    NativeDispatchReport native_between(uint32_t pipe, uint32_t queue, uint64_t begin_ticks, uint64_t end_ticks) const;
    // While set, a compute dispatch never completes: its queue stays on the DISPATCH_DIRECT
    // (rptr does not pass it, nothing after it runs, status().waiting) until cleared, or until
    // the queue is dequeued or the chip reset.
    void inject_dispatch_hang(bool hang);
    // Blocks until the engine thread has finished a pass begun after this call with no doorbell
    // pending: every engine is then idle, hung, or waiting on something not yet true. For tests
    // that want deterministic completion; false on timeout.
    bool wait_engines_idle(std::chrono::milliseconds timeout = std::chrono::seconds(10));
    using ComputeQueueStatus = ComputeEngine::QueueStatus;
    using SdmaQueueStatus = SdmaEngine::Status;
    ComputeQueueStatus compute_queue(uint32_t pipe, uint32_t queue) const;  // MEC 1
    SdmaQueueStatus sdma_queue() const;                                       // SDMA0 queue 0
    // Latches a GC VM protection fault as an unmapped access would (without needing one).
    void latch_vm_fault(uint64_t va = 0xDEADBEEF000ull);
    // Cold power cycle: every register, every block and VRAM back to power-on.
    void power_cycle();

    // ---- introspection for tests ----
    Asic asic() const { return options_.asic; }
    const std::filesystem::path& state_path() const;
    bool powered_on_at_open() const { return powered_on_at_open_; }
    uint32_t register_value(uint32_t dword_address);  // what a BAR5/RSMU read would return
    uint32_t hdp_flushes() const;
    // SetSoftMinByFreq / SetSoftMaxByFreq as the SMU last took them for PPCLK `clock` (0: never
    // set), and the frequency the metrics table reports for it.
    struct ClockState {
        uint32_t soft_min_mhz, soft_max_mhz, current_mhz;
    };
    ClockState smu_clock(uint32_t clock) const;
    uint32_t tlb_invalidations(VmClient hub) const;
    uint32_t mode1_resets() const;
    uint32_t ih_entries_written() const;
    // Doorbells no engine took: no S2A route, outside CP_MEC_DOORBELL_RANGE, or a halted SDMA.
    uint32_t dropped_doorbells() const;
    // The catalog's name for a register (register_catalog.hpp), or "register 0x... (BAR5+0x...)".
    std::string register_name(uint32_t dword_address) const;

private:
    struct Impl;
    void power_on(bool keep_vram);
    void mode1_reset();
    void engine_loop();
    void stop_engines();  // joins the engine thread (idempotent): doorbells are then only recorded
    void request_pass();
    void trace_write(uint32_t address, uint32_t value, const char* via);
    std::FILE* trace_out_ = nullptr;  // BAREGPU_SIM_TRACE=regs

    ModelOptions options_;
    // The chip: registers, blocks, engines (not the doorbell kicks). The engine thread releases
    // it while a kernel's workgroups run (HostExecutor::unlocked).
    mutable std::mutex mutex_;
    std::unique_ptr<Impl> impl_;
    bool powered_on_at_open_ = false;

    // The engine thread. A BAR2 write appends to kicks_ under kick_mutex_ only, so a doorbell never
    // waits for a running kernel; the thread takes mutex_ to run the engines.
    struct Kick {
        uint64_t offset;
        unsigned width;
        uint64_t value;
    };
    std::mutex kick_mutex_;
    std::condition_variable kick_cv_, idle_cv_;
    std::vector<Kick> kicks_;
    std::map<uint64_t, uint32_t> doorbell_high_;  // high dwords of 64-bit doorbells written alone (BAR2 offset of the doorbell)
    bool stop_ = false, polling_ = false, in_pass_ = false;
    uint64_t requested_pass_ = 0, completed_pass_ = 0;
    std::thread engine_;  // last: started after everything it uses, joined first
};

}  // namespace baregpu::sim::amdgpu
