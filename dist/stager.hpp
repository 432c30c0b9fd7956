// The dist layer's second thread: it runs the device side of a collective (copies between device
// buffers and pinned host slots, waits for the devices) in the order posted, while the calling
// thread moves the host slots through MPI. So the device copies of chunk k+1 overlap the network
// transfers of chunk k. It never calls MPI.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace baregpu::dist {

// Host memory locked in RAM where the limits allow (mlock; else ordinary pages), page-aligned.
class PinnedMemory {
public:
    PinnedMemory() = default;
    explicit PinnedMemory(uint64_t bytes);
    ~PinnedMemory();
    PinnedMemory(PinnedMemory&& o) noexcept;
    PinnedMemory& operator=(PinnedMemory&& o) noexcept;
    std::byte* data() const { return data_; }
    uint64_t size() const { return size_; }
    bool locked() const { return locked_; }

private:
    std::byte* data_ = nullptr;
    uint64_t size_ = 0;
    bool locked_ = false;
};

class Stager {
public:
    using Ticket = uint64_t;

    Stager();
    ~Stager();
    Stager(const Stager&) = delete;
    Stager& operator=(const Stager&) = delete;

    // Run `job` after every job posted before it.
    Ticket post(std::function<void()> job);
    // Whether the job and every one before it ended; rethrows the first exception a job threw
    // (jobs after a failed one are skipped).
    bool done(Ticket ticket);
    // Wait for every posted job and forget any failure: after an error, before the memory the jobs
    // use goes away.
    void drain() noexcept;

private:
    void run();

    std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable idle_;
    std::deque<std::function<void()>> jobs_;
    Ticket posted_ = 0;
    Ticket finished_ = 0;
    std::exception_ptr error_;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace baregpu::dist
