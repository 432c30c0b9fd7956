// A simulated KGSL device (/dev/kgsl-3d0 of an Adreno 630) behind the same calls a process makes
// of the kernel: open/close/ioctl/mmap/munmap. It keeps GPU objects (host memory; with
// KGSL_MEMFLAGS_USE_CPU_MAP the GPU address is where the object is mmapped: SVM), draw contexts
// with per-context timestamps, and one A630 command processor thread per context that decodes and
// validates every PM4 packet of the IBs submitted with IOCTL_KGSL_GPU_COMMAND and executes them
// (a630_cp.cpp), compute dispatches as host code (drivers/hostcode).
//
// Like KGSL with KGSL_CONTEXT_NO_FAULT_TOLERANCE: a GPU fault (bad packet, unknown opcode, write
// to a protected register, access to unmapped memory) invalidates the context: its remaining work
// never retires, IOCTL_KGSL_GPU_COMMAND and waits on it fail with EDEADLK, and kernel_log() holds
// what the kernel would have logged. Fault injection: hang a context (its CP stops before its next
// submission until released), fault a context, fail waits with an errno.
//
// Not modelled: GMEM, preemption, power management, sync objects, KGSL timestamps wrapping.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

namespace baregpu::hostcode {
class ThreadPool;
}

namespace baregpu::sim::kgsl {

class HostKernels;

// A GPU address range KGSL maps SVM objects in: [begin, end).
struct SvmRange {
    uint64_t begin = 0, end = 0;
};
// The ranges of the kernel the model plays (KGSL_IOMMU_SVM_BASE64/END64 of qualcomm-linux/kgsl
// kgsl_iommu.h: 64-256 GiB), or with `legacy` those of older Android msm kernels' kgsl_iommu.h
// (0x7_0000_0000-0x8_0000_0000, 4 GiB). The model's GPU addresses are host addresses, and on
// x86-64 AddressSanitizer keeps everything from about 2 GiB to 2 TiB as its shadow gap: a
// sanitizer build moves both ranges up by kSanitizerSvmShift (same sizes, same rules), and the
// process tells its driver so.
SvmRange kgsl_svm_range(bool legacy);
#if defined(__SANITIZE_ADDRESS__)
#define BAREGPU_SIM_KGSL_SHIFTED_SVM 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BAREGPU_SIM_KGSL_SHIFTED_SVM 1
#endif
#endif
#ifdef BAREGPU_SIM_KGSL_SHIFTED_SVM
inline constexpr uint64_t kSanitizerSvmShift = 0x5000'0000'0000;
#else
inline constexpr uint64_t kSanitizerSvmShift = 0;
#endif

class SimKgsl {
public:
    struct Options {
        uint32_t chip_id = 0x06030000;  // Adreno 630: core 6, major 3, minor 0 (A730: 0x07030001)
        SvmRange svm = kgsl_svm_range(false);
        // adreno_dispatch.c, both sysfs tunables (dispatcher/context_drawqueue_size,
        // context_queue_wait): a context queues at most drawqueue_size - 1 submissions the CP has
        // not started; GPU_COMMAND then sleeps until there is room, at most queue_wait_ms, and
        // fails with ETIMEDOUT (_wait_for_room_in_context_queue). A test lowers queue_wait_ms as an
        // administrator would, so a full queue costs milliseconds, not the default 10 s.
        uint32_t drawqueue_size = 50;
        uint32_t queue_wait_ms = 10000;
    };
    explicit SimKgsl(Options options);
    ~SimKgsl();
    SimKgsl(const SimKgsl&) = delete;
    SimKgsl& operator=(const SimKgsl&) = delete;

    // The process's view (libc conventions; errors returned through `err`).
    int open(const char* path, int flags, int& err);
    int close(int fd);
    int ioctl(int fd, unsigned long request, void* arg, int& err);
    void* mmap(void* addr, uint64_t length, int prot, int flags, int fd, uint64_t offset, int& err);
    int munmap(void* addr, uint64_t length);
    // What the kernel logged about a context ("" when nothing).
    std::string kernel_log(uint32_t context_id);

    // Fault injection (0 = every context that exists now and later).
    void hang_context(uint32_t context_id, bool hang);
    void fault_context(uint32_t context_id, const std::string& why);
    // Waits fail with `err` (an errno) until set back to 0.
    void fail_waits(int err) { fail_waits_.store(err, std::memory_order_release); }
    std::vector<uint32_t> contexts();
    // GPU faults seen so far (all contexts).
    uint64_t faults() const { return faults_.load(std::memory_order_acquire); }

    uint32_t chip_id() const { return options_.chip_id; }
    const SvmRange& svm() const { return options_.svm; }
    const Options& options() const { return options_; }
    // DRAWCTXT_DESTROY of a context whose started IB never retired: KGSL waits 30 s for it
    // (adreno_drawctxt.c wait_for_timestamp_rb), raises ADRENO_CTX_DETATCH_TIMEOUT_FAULT and the
    // dispatcher resets the GPU. The model does not sleep: it counts the time the ioctl would have
    // blocked and the resets.
    uint64_t detach_stall_ms() const { return detach_stall_ms_.load(std::memory_order_acquire); }
    uint64_t gpu_resets() const { return gpu_resets_.load(std::memory_order_acquire); }
    // GPU_COMMANDs that found their context's drawqueue full and had to sleep.
    uint64_t drawqueue_waits() const { return drawqueue_waits_.load(std::memory_order_acquire); }
    // A7xx (chip_id core 7): CP_EVENT_WRITE7 and the moved SP_CS_* registers.
    bool a7xx() const { return (options_.chip_id >> 24) >= 7; }
    // For the command processors: is [va, va + bytes) inside one mapped GPU object?
    bool mapped(uint64_t va, uint64_t bytes);
    // Reads a dword of GPU memory, false when it is not mapped (checked and read under the memory
    // lock: the process may free memory a hung context polls).
    bool load_mapped(uint64_t va, uint32_t& value);
    // The always-on counter: 19.2 MHz, from CLOCK_MONOTONIC.
    static uint64_t always_on_counter();
    HostKernels& kernels() { return *kernels_; }

    struct Context;

private:
    struct Object {
        uint32_t id = 0;
        uint64_t size = 0;
        uint64_t flags = 0;
        uint64_t gpuaddr = 0;  // 0 until mmapped
        bool user = false;     // MAP_USER_MEM: the process's own pages
    };
    std::shared_ptr<Context> context(uint32_t id);
    int ioctl_locked(unsigned long request, void* arg);
    int gpu_command(void* arg);
    int wait_timestamp(void* arg);

    Options options_;
    std::mutex mutex_;  // fds, contexts
    std::vector<int> fds_;
    int next_fd_ = 1000;
    std::shared_mutex memory_mutex_;
    std::map<uint32_t, Object> objects_;         // by id
    std::map<uint64_t, uint64_t> mapped_;        // gpuaddr -> end (under memory_mutex_)
    uint32_t next_object_ = 1;
    std::map<uint32_t, std::shared_ptr<Context>> contexts_;
    uint32_t next_context_ = 1;
    bool hang_all_ = false;
    std::atomic<int> fail_waits_{0};
    std::atomic<uint64_t> faults_{0};
    std::atomic<uint64_t> drawqueue_waits_{0};
    std::atomic<uint64_t> detach_stall_ms_{0}, gpu_resets_{0};
    std::unique_ptr<HostKernels> kernels_;
};

// One draw context: its timestamps and its command processor thread (a630_cp.cpp).
struct SimKgsl::Context {
    Context(SimKgsl& device, uint32_t id);
    ~Context();
    // A submission: up to kMaxIbs IBs, kept inline (the queue is a fixed ring: submitting does
    // not allocate).
    static constexpr uint32_t kMaxIbs = 8;
    // The deepest drawqueue KGSL has (the hwsched dispatcher's ADRENO_CONTEXT_DRAWQUEUE_SIZE, 128).
    static constexpr uint32_t kMaxQueued = 128;
    struct Job {
        uint32_t timestamp = 0;
        uint32_t count = 0;
        std::pair<uint64_t, uint64_t> ibs[kMaxIbs];
    };
    // Queues `job`; while the drawqueue is full, waits up to the device's queue_wait_ms for the CP
    // to start one. Returns 0, ETIMEDOUT or EDEADLK.
    int submit(Job job, uint32_t& timestamp);
    void fault(const std::string& why);
    void set_hang(bool hang);
    // Until `timestamp` retired (0), the context faulted (EDEADLK) or timeout_ms passed (ETIMEDOUT).
    int wait(uint32_t timestamp, uint32_t timeout_ms);
    void stop();

    SimKgsl& device;
    uint32_t id;
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<Job> jobs;  // a ring of kMaxQueued (under mutex)
    uint64_t jobs_head = 0, jobs_tail = 0;  // under mutex
    uint32_t queued = 0;                 // last timestamp handed out (KGSL_TIMESTAMP_QUEUED; under mutex)
    std::atomic<uint32_t> consumed{0};  // the last timestamp the CP started (KGSL_TIMESTAMP_CONSUMED)
    std::atomic<uint32_t> retired{0};
    bool blocked = false;                // the CP is stuck polling an unmet CP_WAIT_REG_MEM (under mutex)
    std::atomic<bool> faulted{false};
    std::string log;                     // under mutex
    bool hang = false, stopping = false;  // under mutex
    std::vector<uint32_t> regs;          // the register file this context's CP writes (type-4)
    std::vector<bool> written;           // which of regs a type-4 packet wrote
    uint32_t constants_vec4 = 0;         // the highest vec4 a CP_LOAD_STATE6 of constants reached
    uint64_t shader_loaded = 0;          // the address of the last CP_LOAD_STATE6(ST6_SHADER) (0: none)
    std::vector<uint8_t> constants;      // the CS constant file (CP_LOAD_STATE6, SB6_CS_SHADER)
    std::thread worker;

private:
    void run();
    // Executes the IB [va, va + bytes); false when the context faulted or is stopping.
    bool execute_ib(uint64_t va, uint64_t bytes);
    // Why a CP_EXEC_CS of `program` lacks state a real SP needs ("" when it has it all).
    std::string missing_program_state(uint64_t program) const;
};

}  // namespace baregpu::sim::kgsl
