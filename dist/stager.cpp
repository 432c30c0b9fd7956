#include "dist/stager.hpp"

#include "base/error.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <utility>

namespace baregpu::dist {

PinnedMemory::PinnedMemory(uint64_t bytes) : size_(bytes) {
    if (bytes == 0) return;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw SystemError("", "mmap of " + std::to_string(bytes) + " bytes of staging memory", errno);
    data_ = static_cast<std::byte*>(p);
    // Best effort: RLIMIT_MEMLOCK is often 8 MiB for a user; unlocked pages only cost page faults.
    locked_ = ::mlock(p, bytes) == 0;
}

PinnedMemory::~PinnedMemory() {
    if (data_) ::munmap(data_, size_);
}

PinnedMemory::PinnedMemory(PinnedMemory&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), locked_(o.locked_) {}

PinnedMemory& PinnedMemory::operator=(PinnedMemory&& o) noexcept {
    if (this != &o) {
        if (data_) ::munmap(data_, size_);
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
        locked_ = o.locked_;
    }
    return *this;
}

Stager::Stager() : thread_([this] { run(); }) {}

Stager::~Stager() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

Stager::Ticket Stager::post(std::function<void()> job) {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
    const Ticket t = ++posted_;
    wake_.notify_one();
    return t;
}

bool Stager::done(Ticket ticket) {
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(error_);
    return finished_ >= ticket;
}

void Stager::drain() noexcept {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return finished_ == posted_; });
    error_ = nullptr;
}

void Stager::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stop_, and nothing left
        std::function<void()> job = std::move(jobs_.front());
        jobs_.pop_front();
        const bool skip = static_cast<bool>(error_);
        lock.unlock();
        std::exception_ptr failed;
        if (!skip) {
            try {
                job();
            } catch (...) {
                failed = std::current_exception();
            }
        }
        job = nullptr;
        lock.lock();
        if (failed && !error_) error_ = failed;
        ++finished_;
        if (finished_ == posted_) idle_.notify_all();
    }
}

}  // namespace baregpu::dist
