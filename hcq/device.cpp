#include "hcq/device.hpp"

#include "base/error.hpp"
#include "hcq/engine.hpp"
#include "hcq/profiler.hpp"
#include "hcq/signal_pool.hpp"

#include <cstring>
#include <fmt/format.h>
#include <stdexcept>

namespace baregpu::hcq {

struct Device::Staging {
    std::vector<Buffer> slots;
    std::vector<uint64_t> ready;  // the timeline value after which each slot is free
    uint64_t slot_bytes = 0;
    size_t next = 0;
};

Device::Device(std::string name, std::string arch, DeviceLimits limits, std::string peer_group)
    : name_(std::move(name)), arch_(std::move(arch)), limits_(limits), peer_group_(std::move(peer_group)) {}

Device::~Device() = default;

void Device::attach(const Parts& parts) {
    compute_ = parts.compute;
    copy_ = parts.copy;
    timestamp_hz_ = parts.timestamp_hz;
    staging_slot_bytes_ = parts.staging_slot_bytes;
    staging_slots_ = std::max<uint32_t>(parts.staging_slots, 2);
    memory_ = std::make_unique<MemoryManager>(*this, *parts.memory, parts.va_base, parts.va_size, limits_.memory_bytes);
    signals_ = std::make_unique<SignalPool>(*this);
    timeline_ = signals_->acquire(0, name_ + " timeline", nullptr);
}

void Device::opened() { Profiler::device_opened(*this); }

void Device::begin_shutdown() noexcept {
    Profiler::device_closing(*this);
    profile_.store(nullptr, std::memory_order_release);
    profile_owner_.reset();
    std::lock_guard lock(submission_mutex_);
    internal_copy_.reset();
    internal_compute_.reset();
}

void Device::quarantine(Buffer buffer) noexcept {
    if (!buffer) return;
    try {
        std::lock_guard lock(quarantine_mutex_);
        quarantine_.push_back(std::move(buffer));
    } catch (...) {
        new Buffer(std::move(buffer));  // out of memory: leaking is the only safe choice left
    }
}

void Device::detach() noexcept {
    if (profile_owner_) begin_shutdown();
    {
        std::lock_guard lock(quarantine_mutex_);
        quarantine_.clear();
    }
    internal_copy_.reset();
    internal_compute_.reset();
    staging_.reset();
    timeline_ = Signal();
    if (signals_) signals_->clear();
    signals_.reset();
    if (memory_) memory_->collect_all();
    memory_.reset();
}

std::shared_ptr<Device> Device::handle() { return weak_from_this().lock(); }

std::string Device::failure() const {
    std::lock_guard lock(failure_mutex_);
    return failure_;
}

void Device::fail(const std::string& message) noexcept {
    {
        std::lock_guard lock(failure_mutex_);
        if (failed_.load(std::memory_order_relaxed)) return;
        try {
            failure_ = message;
        } catch (...) {
        }
        failed_.store(true, std::memory_order_release);
    }
    host_signal_written();  // wake every sleeping waiter so that it sees the error
}

void Device::throw_failed() const {
    throw DeviceLostError(name_, fmt::format("device is in its error state and cannot be used: {}. Drop every handle to it and "
                                             "open it again",
                                             failure()));
}

std::string Device::queue_state() const {
    std::string out;
    for (const auto* list : {&compute_, &copy_}) {
        for (const Engine* e : *list) {
            if (!out.empty()) out += "; ";
            out += e->describe();
        }
    }
    return out.empty() ? "(no queues)" : out;
}

ComputeQueue Device::compute_queue(size_t index) {
    check_usable();
    if (index >= compute_.size()) {
        throw UnsupportedError(name_, fmt::format("compute queue {} does not exist; the device has {}", index, compute_.size()));
    }
    return ComputeQueue(*this, *compute_[index], handle());
}

CopyQueue Device::copy_queue(size_t index) {
    check_usable();
    if (index >= copy_.size()) {
        throw UnsupportedError(name_, fmt::format("copy queue {} does not exist; the device has {}", index, copy_.size()));
    }
    return CopyQueue(*this, *copy_[index], handle());
}

CopyQueue& Device::internal_copy_queue() {
    if (!internal_copy_) internal_copy_.emplace(CopyQueue(*this, *copy_.at(0), nullptr));
    return *internal_copy_;
}

ComputeQueue& Device::internal_compute_queue() {
    if (!internal_compute_) internal_compute_.emplace(ComputeQueue(*this, *compute_.at(0), nullptr));
    return *internal_compute_;
}

Signal Device::new_signal(uint64_t initial, std::string signal_name) {
    check_usable();
    return signals_->acquire(initial, std::move(signal_name), handle());
}

std::string Device::signal_name(GpuVirtualAddress address) { return Profiler::signal_name(*this, address); }

void Device::collect(uint64_t completed) {
    collect_retired(completed);  // first: a backend's retired objects may hold memory
    memory_->collect(completed);
    signals_->collect(completed);
}

void Device::recover() { throw UnsupportedError(name_, "this backend cannot recover from its error state: open the device again"); }

void Device::clear_failure() noexcept {
    {
        std::lock_guard lock(failure_mutex_);
        failure_.clear();
        if (timeline_) timeline_.set(timeline_value() - 1);
        failed_.store(false, std::memory_order_release);
    }
    host_signal_written();
}

void Device::synchronize(Duration timeout) {
    check_usable();
    ProfileHostSpan span("synchronize");
    uint64_t target = timeline_value() - 1;
    if (!timeline_.try_wait(target, timeout)) {
        std::string message = fmt::format("synchronize timed out after {} ms: timeline '{}' is at {}, waiting for {}; queues: {}",
                                          std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count(),
                                          timeline_.name(), timeline_.value(), target, queue_state());
        fail("hang: " + message);
        throw TimeoutError(name_, message);
    }
    collect(target);
    if (auto* p = profile()) p->poll();
}

Buffer Device::allocate(uint64_t size, const BufferOptions& options) {
    check_usable();
    return memory_->allocate(size, options, handle());
}

Buffer Device::import_host_memory(std::byte* data, uint64_t size, std::shared_ptr<void> owner) {
    check_usable();
    return memory_->adopt_host(data, size, std::move(owner), handle());
}

Buffer Device::allocate_internal(uint64_t size, const BufferOptions& options) { return memory_->allocate(size, options, nullptr); }

std::shared_ptr<Program> Device::load_program(std::span<const std::byte> code_object, std::string_view kernel) {
    check_usable();
    ProfileHostSpan span("load_program");
    std::shared_ptr<Program> program = load_program_impl(code_object, kernel);
    program->keep_alive_ = handle();
    return program;
}

GpuVirtualAddress Device::map_bus_peer(Device& owner, GpuVirtualAddress address, uint64_t) {
    if (&owner == this) return address;
    throw UnsupportedError(name_, fmt::format("cannot reach memory of {}: this backend has no bus peer mappings", owner.name()));
}

void Device::bus_transfer(const Buffer& dst, const Buffer& src, uint64_t size, const TransferOptions& options) {
    Device& a = src.device();
    Device& b = dst.device();
    const uint64_t window = options.window_bytes != 0 ? options.window_bytes : 256ull << 20;
    // src's engine writes into dst's VRAM through dst's BAR (P2P writes beat reads). It waits for
    // b's earlier work at an alias of b's timeline signal and signals both timelines, so either
    // side's later work (and either host) can wait; no host waits here.
    std::scoped_lock lock(a.submission_mutex_, b.submission_mutex_);
    CopyQueue& q = a.internal_copy_queue();
    uint64_t vb = 0;
    bool first = true;
    for (uint64_t off = 0; off < size || first; off += window) {
        const uint64_t len = std::min(window, size - off);
        const bool last = off + window >= size;
        try {
            // One window mapped per submission (and b's timeline where this one waits on or
            // signals it); they go once a's timeline passes that submission.
            Signal b_timeline;
            if (first || last) b_timeline = Signal(b.timeline_, a.map_bus_peer(b, b.timeline_.address(), 16));
            const GpuVirtualAddress to = len != 0 ? a.map_bus_peer(b, dst.address() + off, len) : GpuVirtualAddress();
            if (first) vb = b.next_timeline();  // after the first mappings: a refusal must not leave b waiting
            q.reset();
            const uint64_t va = a.next_timeline();
            q.wait(a.timeline_, va - 1);
            if (first) q.wait(b_timeline, vb - 1);
            if (len != 0) q.copy(to, src.address() + off, len);
            if (last) q.signal(b_timeline, vb);
            q.signal(a.timeline_, va).submit();
            a.retire_bus_peer_mappings(va);
        } catch (const std::exception& e) {
            if (first) throw;  // nothing reserved on b yet
            // A later window could not be mapped: still release b's timeline value once a's part
            // is done (b's later work must not hang), and report that the data is incomplete.
            try {
                Signal b_timeline(b.timeline_, a.map_bus_peer(b, b.timeline_.address(), 16));
                q.reset();
                const uint64_t va = a.next_timeline();
                q.wait(a.timeline_, va - 1).signal(b_timeline, vb).signal(a.timeline_, va).submit();
                a.retire_bus_peer_mappings(va);
            } catch (const std::exception& inner) {
                b.fail(fmt::format("a transfer from {} stopped after {:#x} of {:#x} bytes and could not release this device's timeline: "
                                   "{}",
                                   a.name_, off, size, inner.what()));
            }
            throw Error(a.name_, fmt::format("transfer to {} stopped after {:#x} of {:#x} bytes: {}", b.name_, off, size, e.what()));
        }
        first = false;
    }
}

void Device::map_peer(const Buffer& buffer) {
    if (&buffer.device() == this) return;
    throw UnsupportedError(name_, fmt::format("cannot reach memory of {} at {}: this backend has no peer mappings",
                                              buffer.device().name(), buffer.address().hex()));
}

Device::Staging& Device::staging() {
    if (!staging_) {
        auto st = std::make_unique<Staging>();
        st->slot_bytes = staging_slot_bytes_;
        for (uint32_t i = 0; i < staging_slots_; ++i) {
            st->slots.push_back(allocate_internal(staging_slot_bytes_, BufferOptions{.host = true}));
            st->ready.push_back(0);
        }
        staging_ = std::move(st);
    }
    return *staging_;
}

void Device::copy_in(const Buffer& dst, std::span<const std::byte> src) {
    if (&dst.device() != this) return dst.device().copy_in(dst, src);
    if (src.size() > dst.size()) {
        throw std::out_of_range(fmt::format("{}: copy_in of 0x{:x} bytes into a buffer of 0x{:x}", name_, src.size(), dst.size()));
    }
    check_usable();
    ProfileHostSpan span("copy_in");
    std::lock_guard lock(submission_mutex_);
    if (copy_.empty()) {
        synchronize();
        std::memcpy(dst.bytes().data(), src.data(), src.size());
        return;
    }
    if (copy_in_through_link(dst, src)) return;
    Staging& st = staging();
    CopyQueue& q = internal_copy_queue();
    for (uint64_t off = 0; off < src.size(); off += st.slot_bytes) {
        uint64_t len = std::min<uint64_t>(st.slot_bytes, src.size() - off);
        size_t slot = st.next;
        st.next = (st.next + 1) % st.slots.size();
        timeline_.wait(st.ready[slot]);  // the device finished reading this slot
        std::memcpy(st.slots[slot].cpu(), src.data() + off, len);
        q.reset();
        uint64_t value = next_timeline();
        q.wait(timeline_, value - 1).copy(dst.address() + off, st.slots[slot].address(), len).signal(timeline_, value).submit();
        st.ready[slot] = value;
    }
}

void Device::copy_out(std::span<std::byte> dst, const Buffer& src) {
    if (&src.device() != this) return src.device().copy_out(dst, src);
    if (dst.size() > src.size()) {
        throw std::out_of_range(fmt::format("{}: copy_out of 0x{:x} bytes from a buffer of 0x{:x}", name_, dst.size(), src.size()));
    }
    check_usable();
    ProfileHostSpan span("copy_out");
    std::lock_guard lock(submission_mutex_);
    if (copy_.empty()) {
        synchronize();
        std::memcpy(dst.data(), src.bytes().data(), dst.size());
        return;
    }
    if (copy_out_through_link(dst, src)) return;
    Staging& st = staging();
    CopyQueue& q = internal_copy_queue();
    const size_t slots = st.slots.size();
    const uint64_t chunks = (dst.size() + st.slot_bytes - 1) / st.slot_bytes;
    // Keep every slot busy: the device fills slot k+1.. while the host empties slot k.
    auto issue = [&](uint64_t chunk) {
        size_t slot = chunk % slots;
        uint64_t off = chunk * st.slot_bytes;
        uint64_t len = std::min<uint64_t>(st.slot_bytes, dst.size() - off);
        timeline_.wait(st.ready[slot]);
        q.reset();
        uint64_t value = next_timeline();
        q.wait(timeline_, value - 1).copy(st.slots[slot].address(), src.address() + off, len).signal(timeline_, value).submit();
        st.ready[slot] = value;
    };
    for (uint64_t c = 0; c < std::min<uint64_t>(slots, chunks); ++c) issue(c);
    for (uint64_t c = 0; c < chunks; ++c) {
        size_t slot = c % slots;
        uint64_t off = c * st.slot_bytes;
        uint64_t len = std::min<uint64_t>(st.slot_bytes, dst.size() - off);
        timeline_.wait(st.ready[slot]);
        std::memcpy(dst.data() + off, st.slots[slot].cpu(), len);
        if (c + slots < chunks) issue(c + slots);
    }
    st.next = 0;
}

void Device::transfer(const Buffer& dst, const Buffer& src, uint64_t size) { transfer(dst, src, size, TransferOptions{}); }

void Device::transfer(const Buffer& dst, const Buffer& src, uint64_t size, const TransferOptions& options) {
    Device& a = src.device();
    Device& b = dst.device();
    if (size > dst.size() || size > src.size()) {
        throw std::out_of_range(fmt::format("transfer of 0x{:x} bytes from a buffer of 0x{:x} into one of 0x{:x}", size, src.size(),
                                            dst.size()));
    }
    a.check_usable();
    b.check_usable();
    if (a.copy_.empty()) throw UnsupportedError(a.name_, "transfer needs a copy engine and this device has none");
    ProfileHostSpan span("transfer");
    if (&a == &b) {
        std::lock_guard lock(a.submission_mutex_);
        CopyQueue& q = a.internal_copy_queue();
        q.reset();
        uint64_t value = a.next_timeline();
        q.wait(a.timeline_, value - 1).copy(dst, src, size).signal(a.timeline_, value).submit();
        return;
    }
    if (a.peer_group_ != b.peer_group_) {
        try {
            return bus_transfer(dst, src, size, options);
        } catch (const UnsupportedError& e) {
            throw UnsupportedError(a.name_, fmt::format("cannot transfer to {} (another peer group) over the bus: {}", b.name_, e.what()));
        }
    }
    a.map_peer(dst);
    std::scoped_lock lock(a.submission_mutex_, b.submission_mutex_);
    // Source engine writes into the peer (P2P writes beat reads); it waits for both devices'
    // earlier work, then the destination's timeline waits for the copy.
    CopyQueue& qa = a.internal_copy_queue();
    qa.reset();
    uint64_t va = a.next_timeline();
    qa.wait(a.timeline_, va - 1).wait(b.timeline_, b.timeline_value() - 1).copy(dst, src, size).signal(a.timeline_, va).submit();
    ComputeQueue& qb = b.internal_compute_queue();
    qb.reset();
    uint64_t vb = b.next_timeline();
    qb.wait(b.timeline_, vb - 1).wait(a.timeline_, va).signal(b.timeline_, vb).submit();
}

detail::DeviceProfile& Device::ensure_profile() {
    if (auto* p = profile()) return *p;
    std::lock_guard lock(profile_mutex_);
    if (!profile_owner_) {
        profile_owner_ = std::make_unique<detail::DeviceProfile>(*this);
        profile_.store(profile_owner_.get(), std::memory_order_release);
    }
    return *profile_owner_;
}

}  // namespace baregpu::hcq
