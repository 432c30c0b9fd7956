#include "gpu_engines.hpp"

#include "base/error.hpp"
#include "drivers/hostcode/thread_pool.hpp"
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
    thread_ = std::thread([this] { engine_thread(); });
}

GpuEngines::~GpuEngines() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    work_cv_.notify_all();
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
}

void GpuEngines::unregister_channel(uint32_t token) {
    std::lock_guard lock(mutex_);
    channels_.erase(token);
    progress_cv_.notify_all();
}

void GpuEngines::reset() {
    std::lock_guard lock(mutex_);
    channels_.clear();
    progress_cv_.notify_all();
}

bool GpuEngines::doorbell(uint32_t token) {
    {
        std::lock_guard lock(mutex_);
        auto it = channels_.find(token);
        if (it == channels_.end()) return false;
        it->second->pending = true;
        if (it->second->status == ChannelStatus::idle) it->second->status = ChannelStatus::running;
    }
    work_cv_.notify_all();
    return true;
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
        return c.fault.has_value() || (c.status == ChannelStatus::idle && !c.pending);
    });
}

bool GpuEngines::wait_status(uint32_t token, ChannelStatus status, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mutex_);
    return progress_cv_.wait_for(lock, timeout, [&] {
        const Channel& c = channel(token);
        return c.status == status && !c.pending;
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
    std::unique_lock lock(mutex_);
    while (!stop_) {
        bool waiting = false;
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
        // Hooks run without the lock, so that they may call back (status, doorbell).
        if (!nonstall_pending_.empty() || !faults_pending_.empty()) {
            auto nonstall = std::move(nonstall_pending_);
            auto faults = std::move(faults_pending_);
            nonstall_pending_.clear();
            faults_pending_.clear();
            auto on_nonstall = on_nonstall_;
            auto on_fault = on_fault_;
            lock.unlock();
            if (on_nonstall)
                for (uint32_t t : nonstall) on_nonstall(t);
            if (on_fault)
                for (const auto& f : faults) on_fault(f);
            lock.lock();
        }
        progress_cv_.notify_all();
        auto has_work = [&] {
            return stop_ || std::any_of(channels_.begin(), channels_.end(), [](const auto& kv) {
                       return kv.second->pending && !kv.second->fault;
                   });
        };
        // A channel waiting on an acquire is re-polled, as the PBDMA does; otherwise sleep until a doorbell.
        if (waiting)
            work_cv_.wait_for(lock, std::chrono::microseconds(200), has_work);
        else
            work_cv_.wait(lock, has_work);
    }
}

}  // namespace baregpu::sim::nvgpu
