// The threads that run a launch's workgroups (the CPU device's execs, a simulated GPU's
// dispatches): the calling command processor plus helpers, one per core in all. run() hands out
// work-item indices through one atomic counter tagged with the job's generation, so a helper that
// wakes late can never take an index of a later job. Helpers spin briefly for the next job, then
// sleep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace baregpu::hostcode {

class ThreadPool {
public:
    using Fn = void (*)(void* context, uint64_t index, unsigned thread);

    // threads: participants including the caller of run() (>= 1).
    explicit ThreadPool(unsigned threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    unsigned threads() const { return unsigned(helpers_.size()) + 1; }

    // fn(context, i, thread) for every i in [0, count); the caller is thread 0. Returns when
    // all calls returned. count < 2^40. One run() at a time.
    void run(uint64_t count, Fn fn, void* context);

private:
    // next_ = tag << 40 | index, tag = the job's generation modulo 2^24: a helper stalled for
    // 16 million jobs between picking one up and claiming an index is the only way to confuse it.
    static constexpr int kIndexBits = 40;
    static constexpr uint64_t kTagMask = (1ull << (64 - kIndexBits)) - 1;
    void stop() noexcept;
    void helper(unsigned thread);
    void work(uint64_t tag, uint64_t count, Fn fn, void* context, unsigned thread);

    std::mutex mutex_;
    std::condition_variable wake_;
    std::atomic<uint64_t> generation_{0};
    std::atomic<uint64_t> next_{0};
    std::atomic<uint64_t> completed_{0};
    uint64_t count_ = 0;  // under mutex_
    Fn fn_ = nullptr;
    void* context_ = nullptr;
    bool stop_ = false;
    std::vector<std::thread> helpers_;
};

}  // namespace baregpu::hostcode
