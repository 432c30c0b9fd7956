// The profiler: device timestamps around every exec, copy and wait, host-side API spans, and a
// Chrome trace (also read by Perfetto) with one track per queue per device.
//
// Turn it on with BAREGPU_PROFILE=out.json (the trace is written at exit) or Profiler::start()
// and Profiler::write_chrome_trace(path). While it is on, every queue records a timestamp
// before and after each exec/copy/wait into the same submission (no extra submissions), and
// each submit hands those timestamps fresh slots. Device ticks become host time through clock
// samples per queue taken when profiling starts on a device and when its events are collected
// (a line through both: offset and drift).
#pragma once

#include "base/address.hpp"
#include "hcq/engine.hpp"
#include "hcq/memory.hpp"
#include "hcq/signal.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace baregpu::hcq {

class Device;
class Engine;

enum class ProfileKind : uint8_t { exec, copy, wait, host };

class Profiler {
public:
    static bool active() noexcept { return active_.load(std::memory_order_relaxed); }
    // Start recording (devices already open start their clock sync now). Idempotent.
    static void start();
    // Stop recording new commands; what was recorded stays until written.
    static void stop();
    // Collect every device's finished events and write the Chrome trace JSON. Throws
    // SystemError when the file cannot be written.
    static void write_chrome_trace(const std::string& path);
    // The same JSON as a string.
    static std::string chrome_trace();
    // Throws baregpu::Error naming `what` ("--profile", "BAREGPU_PROFILE") when `path` cannot be
    // opened for writing, so that a run does not end by losing its trace: called before the work.
    // Leaves an existing file as it is (opened for appending); a missing one is created empty.
    static void check_writable(const std::string& path, const std::string& what);
    // Drop everything recorded so far.
    static void clear();

    // Profiler's string table (kernel names, "copy", "wait <signal>").
    static uint32_t intern(const std::string& name);

    // Reads BAREGPU_PROFILE once: when set, starts the profiler and writes the trace there at exit.
    static void init_from_environment();
    // check_writable for BAREGPU_PROFILE when it is set (Registry::open calls it before opening).
    static void check_environment();

    // Used by Device.
    static void device_opened(Device& device);
    static void device_closing(Device& device) noexcept;
    static void add_host_span(const char* name, uint64_t begin_ns, uint64_t end_ns) noexcept;
    // The name of the signal at `address` on `asking` or any other open device; else its address.
    static std::string signal_name(Device& asking, GpuVirtualAddress address);

private:
    static inline std::atomic<bool> active_{false};
};

// Records a host-side span on the "host" track while profiling is on; free otherwise.
class ProfileHostSpan {
public:
    explicit ProfileHostSpan(const char* name) noexcept;
    ~ProfileHostSpan();
    ProfileHostSpan(const ProfileHostSpan&) = delete;
    ProfileHostSpan& operator=(const ProfileHostSpan&) = delete;

private:
    const char* name_;
    uint64_t begin_ = 0;
};

namespace detail {

// The per-device half: timestamp memory, events awaiting their timestamps, clock samples.
class DeviceProfile {
public:
    explicit DeviceProfile(Device& device);
    ~DeviceProfile();

    static constexpr uint32_t kPairsPerChunk = 4096;
    struct Slot {
        uint32_t name_id;
        ProfileKind kind;
        uint64_t arg;
    };
    // Reserves `count` (1..kPairsPerChunk) consecutive timestamp pairs for events on `engine`
    // and describes pair k as describe(k) (a Slot). Returns the first pair's address: pair k's
    // begin tick goes to address + 16k, its end tick to + 8. One lock per submission; no
    // allocation except a new chunk every kPairsPerChunk events.
    template <typename Describe>
    GpuVirtualAddress reserve(const Engine& engine, uint32_t count, Describe&& describe) {
        std::lock_guard lock(mutex_);
        Claim claim = claim_locked(engine, count);
        for (uint32_t k = 0; k < count; ++k) claim.slots[k] = describe(k);
        return claim.address;
    }
    // Take the closing clock samples and convert every event to host time into the profiler's
    // finished list. The device must be idle (synchronized) for the timestamps to be final.
    void finish() noexcept;
    // Move what the engines logged so far out of their logs (Device::synchronize calls it, so a
    // program that synchronizes now and then never fills them).
    void poll() noexcept;

private:
    struct Sample {
        uint64_t host_ns = 0;
        uint64_t ticks = 0;
        bool valid = false;
    };
    struct Track {
        const Engine* engine;
        Sample start;
        Sample end;
    };
    void poll_locked();
    struct Claim {
        GpuVirtualAddress address;
        Slot* slots;
    };
    Claim claim_locked(const Engine& engine, uint32_t count);
    struct Chunk {
        Buffer memory;                    // kPairsPerChunk pairs of u64 device ticks (0 = not written)
        std::unique_ptr<Slot[]> slots;    // what each pair is
        std::unique_ptr<uint16_t[]> track;
        uint32_t used = 0;
    };
    Sample clock_sample(const Engine& engine) noexcept;
    uint32_t track_of(const Engine& engine);

    Device& device_;
    std::mutex mutex_;
    std::vector<Track> tracks_;
    std::vector<Chunk> chunks_;
    std::vector<std::vector<EngineEvent>> logged_;  // per track, drained from engine logs
    std::vector<uint64_t> dropped_;                 // per track
    // Clock-sample signals whose commands had not run when the sample gave up waiting.
    std::mutex busy_clock_mutex_;
    std::vector<Signal> busy_clock_signals_;
};

}  // namespace detail
}  // namespace baregpu::hcq
