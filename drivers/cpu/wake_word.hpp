// A futex-backed wakeup: a 32-bit word whose bit 0 says "someone may sleep" and whose upper
// bits count notifications. The waiter's protocol:
//
//   uint32_t seen = w.prepare();        // sets the sleeper bit, returns the word to sleep on
//   if (!condition()) w.sleep(seen, ns); // returns on notify, timeout or spuriously
//   w.done();
//
// notify() bumps the count and clears the bit in one step, and makes the system call only when
// the bit was set. Both sides are sequentially consistent, so either the waiter sees the
// condition or the notifier sees the bit; and any notify after prepare() changes the word, so
// the futex wait returns at once instead of sleeping on a stale value: no lost wakeups, with
// any number of waiters. Notifications that arrive while a woken sleeper is still waking up
// find the bit clear and cost no system call.
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
    uint32_t prepare() noexcept { return word_.fetch_or(kSleeper, std::memory_order_seq_cst) | kSleeper; }
    void sleep(uint32_t seen, uint64_t timeout_ns) noexcept {
        timespec ts{time_t(timeout_ns / 1'000'000'000u), long(timeout_ns % 1'000'000'000u)};
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word_), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
    }
    // Nothing to undo (a sleeper bit left behind costs the next notify one wake); kept so that
    // every wait reads as one bracket.
    void done() noexcept {}

    void notify() noexcept {
        uint32_t old = word_.load(std::memory_order_relaxed);
        while (!word_.compare_exchange_weak(old, (old + kCount) & ~kSleeper, std::memory_order_seq_cst, std::memory_order_relaxed)) {
        }
        if (old & kSleeper) syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word_), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
    }
    // notify() only when someone may sleep; the caller's own seq_cst store (or fence) that makes
    // the condition true must come before this call for the no-lost-wakeup argument to hold.
    void notify_if_waiting() noexcept {
        if (word_.load(std::memory_order_seq_cst) & kSleeper) notify();
    }

private:
    static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
    static constexpr uint32_t kSleeper = 1;
    static constexpr uint32_t kCount = 2;
    std::atomic<uint32_t> word_{0};
};

}  // namespace baregpu::cpu
