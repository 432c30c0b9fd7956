#include "hcq/profiler.hpp"

#include "base/error.hpp"
#include "base/json_string.hpp"
#include "hcq/clock.hpp"
#include "hcq/device.hpp"
#include "hcq/engine.hpp"
#include "hcq/signal_pool.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fmt/format.h>
#include <map>
#include <stdexcept>
#include <thread>
#include <unordered_map>

namespace baregpu::hcq {

namespace {

struct TraceEvent {
    std::string process;  // device name, or "host"
    std::string track;    // queue name, or "thread N"
    uint32_t name_id;
    ProfileKind kind;
    uint64_t begin_ns;  // host clock
    uint64_t end_ns;
    uint64_t arg;
    Device::ExecDetails details;  // a kernel's, where the device has a source for them
};

struct ClockRecord {
    std::string device;
    std::string track;
    uint64_t start_host_ns, start_ticks, end_host_ns, end_ticks;
    double ns_per_tick;
    uint64_t dropped;    // events the engine's own log could not hold
    bool engine_log;     // events came from the engine's log, not from timestamp commands
};

struct State {
    std::mutex names_mutex;
    std::deque<std::string> names;
    std::unordered_map<std::string, uint32_t> ids;

    std::mutex mutex;
    std::vector<Device*> devices;
    std::vector<TraceEvent> events;
    std::vector<ClockRecord> clocks;
    uint64_t origin_ns = 0;
    std::string exit_path;
};

// Never destroyed: usable from atexit handlers and static destructors.
State& state() {
    static State* s = new State;
    return *s;
}

uint32_t host_thread_index() {
    static std::atomic<uint32_t> next{0};
    thread_local uint32_t index = next.fetch_add(1);
    return index;
}

const char* kind_name(ProfileKind kind) {
    switch (kind) {
        case ProfileKind::exec: return "exec";
        case ProfileKind::copy: return "copy";
        case ProfileKind::wait: return "wait";
        case ProfileKind::host: return "host";
    }
    return "?";
}

// The open devices, held so that none is destroyed while the profiler talks to it (one being
// destroyed right now is skipped: its device_closing() hands its events over).
std::vector<std::shared_ptr<Device>> open_devices(State& s) {
    std::vector<std::shared_ptr<Device>> out;
    std::lock_guard lock(s.mutex);
    for (Device* d : s.devices) {
        if (auto held = d->weak_from_this().lock()) out.push_back(std::move(held));
    }
    return out;
}

void write_at_exit() {
    State& s = state();
    std::string path;
    {
        std::lock_guard lock(s.mutex);
        path = s.exit_path;
    }
    if (path.empty()) return;
    try {
        Profiler::write_chrome_trace(path);
        std::fprintf(stderr, "baregpu: profile written to %s\n", path.c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "baregpu: could not write the profile to %s: %s\n", path.c_str(), e.what());
    }
}

}  // namespace

uint32_t Profiler::intern(const std::string& name) {
    State& s = state();
    std::lock_guard lock(s.names_mutex);
    auto it = s.ids.find(name);
    if (it != s.ids.end()) return it->second;
    auto id = uint32_t(s.names.size());
    s.names.push_back(name);
    s.ids.emplace(name, id);
    return id;
}

void Profiler::init_from_environment() {
    static std::once_flag once;
    std::call_once(once, [] {
        const char* path = std::getenv("BAREGPU_PROFILE");
        if (!path || !*path) return;
        {
            State& s = state();
            std::lock_guard lock(s.mutex);
            s.exit_path = path;
        }
        std::atexit(write_at_exit);
        start();
    });
}

void Profiler::start() {
    State& s = state();
    {
        std::lock_guard lock(s.mutex);
        if (active_.load()) return;
        if (s.origin_ns == 0) s.origin_ns = host_now_ns();
        active_.store(true);
    }
    for (auto& d : open_devices(s)) {
        if (!d->failed()) d->ensure_profile();
    }
}

void Profiler::stop() { active_.store(false); }

void Profiler::clear() {
    State& s = state();
    // Take what the devices hold too, or it would come back later, stamped before the new origin.
    for (auto& d : open_devices(s)) {
        if (auto* p = d->profile()) p->finish();
    }
    std::lock_guard lock(s.mutex);
    s.events.clear();
    s.clocks.clear();
    s.origin_ns = host_now_ns();
}

void Profiler::device_opened(Device& device) {
    init_from_environment();
    {
        State& s = state();
        std::lock_guard lock(s.mutex);
        s.devices.push_back(&device);
    }
    if (active()) device.ensure_profile();
}

void Profiler::device_closing(Device& device) noexcept {
    State& s = state();
    {
        std::lock_guard lock(s.mutex);
        std::erase(s.devices, &device);
    }
    if (auto* p = device.profile()) p->finish();
}

std::string Profiler::signal_name(Device& asking, GpuVirtualAddress address) {
    std::string own = asking.signals_ ? asking.signals_->name_of(address) : std::string();
    if (!own.empty()) return own;
    State& s = state();
    std::lock_guard lock(s.mutex);
    for (Device* d : s.devices) {
        if (d == &asking || !d->signals_) continue;
        std::string n = d->signals_->name_of(address);
        if (!n.empty()) return n;
    }
    return address.hex();
}

void Profiler::add_host_span(const char* name, uint64_t begin_ns, uint64_t end_ns) noexcept {
    try {
        uint32_t id = intern(name);
        State& s = state();
        std::string track = fmt::format("thread {}", host_thread_index());
        std::lock_guard lock(s.mutex);
        s.events.push_back({"host", std::move(track), id, ProfileKind::host, begin_ns, end_ns, 0, {}});
    } catch (...) {
        // Profiling never breaks the program it profiles.
    }
}

std::string Profiler::chrome_trace() {
    State& s = state();
    auto devices = open_devices(s);  // destroyed last, after the locks below are released
    // Collect what every device finished (its timestamps are final once it is idle).
    for (auto& d : devices) {
        auto* p = d->profile();
        if (!p) continue;
        if (!d->failed()) {
            try {
                d->synchronize();
            } catch (...) {
            }
        }
        p->finish();
    }

    std::lock_guard lock(s.mutex);
    std::vector<TraceEvent> events = s.events;
    std::sort(events.begin(), events.end(), [](const TraceEvent& x, const TraceEvent& y) {
        return std::tie(x.process, x.track, x.begin_ns) < std::tie(y.process, y.track, y.begin_ns);
    });
    // pid per process (host first), tid per track.
    std::map<std::string, int> pids;
    std::map<std::pair<std::string, std::string>, int> tids;
    pids["host"] = 1;
    for (const auto& e : events) {
        if (!pids.count(e.process)) pids.emplace(e.process, int(pids.size()) + 1);
        auto key = std::make_pair(e.process, e.track);
        if (!tids.count(key)) tids.emplace(key, int(tids.size()) + 1);
    }
    std::string out = "{\"traceEvents\":[\n";
    bool first = true;
    auto sep = [&] {
        if (!first) out += ",\n";
        first = false;
    };
    for (const auto& [process, pid] : pids) {
        sep();
        out += fmt::format("{{\"ph\":\"M\",\"pid\":{},\"tid\":0,\"name\":\"process_name\",\"args\":{{\"name\":", pid);
        append_json_string(out, process);
        out += "}}";
    }
    for (const auto& [key, tid] : tids) {
        sep();
        out += fmt::format("{{\"ph\":\"M\",\"pid\":{},\"tid\":{},\"name\":\"thread_name\",\"args\":{{\"name\":", pids[key.first], tid);
        append_json_string(out, key.second);
        out += "}}";
    }
    std::lock_guard names_lock(s.names_mutex);
    for (const auto& e : events) {
        sep();
        double ts_us = (double(int64_t(e.begin_ns - s.origin_ns))) / 1000.0;
        double dur_us = double(e.end_ns - e.begin_ns) / 1000.0;
        out += fmt::format("{{\"ph\":\"X\",\"pid\":{},\"tid\":{},\"cat\":\"{}\",\"ts\":{:.3f},\"dur\":{:.3f},\"name\":",
                           pids[e.process], tids[{e.process, e.track}], kind_name(e.kind), ts_us, dur_us);
        append_json_string(out, e.name_id < s.names.size() ? s.names[e.name_id] : "?");
        switch (e.kind) {
            case ProfileKind::copy: {
                double gbps = e.end_ns > e.begin_ns ? double(e.arg) / double(e.end_ns - e.begin_ns) : 0.0;
                out += fmt::format(",\"args\":{{\"bytes\":{},\"GB/s\":{:.3f}}}", e.arg, gbps);
                break;
            }
            case ProfileKind::exec:
                out += fmt::format(",\"args\":{{\"work_items\":{}", e.arg);
                for (const auto& [key, value] : e.details) {
                    out += ",";
                    append_json_string(out, key);
                    out += fmt::format(":{}", value);
                }
                out += "}";
                break;
            case ProfileKind::wait: out += fmt::format(",\"args\":{{\"value\":{}}}", e.arg); break;
            case ProfileKind::host: break;
        }
        out += "}";
    }
    out += "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"clock_sync\":[";
    bool first_clock = true;
    for (const auto& c : s.clocks) {
        if (!first_clock) out += ",";
        first_clock = false;
        out += "\n{\"device\":";
        append_json_string(out, c.device);
        out += ",\"track\":";
        append_json_string(out, c.track);
        out += fmt::format(",\"start_host_ns\":{},\"start_ticks\":{},\"end_host_ns\":{},\"end_ticks\":{},\"ns_per_tick\":{:.9f},"
                           "\"dropped_events\":{},\"source\":\"{}\"}}",
                           c.start_host_ns, c.start_ticks, c.end_host_ns, c.end_ticks, c.ns_per_tick, c.dropped,
                           c.engine_log ? "engine log" : "timestamp commands");
    }
    out += "]}}\n";
    return out;
}

void Profiler::check_writable(const std::string& path, const std::string& what) {
    FILE* f = std::fopen(path.c_str(), "a");
    if (!f) {
        throw Error("", fmt::format("{}{}{}: cannot write the profile there ({}); name a file in a directory you can write", what,
                                    what.starts_with("--") ? " " : "=", path, SystemError::errno_text(errno)));
    }
    std::fclose(f);
}

void Profiler::check_environment() {
    if (const char* path = std::getenv("BAREGPU_PROFILE"); path && *path) check_writable(path, "BAREGPU_PROFILE");
}

void Profiler::write_chrome_trace(const std::string& path) {
    std::string json = chrome_trace();
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw SystemError("", "open profile output " + path, errno);
    size_t written = std::fwrite(json.data(), 1, json.size(), f);
    int close_err = std::fclose(f);
    if (written != json.size() || close_err != 0) throw SystemError("", "write profile output " + path, errno);
}

ProfileHostSpan::ProfileHostSpan(const char* name) noexcept : name_(name) {
    if (Profiler::active()) begin_ = host_now_ns();
}

ProfileHostSpan::~ProfileHostSpan() {
    if (begin_ != 0) Profiler::add_host_span(name_, begin_, host_now_ns());
}

namespace detail {

DeviceProfile::DeviceProfile(Device& device) : device_(device) {
    for (size_t i = 0; i < device.compute_engines(); ++i) tracks_.push_back({device.compute_[i], clock_sample(*device.compute_[i]), {}});
    for (size_t i = 0; i < device.copy_engines(); ++i) tracks_.push_back({device.copy_[i], clock_sample(*device.copy_[i]), {}});
}

DeviceProfile::~DeviceProfile() = default;

uint32_t DeviceProfile::track_of(const Engine& engine) {
    for (uint32_t i = 0; i < tracks_.size(); ++i) {
        if (tracks_[i].engine == &engine) return i;
    }
    tracks_.push_back({&engine, {}, {}});
    return uint32_t(tracks_.size() - 1);
}

DeviceProfile::Claim DeviceProfile::claim_locked(const Engine& engine, uint32_t count) {
    if (count == 0 || count > kPairsPerChunk) throw std::invalid_argument("profiler: timestamp pairs per reservation out of range");
    if (chunks_.empty() || chunks_.back().used + count > kPairsPerChunk) {
        Chunk c;
        c.memory = device_.allocate_internal(kPairsPerChunk * 16, BufferOptions{.host = true, .uncached = true});
        std::memset(c.memory.cpu(), 0, c.memory.size());
        c.slots = std::make_unique<Slot[]>(kPairsPerChunk);
        c.track = std::make_unique<uint16_t[]>(kPairsPerChunk);
        chunks_.push_back(std::move(c));
    }
    Chunk& c = chunks_.back();
    uint32_t first = c.used;
    c.used += count;
    auto track = uint16_t(track_of(engine));
    for (uint32_t i = 0; i < count; ++i) c.track[first + i] = track;
    return {c.memory.address() + 16ull * first, c.slots.get() + first};
}

void DeviceProfile::poll() noexcept {
    try {
        std::lock_guard lock(mutex_);
        poll_locked();
    } catch (...) {
    }
}

void DeviceProfile::poll_locked() {
    logged_.resize(tracks_.size());
    dropped_.resize(tracks_.size(), 0);
    for (size_t ti = 0; ti < tracks_.size(); ++ti) {
        auto* engine = const_cast<Engine*>(tracks_[ti].engine);
        if (engine->logs_profile()) dropped_[ti] += engine->drain_profile(logged_[ti]);
    }
}

DeviceProfile::Sample DeviceProfile::clock_sample(const Engine& engine) noexcept {
    // Submit a timestamp and take the host clock around the round trip; the sample with the
    // shortest round trip pins device ticks to host time best (its midpoint is closest).
    Sample best;
    uint64_t best_rtt = ~uint64_t{0};
    try {
        if (device_.failed()) return best;
        Signal s = device_.signals_->acquire(0, "profiler clock", nullptr);
        size_t index = 0;
        bool compute = engine.kind() == QueueKind::compute;
        auto& engines = compute ? device_.compute_ : device_.copy_;
        while (index < engines.size() && engines[index] != &engine) ++index;
        std::optional<ComputeQueue> cq;
        std::optional<CopyQueue> kq;
        if (compute) {
            cq.emplace(ComputeQueue(device_, *engines[index], nullptr));
            cq->timestamp(s).signal(s, 1);
        } else {
            kq.emplace(CopyQueue(device_, *engines[index], nullptr));
            kq->timestamp(s).signal(s, 1);
        }
        Queue& q = compute ? static_cast<Queue&>(*cq) : static_cast<Queue&>(*kq);
        for (uint64_t i = 1; i <= 9; ++i) {
            q.update_signal_value(CommandId(1), i);
            uint64_t t0 = host_now_ns();
            q.submit();
            if (!s.try_wait(i, std::chrono::milliseconds(200))) {
                // The engine is busy with earlier work and will write this slot later, when no
                // timeline value covers it: keep it out of the signal pool until shutdown.
                std::lock_guard lock(busy_clock_mutex_);
                busy_clock_signals_.push_back(std::move(s));
                break;
            }
            uint64_t t1 = host_now_ns();
            if (t1 - t0 < best_rtt) {
                best_rtt = t1 - t0;
                best = {t0 + (t1 - t0) / 2, s.timestamp(), true};
            }
        }
    } catch (...) {
    }
    return best;
}

void DeviceProfile::finish() noexcept {
    try {
        std::lock_guard lock(mutex_);
        // Drain the engines' own logs first: the clock samples below reuse signal slots whose
        // names the log's waits are resolved by.
        poll_locked();
        std::vector<std::vector<EngineEvent>> logged = std::move(logged_);
        std::vector<uint64_t> dropped = std::move(dropped_);
        logged_.clear();
        dropped_.clear();
        logged.resize(tracks_.size());
        dropped.resize(tracks_.size(), 0);
        for (Track& t : tracks_) t.end = clock_sample(*t.engine);
        const double nominal = 1e9 / double(device_.timestamp_frequency());
        std::vector<TraceEvent> done;
        std::vector<ClockRecord> clocks;
        auto to_host = [&](const Track& t, uint64_t ticks) -> uint64_t {
            if (t.start.valid && t.end.valid && t.end.ticks > t.start.ticks) {
                // Offset and drift: the line through both clock samples.
                double slope = double(t.end.host_ns - t.start.host_ns) / double(t.end.ticks - t.start.ticks);
                return uint64_t(int64_t(t.start.host_ns) + int64_t(double(int64_t(ticks - t.start.ticks)) * slope));
            }
            const Sample& anchor = t.start.valid ? t.start : t.end;
            if (anchor.valid) return uint64_t(int64_t(anchor.host_ns) + int64_t(double(int64_t(ticks - anchor.ticks)) * nominal));
            return uint64_t(double(ticks) * nominal);
        };
        // A kernel's details from the device's source, asked with the ticks its timestamps took.
        auto details = [&](const Track& t, ProfileKind kind, uint64_t begin_ticks, uint64_t end_ticks) {
            const Device::ExecDetailsSource& source = device_.exec_details();
            return kind == ProfileKind::exec && source ? source(*t.engine, begin_ticks, end_ticks) : Device::ExecDetails{};
        };
        for (size_t ti = 0; ti < tracks_.size(); ++ti) {
            const Track& t = tracks_[ti];
            for (const EngineEvent& e : logged[ti]) {
                if (e.begin_ticks == 0 || e.end_ticks < e.begin_ticks) continue;
                done.push_back({device_.name(), t.engine->name(), e.name_id, e.kind, to_host(t, e.begin_ticks), to_host(t, e.end_ticks),
                                e.arg, details(t, e.kind, e.begin_ticks, e.end_ticks)});
            }
        }
        size_t total = 0;
        for (const Chunk& c : chunks_) total += c.used;
        done.reserve(total);
        for (const Chunk& c : chunks_) {
            const auto* ts = reinterpret_cast<const uint64_t*>(c.memory.cpu());
            for (uint32_t i = 0; i < c.used; ++i) {
                uint64_t b = load_acquire(ts[2 * i]), en = load_acquire(ts[2 * i + 1]);
                if (b == 0 || en == 0 || en < b) continue;  // never ran (device failed) or torn
                const Track& t = tracks_[c.track[i]];
                const Slot& e = c.slots[i];
                done.push_back({device_.name(), t.engine->name(), e.name_id, e.kind, to_host(t, b), to_host(t, en), e.arg,
                                details(t, e.kind, b, en)});
            }
        }
        for (size_t ti = 0; ti < tracks_.size(); ++ti) {
            const Track& t = tracks_[ti];
            double slope = (t.start.valid && t.end.valid && t.end.ticks > t.start.ticks)
                               ? double(t.end.host_ns - t.start.host_ns) / double(t.end.ticks - t.start.ticks)
                               : nominal;
            clocks.push_back({device_.name(), t.engine->name(), t.start.host_ns, t.start.ticks, t.end.host_ns, t.end.ticks, slope,
                              dropped[ti], t.engine->logs_profile()});
        }
        chunks_.clear();
        // The closing samples open the next interval.
        for (Track& t : tracks_) {
            if (t.end.valid) t.start = t.end;
            t.end = {};
        }
        State& s = state();
        std::lock_guard state_lock(s.mutex);
        s.events.insert(s.events.end(), done.begin(), done.end());
        std::erase_if(s.clocks, [&](const ClockRecord& c) { return c.device == device_.name(); });
        s.clocks.insert(s.clocks.end(), clocks.begin(), clocks.end());
    } catch (...) {
    }
}

}  // namespace detail
}  // namespace baregpu::hcq
