#include "drivers/sim/kgsl/sim_kgsl.hpp"

#include "drivers/sim/kgsl/host_kernels.hpp"
#include "drivers/sim/kgsl/kgsl_abi.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <sys/mman.h>

namespace baregpu::sim::kgsl {

SvmRange kgsl_svm_range(bool legacy) {
    return legacy ? SvmRange{0x7'0000'0000 + kSanitizerSvmShift, 0x8'0000'0000 + kSanitizerSvmShift}
                  : SvmRange{0x10'0000'0000 + kSanitizerSvmShift, 0x40'0000'0000 + kSanitizerSvmShift};
}

namespace {
// kgsl_iommu.c iommu_addr_in_svm_ranges: non-empty, no wrap, wholly inside the range.
bool inside(const SvmRange& r, uint64_t va, uint64_t bytes) { return va + bytes > va && va >= r.begin && va + bytes <= r.end; }
}  // namespace

SimKgsl::SimKgsl(Options options) : options_(options), kernels_(std::make_unique<HostKernels>()) {}

SimKgsl::~SimKgsl() {
    std::map<uint32_t, std::shared_ptr<Context>> contexts;
    {
        std::lock_guard lock(mutex_);
        contexts.swap(contexts_);
    }
    for (auto& [id, c] : contexts) c->stop();
    contexts.clear();
    std::unique_lock lock(memory_mutex_);
    for (auto& [id, o] : objects_) {
        if (o.gpuaddr != 0 && !o.user) ::munmap(reinterpret_cast<void*>(o.gpuaddr), o.size);
    }
}

uint64_t SimKgsl::always_on_counter() {
    auto ns = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
    // 19.2 MHz = 12 ticks per 625 ns.
    return ns / 625 * 12 + ns % 625 * 12 / 625;
}

int SimKgsl::open(const char* path, int flags, int& err) {
    (void)flags;
    if (std::strcmp(path, "/dev/kgsl-3d0") != 0) {
        err = ENOENT;
        return -1;
    }
    std::lock_guard lock(mutex_);
    fds_.push_back(next_fd_);
    err = 0;
    return next_fd_++;
}

int SimKgsl::close(int fd) {
    std::lock_guard lock(mutex_);
    auto it = std::find(fds_.begin(), fds_.end(), fd);
    if (it == fds_.end()) return -1;
    fds_.erase(it);
    return 0;
}

std::shared_ptr<SimKgsl::Context> SimKgsl::context(uint32_t id) {
    std::lock_guard lock(mutex_);
    auto it = contexts_.find(id);
    return it == contexts_.end() ? nullptr : it->second;
}

std::vector<uint32_t> SimKgsl::contexts() {
    std::lock_guard lock(mutex_);
    std::vector<uint32_t> ids;
    for (auto& [id, c] : contexts_) ids.push_back(id);
    return ids;
}

bool SimKgsl::mapped(uint64_t va, uint64_t bytes) {
    std::shared_lock lock(memory_mutex_);
    auto it = mapped_.upper_bound(va);
    if (it == mapped_.begin()) return false;
    --it;
    return va >= it->first && va < it->second && bytes <= it->second - va;
}

bool SimKgsl::load_mapped(uint64_t va, uint32_t& value) {
    std::shared_lock lock(memory_mutex_);
    auto it = mapped_.upper_bound(va);
    if (it == mapped_.begin() || va % 4 != 0) return false;
    --it;
    if (va < it->first || va + 4 > it->second) return false;
    value = std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(va)).load(std::memory_order_acquire);
    return true;
}

std::string SimKgsl::kernel_log(uint32_t context_id) {
    auto c = context(context_id);
    if (!c) return {};
    std::lock_guard lock(c->mutex);
    return c->log;
}

void SimKgsl::hang_context(uint32_t context_id, bool hang) {
    std::vector<std::shared_ptr<Context>> targets;
    {
        std::lock_guard lock(mutex_);
        if (context_id == 0) hang_all_ = hang;
        for (auto& [id, c] : contexts_) {
            if (context_id == 0 || id == context_id) targets.push_back(c);
        }
    }
    for (auto& c : targets) c->set_hang(hang);
}

void SimKgsl::fault_context(uint32_t context_id, const std::string& why) {
    std::vector<std::shared_ptr<Context>> targets;
    {
        std::lock_guard lock(mutex_);
        for (auto& [id, c] : contexts_) {
            if (context_id == 0 || id == context_id) targets.push_back(c);
        }
    }
    for (auto& c : targets) c->fault(why);
}

int SimKgsl::ioctl(int fd, unsigned long request, void* arg, int& err) {
    {
        std::lock_guard lock(mutex_);
        if (std::find(fds_.begin(), fds_.end(), fd) == fds_.end()) {
            err = EBADF;
            return -1;
        }
    }
    if (arg == nullptr) {
        err = EFAULT;
        return -1;
    }
    err = ioctl_locked(request, arg);
    return err == 0 ? 0 : -1;
}

int SimKgsl::ioctl_locked(unsigned long request, void* arg) {
    switch (request) {
        case DEVICE_GETPROPERTY: {
            auto* p = static_cast<getproperty*>(arg);
            if (p->type != KGSL_PROP_DEVICE_INFO) return EINVAL;
            if (p->sizebytes != sizeof(devinfo) || p->value == nullptr) return EINVAL;
            devinfo info{};
            info.device_id = 1;  // KGSL_DEVICE_3D0 + 1
            info.chip_id = options_.chip_id;
            info.mmu_enabled = 1;
            info.gpu_id = (options_.chip_id >> 24) * 100 + ((options_.chip_id >> 16) & 0xff) * 10 + ((options_.chip_id >> 8) & 0xff);
            info.gmem_sizebytes = 1u << 20;  // A630: 1 MiB of GMEM
            std::memcpy(p->value, &info, sizeof info);
            return 0;
        }
        case DRAWCTXT_CREATE: {
            auto* c = static_cast<drawctxt_create*>(arg);
            // adreno_drawctxt.c adreno_drawctxt_create: "We no longer support legacy context
            // switching": -EINVAL without KGSL_CONTEXT_PREAMBLE and KGSL_CONTEXT_NO_GMEM_ALLOC.
            if (!(c->flags & KGSL_CONTEXT_PREAMBLE) || !(c->flags & KGSL_CONTEXT_NO_GMEM_ALLOC)) return EINVAL;
            std::lock_guard lock(mutex_);
            uint32_t id = next_context_++;
            auto ctx = std::make_shared<Context>(*this, id);
            if (hang_all_) ctx->set_hang(true);
            contexts_[id] = ctx;
            c->drawctxt_id = id;
            return 0;
        }
        case DRAWCTXT_DESTROY: {
            auto* d = static_cast<drawctxt_destroy*>(arg);
            std::shared_ptr<Context> c;
            {
                std::lock_guard lock(mutex_);
                auto it = contexts_.find(d->drawctxt_id);
                if (it == contexts_.end()) return EINVAL;
                c = it->second;
                contexts_.erase(it);
            }
            // adreno_drawctxt_detach: queued submissions the CP never started are dropped; one it
            // started must retire first (wait_for_timestamp_rb: up to 30 s), else
            // ADRENO_CTX_DETATCH_TIMEOUT_FAULT and GPU recovery, which invalidates the context (the
            // model's CP simply stops). A faulted context was invalidated already (no wait). The
            // model lets a running IB finish and counts the 30 s only for one stuck in a wait.
            bool hung = false;
            {
                std::unique_lock lock(c->mutex);
                c->changed.wait(lock, [&] {
                    return c->faulted.load(std::memory_order_acquire) || c->blocked ||
                           c->consumed.load(std::memory_order_acquire) == c->retired.load(std::memory_order_acquire);
                });
                hung = !c->faulted.load(std::memory_order_acquire) && c->blocked;
            }
            if (hung) {
                detach_stall_ms_.fetch_add(30'000, std::memory_order_acq_rel);
                gpu_resets_.fetch_add(1, std::memory_order_acq_rel);
            }
            c->stop();
            return 0;
        }
        case GPUOBJ_ALLOC: {
            auto* a = static_cast<gpuobj_alloc*>(arg);
            // The model keeps the SVM case only: the GPU address is where the process maps it.
            if (!(a->flags & KGSL_MEMFLAGS_USE_CPU_MAP)) return EINVAL;
            if (a->size == 0 || a->size > (64ull << 30)) return EINVAL;
            std::unique_lock lock(memory_mutex_);
            Object o;
            o.id = next_object_++;
            o.size = (a->size + kPage - 1) & ~(kPage - 1);
            o.flags = a->flags;
            objects_[o.id] = o;
            a->id = o.id;
            a->mmapsize = o.size;
            return 0;
        }
        case GPUOBJ_FREE: {
            auto* f = static_cast<gpuobj_free*>(arg);
            std::unique_lock lock(memory_mutex_);
            auto it = objects_.find(f->id);
            if (it == objects_.end() || it->second.user) return EINVAL;
            if (it->second.gpuaddr != 0) {
                mapped_.erase(it->second.gpuaddr);
                ::munmap(reinterpret_cast<void*>(it->second.gpuaddr), it->second.size);
            }
            objects_.erase(it);
            return 0;
        }
        case MAP_USER_MEM: {
            auto* m = static_cast<map_user_mem*>(arg);
            if (m->memtype != KGSL_USER_MEM_TYPE_ADDR || m->hostptr % kPage != 0 || m->len == 0 || m->len % kPage != 0) return EINVAL;
            std::unique_lock lock(memory_mutex_);
            auto it = mapped_.upper_bound(m->hostptr + m->len - 1);
            if (it != mapped_.begin() && std::prev(it)->second > m->hostptr) return EEXIST;
            Object o;
            o.id = next_object_++;
            o.size = m->len;
            o.gpuaddr = m->hostptr;
            o.user = true;
            objects_[o.id] = o;
            mapped_[o.gpuaddr] = o.gpuaddr + o.size;
            m->gpuaddr = o.gpuaddr;
            return 0;
        }
        case SHAREDMEM_FREE: {
            auto* f = static_cast<sharedmem_free*>(arg);
            std::unique_lock lock(memory_mutex_);
            for (auto it = objects_.begin(); it != objects_.end(); ++it) {
                if (it->second.user && it->second.gpuaddr == f->gpuaddr) {
                    mapped_.erase(f->gpuaddr);
                    objects_.erase(it);
                    return 0;
                }
            }
            return EINVAL;
        }
        case GPU_COMMAND: return gpu_command(arg);
        case CMDSTREAM_READTIMESTAMP_CTXTID: {
            auto* r = static_cast<readtimestamp_ctxtid*>(arg);
            auto c = context(r->context_id);
            if (!c) return EINVAL;
            // adreno.c adreno_readtimestamp / __adreno_readtimestamp: QUEUED is the context's last
            // handed-out timestamp, CONSUMED the start-of-pipe (soptimestamp) and RETIRED the
            // end-of-pipe (eoptimestamp) memstore words; any other type is EINVAL.
            switch (r->type) {
                case KGSL_TIMESTAMP_QUEUED: {
                    std::lock_guard lock(c->mutex);
                    r->timestamp = c->queued;
                    return 0;
                }
                case KGSL_TIMESTAMP_CONSUMED: r->timestamp = c->consumed.load(std::memory_order_acquire); return 0;
                case KGSL_TIMESTAMP_RETIRED: r->timestamp = c->retired.load(std::memory_order_acquire); return 0;
            }
            return EINVAL;
        }
        case DEVICE_WAITTIMESTAMP_CTXTID: return wait_timestamp(arg);
    }
    return ENOTTY;
}

int SimKgsl::gpu_command(void* arg) {
    auto* g = static_cast<kgsl::gpu_command*>(arg);
    auto c = context(g->context_id);
    if (!c) return EINVAL;
    if (c->faulted.load(std::memory_order_acquire)) return EDEADLK;
    if (g->cmdsize != sizeof(command_object) || g->numcmds == 0 || g->numcmds > Context::kMaxIbs || g->cmdlist == 0) return EINVAL;
    Context::Job job;
    for (uint32_t i = 0; i < g->numcmds; ++i) {
        command_object o;
        std::memcpy(&o, reinterpret_cast<const std::byte*>(g->cmdlist) + i * sizeof o, sizeof o);
        if (!(o.flags & KGSL_CMDLIST_IB) || o.size == 0 || o.size % 4 != 0 || o.gpuaddr % 4 != 0) return EINVAL;
        job.ibs[job.count++] = {o.gpuaddr + o.offset, o.size};
    }
    uint32_t timestamp = 0;
    if (int err = c->submit(job, timestamp)) return err;
    g->timestamp = timestamp;
    return 0;
}

int SimKgsl::wait_timestamp(void* arg) {
    auto* w = static_cast<waittimestamp_ctxtid*>(arg);
    auto c = context(w->context_id);
    if (!c) return EINVAL;
    if (int err = fail_waits_.load(std::memory_order_acquire)) return err;
    return c->wait(w->timestamp, w->timeout);
}

void* SimKgsl::mmap(void* addr, uint64_t length, int prot, int flags, int fd, uint64_t offset, int& err) {
    {
        std::lock_guard lock(mutex_);
        if (std::find(fds_.begin(), fds_.end(), fd) == fds_.end()) {
            err = EBADF;
            return MAP_FAILED;
        }
    }
    std::unique_lock lock(memory_mutex_);
    auto it = objects_.find(uint32_t(offset / kPage));
    if (offset % kPage != 0 || it == objects_.end() || it->second.user) {
        err = EINVAL;
        return MAP_FAILED;
    }
    Object& o = it->second;
    if (o.gpuaddr != 0 || length != o.size || !(flags & MAP_SHARED)) {
        err = EINVAL;
        return MAP_FAILED;
    }
    // kgsl.c kgsl_get_unmapped_area runs for a USE_CPU_MAP object even with MAP_FIXED: the
    // address must lie inside the SVM range (kgsl_iommu_set_svm_region: -ENOMEM otherwise); without
    // MAP_FIXED KGSL picks a free address inside the range itself (get_svm_unmapped_area).
    void* p = MAP_FAILED;
    if (flags & MAP_FIXED) {
        if (!inside(options_.svm, reinterpret_cast<uint64_t>(addr), length)) {
            err = ENOMEM;
            return MAP_FAILED;
        }
        p = ::mmap(addr, length, prot, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    } else {
        // First fit in 1 GiB steps (or the object's size, when larger).
        const uint64_t step = std::max<uint64_t>((length + kPage - 1) & ~(kPage - 1), 1ull << 30);
        for (uint64_t at = options_.svm.begin; at + length <= options_.svm.end && p == MAP_FAILED; at += step) {
            p = ::mmap(reinterpret_cast<void*>(at), length, prot, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (p != MAP_FAILED && p != reinterpret_cast<void*>(at)) {
                ::munmap(p, length);
                p = MAP_FAILED;
            }
        }
        if (p == MAP_FAILED) errno = ENOMEM;
    }
    if (p == MAP_FAILED) {
        err = errno;
        return MAP_FAILED;
    }
    o.gpuaddr = reinterpret_cast<uint64_t>(p);
    mapped_[o.gpuaddr] = o.gpuaddr + o.size;
    err = 0;
    return p;
}

int SimKgsl::munmap(void* addr, uint64_t length) {
    std::unique_lock lock(memory_mutex_);
    auto va = reinterpret_cast<uint64_t>(addr);
    for (auto& [id, o] : objects_) {
        if (!o.user && o.gpuaddr == va && o.size == length) {
            mapped_.erase(va);
            o.gpuaddr = 0;
            return ::munmap(addr, length);
        }
    }
    return ::munmap(addr, length);
}

}  // namespace baregpu::sim::kgsl
