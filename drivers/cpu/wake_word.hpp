// A futex-backed wakeup: a sequence number that notify() bumps, and waiters that sleep until it
// changes. notify() makes a system call only when someone sleeps. The waiter's protocol:
//
//   uint32_t seen = w.prepare();        // announces a waiter, then reads the sequence
//   if (!condition()) w.sleep(seen, ns); // returns on notify, timeout or spuriously
//   w.done();
//
// With sequentially consistent operations on both sides, either the waiter sees the condition
// or the notifier sees the waiter (and wakes it): no lost wakeups. A wake already sent and not
// yet answered is not sent again: a notifier that runs while the sleeper is still waking up
// (on a busy machine, for a while) pays no system call.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace baregpu::cpu {

class WakeWord {
public:
    uint32_t prepare() noexcept {
        waiters_.fetch_add(1, std::memory_order_seq_cst);
        woken_.store(false, std::memory_order_seq_cst);
        return seq_.load(std::memory_order_seq_cst);
    }
    void sleep(uint32_t seen, uint64_t timeout_ns) noexcept {
        timespec ts{time_t(timeout_ns / 1'000'000'000u), long(timeout_ns % 1'000'000'000u)};
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seq_), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
    }
    void done() noexcept { waiters_.fetch_sub(1, std::memory_order_seq_cst); }

    void notify() noexcept {
        seq_.fetch_add(1, std::memory_order_seq_cst);
        // A waiter that prepared after the last wake cleared woken_; a notifier that finds it
        // set knows that wake (sent after this waiter's sequence read) covers it too.
        if (waiters_.load(std::memory_order_seq_cst) != 0 && !woken_.exchange(true, std::memory_order_seq_cst)) {
            syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seq_), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
        }
    }
    // notify() only when someone may sleep; the caller's own seq_cst store (or fence) must come
    // before this call for the no-lost-wakeup argument to hold.
    void notify_if_waiting() noexcept {
        if (waiters_.load(std::memory_order_seq_cst) != 0) notify();
    }

private:
    static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
    std::atomic<uint32_t> seq_{0};
    std::atomic<uint32_t> waiters_{0};
    std::atomic<bool> woken_{false};
};

}  // namespace baregpu::cpu
