#include "hcq/signal.hpp"

#include "base/error.hpp"
#include "hcq/clock.hpp"
#include "hcq/device.hpp"
#include "hcq/profiler.hpp"
#include "hcq/signal_pool.hpp"

#include <fmt/format.h>

namespace baregpu::hcq {

namespace {
// Spin this long before the first sleep: long enough to catch a device that answers within a
// few microseconds, short enough not to burn a core on a long wait.
constexpr uint64_t kSpinNs = 20'000;
// Sleep at most this long at a time so that a device error or a missed wakeup is noticed.
constexpr uint64_t kMaxSleepNs = 5'000'000;
}  // namespace

Signal::Signal(Signal&& other) noexcept
    : keep_alive_(std::move(other.keep_alive_)),
      pool_(std::exchange(other.pool_, nullptr)),
      slot_(std::exchange(other.slot_, nullptr)),
      address_(other.address_),
      name_(std::move(other.name_)),
      view_(other.view_) {}

Signal& Signal::operator=(Signal&& other) noexcept {
    if (this != &other) {
        release();
        pool_ = std::exchange(other.pool_, nullptr);
        slot_ = std::exchange(other.slot_, nullptr);
        address_ = other.address_;
        name_ = std::move(other.name_);
        profile_wait_name_ = other.profile_wait_name_;
        view_ = other.view_;
        keep_alive_ = std::move(other.keep_alive_);
    }
    return *this;
}

Signal::~Signal() { release(); }

void Signal::release() noexcept {
    if (pool_ && slot_ && !view_) pool_->release(slot_, address_);
    pool_ = nullptr;
    slot_ = nullptr;
}

Device& Signal::device() const noexcept { return pool_->device(); }

uint32_t Signal::profile_wait_name() const {
    if (profile_wait_name_ == UINT32_MAX) profile_wait_name_ = Profiler::intern("wait " + (name_.empty() ? address_.hex() : name_));
    return profile_wait_name_;
}

void Signal::set(uint64_t value) {
    store_release(slot_->value, value);
    pool_->device().host_signal_written();
}

void Signal::wait(uint64_t target, Duration timeout) const {
    if (value() >= target) return;
    uint64_t start = host_now_ns();
    if (try_wait(target, timeout)) return;
    uint64_t elapsed = host_now_ns() - start;
    Device& dev = device();
    throw TimeoutError(dev.name(), fmt::format("timed out after {:.3f} ms waiting for signal '{}' at {} to reach {} (last value "
                                               "seen {}); queues: {}. The device may be hung, or nothing was submitted that "
                                               "signals this value",
                                               double(elapsed) / 1e6, name_.empty() ? "(unnamed)" : name_, address_.hex(),
                                               target, value(), dev.queue_state()));
}

bool Signal::try_wait(uint64_t target, Duration timeout) const {
    if (value() >= target) return true;
    Device& dev = device();
    dev.check_usable();
    ProfileHostSpan span("signal wait");
    uint64_t start = host_now_ns();
    uint64_t timeout_ns = timeout.count() > 0 ? uint64_t(timeout.count()) : 0;
    uint64_t deadline = start + timeout_ns;
    uint64_t spin_until = start + std::min(kSpinNs, timeout_ns);
    for (uint32_t i = 0;; ++i) {
        if (value() >= target) return true;
        cpu_relax();
        if ((i & 63) == 0) {
            if (host_now_ns() >= spin_until) break;
            dev.check_usable();
        }
    }
    for (;;) {
        dev.check_usable();
        dev.refresh_signal(*slot_);
        if (value() >= target) return true;
        uint64_t now = host_now_ns();
        if (now >= deadline) break;
        dev.sleep_for_signal(*slot_, target, std::min(deadline, now + kMaxSleepNs));
    }
    // One last look: the value may have arrived between the last check and the deadline.
    dev.check_usable();
    dev.refresh_signal(*slot_);
    dev.check_usable();
    return value() >= target;
}

}  // namespace baregpu::hcq
