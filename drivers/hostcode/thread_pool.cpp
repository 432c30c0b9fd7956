#include "drivers/hostcode/thread_pool.hpp"

#include <ctime>

namespace baregpu::hostcode {

namespace {
constexpr uint64_t kHelperSpinNs = 50'000;

// CLOCK_MONOTONIC in ns and a spin-loop pause hint, as hcq/clock.hpp has them (this library may
// not include hcq).
uint64_t now_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}
void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}
}  // namespace

ThreadPool::ThreadPool(unsigned threads) {
    try {
        for (unsigned i = 1; i < threads; ++i) helpers_.emplace_back([this, i] { helper(i); });
    } catch (...) {
        stop();  // the helpers made so far: a joinable std::thread must not be destroyed
        throw;
    }
}

ThreadPool::~ThreadPool() { stop(); }

void ThreadPool::stop() noexcept {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
        generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (auto& t : helpers_) t.join();
    helpers_.clear();
}

void ThreadPool::run(uint64_t count, Fn fn, void* context) {
    if (count == 0) return;
    if (helpers_.empty() || count == 1) {
        for (uint64_t i = 0; i < count; ++i) fn(context, i, 0);
        return;
    }
    uint64_t generation;
    {
        std::lock_guard lock(mutex_);
        generation = generation_.load(std::memory_order_relaxed) + 1;
        count_ = count;
        fn_ = fn;
        context_ = context;
        completed_.store(0, std::memory_order_relaxed);
        next_.store((generation & kTagMask) << kIndexBits, std::memory_order_release);
        generation_.store(generation, std::memory_order_release);
    }
    wake_.notify_all();
    work(generation & kTagMask, count, fn, context, 0);
    // Wait for the helpers' last workgroups; their writes become ours through the acquire.
    for (uint32_t i = 0; completed_.load(std::memory_order_acquire) < count; ++i) {
        if (i < 4096) {
            cpu_relax();
        } else {
            std::this_thread::yield();
        }
    }
}

void ThreadPool::work(uint64_t tag, uint64_t count, Fn fn, void* context, unsigned thread) {
    uint64_t cur = next_.load(std::memory_order_acquire);
    for (;;) {
        if ((cur >> kIndexBits) != tag) return;
        uint64_t index = cur & ((1ull << kIndexBits) - 1);
        if (index >= count) return;
        if (!next_.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
        fn(context, index, thread);
        completed_.fetch_add(1, std::memory_order_release);
        cur = next_.load(std::memory_order_acquire);
    }
}

void ThreadPool::helper(unsigned thread) {
    uint64_t seen = 0;
    for (;;) {
        // Spin a little: back-to-back launches find the helper awake.
        uint64_t start = now_ns();
        for (uint32_t i = 0; generation_.load(std::memory_order_acquire) == seen; ++i) {
            cpu_relax();
            if ((i & 255) == 0 && now_ns() - start > kHelperSpinNs) break;
        }
        uint64_t generation, count;
        Fn fn;
        void* context;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_relaxed) != seen; });
            if (stop_) return;
            generation = seen = generation_.load(std::memory_order_relaxed);
            count = count_;
            fn = fn_;
            context = context_;
        }
        work(generation & kTagMask, count, fn, context, thread);
    }
}

}  // namespace baregpu::hostcode
