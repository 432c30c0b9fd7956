// The simulated GSP-RM as the driver meets it over the message queues: it reads the LibOS
// arguments and RMARGS from host memory through the device's DMA path, finds the command and
// status queues, takes the pre-queued GSP_SET_SYSTEM_INFO and SET_REGISTRY, asks the CPU to run
// one CPU-sequencer script (GSP_RUN_CPU_SEQUENCER), and once the CPU resumes it reports
// GSP_INIT_DONE. After that it answers RPCs through a GspRpcServer. The queue format is
// drivers/nvshared/gsp_msgq (the same code the driver uses; a bug there is shared, which the
// queue's own unit tests against the header layouts guard).
// Layouts (open-gpu-kernel-modules 570.144):
//   libos_init_args.h   LibosMemoryRegionInitArgument {id8, pa, size, kind u8, loc u8} (32 bytes),
//                       LIBOS_MEMORY_REGION_CONTIGUOUS = 1, _LOC_SYSMEM = 1
//   gsp_init_args.h     MESSAGE_QUEUE_INIT_ARGUMENTS {sharedMemPhysAddr u64 +0, pageTableEntryCount u32 +8,
//                       cmdQueueOffset +16, statQueueOffset +24}; GSP_ARGUMENTS_CACHED {mq +0, srInit +32,
//                       gpuInstance +44, bDmemStack +48, profilerArgs +56} (72 bytes)
//   gsp_static_config.h GspSystemInfo (0x3a0 bytes; PCIDeviceID +0x58)
//   rpc_global_enums.h  function / event numbers (gsp_rm.cpp)
//   g_rpc-structures.h  rpc_run_cpu_sequencer_v17_00 {bufferSizeDWord, cmdIndex, regSaveArea[8]} (40 bytes),
//                       rpc_unloading_guest_driver_v1F_07 {bInPMTransition, bGc6Entering, newLevel +4}
//   rmgspseq.h          GSP_SEQ_BUF_OPCODE 0..8, REG_MODIFY {addr; mask; val}
#pragma once

#include "drivers/pci/sim_device_model.hpp"
#include "drivers/nvshared/gsp_msgq.hpp"
#include "falcon.hpp"
#include "gsp_rpc_server.hpp"

#include <cstdint>
#include <map>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::sim::nvgpu {

// The model's sequencer script: registers of its own scratch space the CPU must touch, and what
// each must hold after a correct run. Not GSP-RM's real script (that one drives the falcons).
struct SequencerScript {
    static constexpr uint32_t kWriteReg = 0x118400, kWriteVal = 0x5eed0001;
    static constexpr uint32_t kModifyReg = 0x118404, kModifyInitial = 0xffff0000;
    static constexpr uint32_t kModifyMask = 0x0000ff00, kModifyVal = 0x00001200;  // (old & ~mask) | val = 0xffff1200
    static constexpr uint32_t kModifyExpected = 0xffff1200;
    static constexpr uint32_t kPollReg = 0x118408;  // reads 1 after the CPU has polled it twice
};

class GspRmModel {
public:
    GspRmModel(pci::sim::SimPort* port, ViolationSink violation) : port_(port), violation_(std::move(violation)) {}

    void set_server(std::shared_ptr<GspRpcServer> server) { server_ = std::move(server); }
    void reset();  // power-on: not running, nothing mapped
    bool running() const { return state_ != State::Off; }
    bool initialized() const { return state_ == State::Serving; }
    bool unloaded() const { return unloaded_; }
    bool awaiting_resume() const { return state_ == State::AwaitingResume; }
    uint64_t libos_args() const { return libos_args_; }

    // The booter handed over: LibOS arguments at this bus address. Returns false (and records
    // why) when the arguments or queues cannot be used.
    bool start(uint64_t libos_args);
    // The CPU ran the sequencer's CORE_RESUME (SEC2 restarted, GSP handed over): check what the
    // script should have left in the registers (regs: the model's register file) and report
    // GSP_INIT_DONE.
    void resume(std::map<uint32_t, uint32_t>& regs);
    // The CPU rang NV_PGSP_QUEUE_HEAD(0): serve every RPC in the command queue.
    void doorbell();
    // Posts an asynchronous event into the status queue now (tests: OS_ERROR_LOG, MMU_FAULT_QUEUED).
    void post_event(uint32_t function, std::span<const std::byte> payload);

    // Fault knobs.
    void corrupt_next_reply() { corrupt_next_ = true; }
    void stop_replying(bool stop) { silent_ = stop; }
    uint32_t poll_reads_left = 2;

    std::vector<uint32_t> functions_seen() const { return seen_; }
    std::vector<std::string> registry_keys() const { return registry_keys_; }

private:
    enum class State { Off, AwaitingResume, Serving };
    void consume_boot_rpcs();
    bool serve(const nv::gsp::RpcMessage& request);  // false once GSP-RM has unloaded
    void reply(const nv::gsp::RpcMessage& request, uint32_t rpc_result, std::span<const std::byte> payload);
    // Runs `use` on the queues while the CPU keeps their memory mapped (pci::sim::SimPort::
    // with_host_memory). false once it is gone (a failed device torn down without GSP_UNLOAD):
    // GSP-RM stops, as real GSP's queue writes would then fault in the IOMMU.
    bool on_queues(const std::function<void()>& use);
    void bad(const std::string& what, const std::string& where, const std::string& source) { violation_(what, where, source); }

    pci::sim::SimPort* port_;
    ViolationSink violation_;
    std::shared_ptr<GspRpcServer> server_;
    State state_ = State::Off;
    bool unloaded_ = false;
    uint64_t libos_args_ = 0;
    bool corrupt_next_ = false, silent_ = false;
    static constexpr uint32_t kReplySequenceBase = 0x5000;  // far from any request's sequence
    uint32_t replies_ = 0;
    uint64_t queue_bus_ = 0, queue_bytes_ = 0;  // the shared region the queues live in
    std::byte* queue_base_ = nullptr;
    std::span<std::byte> cmd_store_, stat_store_;
    std::optional<nv::gsp::MsgqReader> cmd_;
    std::optional<nv::gsp::MsgqWriter> stat_;
    std::vector<uint32_t> seen_;
    std::vector<std::string> registry_keys_;
    uint16_t device_id_ = 0;

public:
    void set_device_id(uint16_t id) { device_id_ = id; }
};

}  // namespace baregpu::sim::nvgpu
