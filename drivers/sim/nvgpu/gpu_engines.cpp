#include "gpu_engines.hpp"

#include "base/error.hpp"
#include "gpu_engines_internal.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace baregpu::sim::nvgpu {

const char* channel_status_name(ChannelStatus s) {
    switch (s) {
    case ChannelStatus::idle: return "idle";
    case ChannelStatus::running: return "running";
    case ChannelStatus::acquire_pending: return "waiting on a semaphore acquire";
    case ChannelStatus::faulted: return "faulted";
    }
    return "?";
}

GpuEngines::GpuEngines(std::string device, std::span<std::byte> vram, pci::sim::SimPort* port)
    : device_(std::move(device)), vram_(vram), port_(port), mmu_(vram, port) {
    rung_.reserve(64);
    rung_taken_.reserve(64);
    thread_ = std::thread([this] { engine_thread(); });
}

GpuEngines::~GpuEngines() {
    {
        std::lock_guard lock(bell_mutex_);
        stop_ = true;
    }
    bell_cv_.notify_all();
    thread_.join();
}

void GpuEngines::register_channel(uint32_t token, ChannelState state) {
    if (state.gpfifo_entries == 0)
        throw Error(device_, fmt::format("engines: channel token {} registered with a GPFIFO of 0 entries", token));
    std::lock_guard lock(mutex_);
    if (channels_.count(token))
        throw Error(device_, fmt::format("engines: channel token {} is already registered", token));
    auto c = std::make_unique<Channel>();
    c->token = token;
    if (state.name.empty()) state.name = fmt::format("channel token {}", token);
    c->state = std::move(state);
    for (auto& m : c->methods) m.assign(kMethodSpace / 4, 0);
    channels_[token] = std::move(c);
    std::lock_guard bell(bell_mutex_);
    tokens_.insert(token);
}

void GpuEngines::unregister_channel(uint32_t token) {
    std::unique_lock lock(mutex_);
    progress_cv_.wait(lock, [&] { return !kernel_running_; });  // the running kernel's channel stays valid
    channels_.erase(token);
    {
        std::lock_guard bell(bell_mutex_);
        tokens_.erase(token);
        std::erase(rung_, token);
    }
    progress_cv_.notify_all();
}

void GpuEngines::reset() {
    std::unique_lock lock(mutex_);
    progress_cv_.wait(lock, [&] { return !kernel_running_; });
    channels_.clear();
    {
        std::lock_guard bell(bell_mutex_);
        tokens_.clear();
        rung_.clear();
    }
    progress_cv_.notify_all();
}

bool GpuEngines::doorbell(uint32_t token) {
    {
        std::lock_guard bell(bell_mutex_);
        if (!tokens_.count(token)) return false;
        // One entry per channel: a second doorbell before the engine thread took the first adds nothing.
        if (std::find(rung_.begin(), rung_.end(), token) == rung_.end()) rung_.push_back(token);
    }
    bell_cv_.notify_all();
    return true;
}

bool GpuEngines::rung(uint32_t token) const {
    std::lock_guard bell(bell_mutex_);
    return std::find(rung_.begin(), rung_.end(), token) != rung_.end();
}

const GpuEngines::Channel& GpuEngines::channel(uint32_t token) const {
    auto it = channels_.find(token);
    if (it == channels_.end()) throw Error(device_, fmt::format("engines: no channel with token {}", token));
    return *it->second;
}

std::optional<EngineFault> GpuEngines::fault(uint32_t token) const {
    std::lock_guard lock(mutex_);
    return channel(token).fault;
}

ChannelStatus GpuEngines::status(uint32_t token) const {
    std::lock_guard lock(mutex_);
    return channel(token).status;
}

uint32_t GpuEngines::gp_get(uint32_t token) const {
    std::lock_guard lock(mutex_);
    return channel(token).gp_get;
}

uint64_t GpuEngines::nonstall_interrupts(uint32_t token) const {
    std::lock_guard lock(mutex_);
    return channel(token).nonstall;
}

uint64_t GpuEngines::kernels_launched(uint32_t token) const {
    std::lock_guard lock(mutex_);
    return channel(token).kernels;
}

bool GpuEngines::wait_idle(uint32_t token, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mutex_);
    return progress_cv_.wait_for(lock, timeout, [&] {
        const Channel& c = channel(token);
        return c.fault.has_value() || (c.status == ChannelStatus::idle && !c.pending && !rung(token));
    });
}

bool GpuEngines::wait_status(uint32_t token, ChannelStatus status, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mutex_);
    return progress_cv_.wait_for(lock, timeout, [&] {
        const Channel& c = channel(token);
        return c.status == status && !c.pending && !rung(token);
    });
}

void GpuEngines::set_hooks(std::function<void(uint32_t)> nonstall, std::function<void(const EngineFault&)> fault) {
    std::lock_guard lock(mutex_);
    on_nonstall_ = std::move(nonstall);
    on_fault_ = std::move(fault);
}

uint64_t GpuEngines::now_ns() const {
    if (port_) return port_->now_ns();
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

void GpuEngines::engine_thread() {
    bool waiting = false;  // a channel waits on a semaphore acquire
    for (;;) {
        {
            std::unique_lock bell(bell_mutex_);
            auto woken = [&] { return stop_ || !rung_.empty(); };
            // A channel waiting on an acquire is re-polled, as the PBDMA does; otherwise sleep until a doorbell.
            if (waiting)
                bell_cv_.wait_for(bell, std::chrono::microseconds(200), woken);
            else
                bell_cv_.wait(bell, woken);
            if (stop_) return;
        }
        // Take the doorbells only with mutex_ held, so that a waiter (which checks `pending` and rung_
        // under mutex_) never sees a doorbell in neither place.
        std::unique_lock lock(mutex_);
        engine_lock_ = &lock;
        {
            std::lock_guard bell(bell_mutex_);
            rung_taken_.swap(rung_);
        }
        for (uint32_t token : rung_taken_)
            if (auto it = channels_.find(token); it != channels_.end()) it->second->pending = true;
        rung_taken_.clear();
        waiting = false;
        for (auto& [token, c] : channels_) {
            if (c->fault) continue;
            if (c->pending || c->status == ChannelStatus::acquire_pending) {
                c->pending = false;
                c->status = ChannelStatus::running;
                try {
                    run_channel(*c);
                } catch (const std::exception& e) {
                    // The host failed (mmap of a code object, out of memory): the channel stops, the model goes on.
                    EngineFault f;
                    f.kind = EngineFault::Kind::bad_launch;
                    f.what = fmt::format("the model could not execute it: {}", e.what());
                    stop(*c, f);
                }
                if (c->status == ChannelStatus::acquire_pending) {
                    ++c->acquire_polls;
                    waiting = true;
                }
            }
        }
        progress_cv_.notify_all();
        // Hooks run without the lock, so that they may call back (status, doorbell).
        auto nonstall = std::move(nonstall_pending_);
        auto faults = std::move(faults_pending_);
        nonstall_pending_.clear();
        faults_pending_.clear();
        auto on_nonstall = on_nonstall_;
        auto on_fault = on_fault_;
        engine_lock_ = nullptr;
        lock.unlock();
        if (on_nonstall)
            for (uint32_t t : nonstall) on_nonstall(t);
        if (on_fault)
            for (const auto& f : faults) on_fault(f);
    }
}

}  // namespace baregpu::sim::nvgpu
