#include "hcq/queue.hpp"

#include "base/error.hpp"
#include "hcq/device.hpp"
#include "hcq/engine.hpp"
#include "hcq/profiler.hpp"

#include <cstring>
#include <fmt/format.h>
#include <stdexcept>

namespace baregpu::hcq {

Queue::Queue(Device& device, Engine& engine, std::shared_ptr<Device> keep_alive)
    : keep_alive_(std::move(keep_alive)), device_(&device), engine_(&engine) {
    commands_.reserve(1024);
    records_.reserve(16);
}

Queue& Queue::operator=(Queue&& other) noexcept {
    if (this != &other) {
        try {
            wait_idle(default_timeout());
        } catch (...) {
            // The device failed or hung: the old bound commands may still be read.
            device_->quarantine(std::move(bound_));
        }
        bound_ = std::move(other.bound_);
        commands_ = std::move(other.commands_);
        records_ = std::move(other.records_);
        spans_ = std::move(other.spans_);
        engine_ = other.engine_;
        device_ = other.device_;
        last_ticket_ = other.last_ticket_;
        submitted_bound_ = std::exchange(other.submitted_bound_, false);
        last_user_ = other.last_user_;
        keep_alive_ = std::move(other.keep_alive_);
    }
    return *this;
}

Queue::~Queue() {
    if (!bound_) return;
    try {
        wait_idle(default_timeout());
    } catch (...) {
        device_->quarantine(std::move(bound_));  // still possibly in use by a hung engine
    }
}

QueueKind Queue::kind() const { return engine_->kind(); }

CommandId Queue::last() const {
    if (records_.empty()) throw std::logic_error("queue has no commands");
    return CommandId(last_user_);
}

void Queue::check_recordable() const {
    if (bound_) {
        throw std::logic_error(fmt::format("{}: {} queue: cannot record into a bound queue; reset() it first", device_->name(),
                                           engine_->name()));
    }
}

Queue::Record& Queue::start_record(Kind kind) {
    records_.push_back(Record{kind, uint32_t(commands_.size()), 0, nullptr});
    return records_.back();
}

void Queue::finish_record(Record& record, bool user) {
    record.size = uint32_t(commands_.size() - record.offset);
    if (user) last_user_ = uint32_t(records_.size() - 1);
}

uint32_t Queue::record_profile_timestamp() {
    Record& r = start_record(Kind::profile_timestamp);
    engine_->encode_timestamp(commands_, GpuVirtualAddress(0));  // patched at every submit
    finish_record(r, false);
    return uint32_t(records_.size() - 1);
}

void Queue::record_wait(const Signal& signal, uint64_t value) {
    check_recordable();
    bool profiled = Profiler::active() && !engine_->logs_profile();
    uint32_t begin = profiled ? record_profile_timestamp() : 0;
    Record& r = start_record(Kind::wait);
    engine_->encode_wait(commands_, signal.address(), value);
    finish_record(r, true);
    if (profiled) {
        uint32_t end = record_profile_timestamp();
        spans_.push_back({begin, end, signal.profile_wait_name(), uint8_t(ProfileKind::wait), value});
    }
}

void Queue::record_signal(const Signal& signal, uint64_t value) {
    check_recordable();
    Record& r = start_record(Kind::signal);
    engine_->encode_signal(commands_, signal.address(), value);
    finish_record(r, true);
}

void Queue::record_timestamp(const Signal& signal) {
    check_recordable();
    Record& r = start_record(Kind::timestamp);
    engine_->encode_timestamp(commands_, signal.timestamp_address());
    finish_record(r, true);
}

void Queue::record_memory_barrier() {
    check_recordable();
    Record& r = start_record(Kind::barrier);
    engine_->encode_memory_barrier(commands_);
    finish_record(r, true);
}

void Queue::check_launch(const KernelInfo& k, Dim3 grid, Dim3 block) const {
    const DeviceLimits& lim = device_->limits();
    uint64_t max_threads = std::min(k.max_threads_per_group ? k.max_threads_per_group : lim.max_threads_per_group,
                                    lim.max_threads_per_group);
    // Each dimension first: three u32s can multiply past 2^64 and wrap to a small count.
    bool dims_ok = block.x && block.y && block.z && block.x <= max_threads && block.y <= max_threads && block.z <= max_threads &&
                   grid.x && grid.y && grid.z && grid.x <= lim.max_grid.x && grid.y <= lim.max_grid.y && grid.z <= lim.max_grid.z;
    if (!dims_ok || block.count() > max_threads) {
        throw std::invalid_argument(fmt::format("{}: kernel '{}': grid {}x{}x{} block {}x{}x{} is outside the limits (at most {} "
                                                "threads per group, grid {}x{}x{})",
                                                device_->name(), k.name, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                                max_threads, lim.max_grid.x, lim.max_grid.y, lim.max_grid.z));
    }
    const auto& r = k.required_block;
    if (r[0] != 0 && (block.x != r[0] || block.y != r[1] || block.z != r[2])) {
        throw std::invalid_argument(fmt::format("{}: kernel '{}' requires a block of {}x{}x{} (its code object's "
                                                ".reqd_workgroup_size); launched with {}x{}x{}: launch ceil(n / {}) groups of it",
                                                device_->name(), k.name, r[0], r[1], r[2], block.x, block.y, block.z, r[0]));
    }
}

void Queue::record_exec(const KernelArgs& args, Dim3 grid, Dim3 block) {
    check_recordable();
    const Program& program = args.program();
    if (&program.device() != device_) {
        throw std::invalid_argument(fmt::format("{}: kernel '{}' was loaded on {}; load it on this device", device_->name(),
                                                program.name(), program.device().name()));
    }
    check_launch(program.info(), grid, block);
    bool profiled = Profiler::active() && !engine_->logs_profile();
    uint32_t begin = profiled ? record_profile_timestamp() : 0;
    Record& r = start_record(Kind::exec);
    r.program = &program;
    engine_->encode_exec(commands_, program, args.bytes(), grid, block);
    finish_record(r, true);
    if (profiled) {
        uint32_t end = record_profile_timestamp();
        spans_.push_back({begin, end, program.profile_name(), uint8_t(ProfileKind::exec), grid.count() * block.count()});
    }
}

void Queue::record_copy(GpuVirtualAddress dst, GpuVirtualAddress src, uint64_t size) {
    check_recordable();
    bool profiled = Profiler::active() && !engine_->logs_profile();
    uint32_t begin = profiled ? record_profile_timestamp() : 0;
    Record& r = start_record(Kind::copy);
    engine_->encode_copy(commands_, dst, src, size);
    finish_record(r, true);
    if (profiled) {
        static const uint32_t copy_name = Profiler::intern("copy");
        uint32_t end = record_profile_timestamp();
        spans_.push_back({begin, end, copy_name, uint8_t(ProfileKind::copy), size});
    }
}

ComputeQueue& ComputeQueue::exec(const Program& program, const KernelArgs& args, Dim3 grid, Dim3 block) {
    if (&args.program() != &program) {
        throw std::invalid_argument(fmt::format("kernel arguments were built for '{}', not '{}'", args.program().name(), program.name()));
    }
    record_exec(args, grid, block);
    return *this;
}

CopyQueue& CopyQueue::copy(const Buffer& dst, const Buffer& src, uint64_t size) {
    if (size > dst.size() || size > src.size()) {
        throw std::out_of_range(fmt::format("{}: copy of 0x{:x} bytes from a buffer of 0x{:x} into one of 0x{:x}", device().name(),
                                            size, src.size(), dst.size()));
    }
    if (&dst.device() != &device()) device().map_peer(dst);
    if (&src.device() != &device()) device().map_peer(src);
    record_copy(dst.address(), src.address(), size);
    return *this;
}

void Queue::submit() {
    device_->check_usable();
    if (records_.empty()) return;
    if (!spans_.empty()) patch_profile_slots();
    try {
        if (bound_) {
            last_ticket_ = engine_->submit_bound(bound_.address(), commands_.size());
            submitted_bound_ = true;
        } else {
            last_ticket_ = engine_->submit(commands_.bytes());
        }
    } catch (const TimeoutError& e) {
        // The ring stayed full for the whole timeout: the queue is hung, as synchronize() would
        // find. Whatever timeline value the caller reserved for this submission will never come.
        device_->fail(std::string("hang: ") + e.what());
        throw;
    } catch (const DeviceLostError& e) {
        device_->fail(e.what());  // gone (removed, link down): every later call says so
        throw;
    }
}

void Queue::patch_profile_slots() {
    detail::DeviceProfile& profile = device_->ensure_profile();
    for (size_t i = 0; i < spans_.size();) {
        auto count = uint32_t(std::min<size_t>(spans_.size() - i, detail::DeviceProfile::kPairsPerChunk));
        GpuVirtualAddress pairs = profile.reserve(*engine_, count, [&](uint32_t k) {
            const ProfiledSpan& s = spans_[i + k];
            return detail::DeviceProfile::Slot{s.name_id, ProfileKind(s.kind), s.arg};
        });
        for (uint32_t k = 0; k < count; ++k) {
            const ProfiledSpan& s = spans_[i + k];
            uint64_t at = pairs.value() + 16ull * k;
            engine_->patch(writable(records_[s.begin]), Field::timestamp_address, at);
            engine_->patch(writable(records_[s.end]), Field::timestamp_address, at + 8);
        }
        i += count;
    }
}

void Queue::bind() {
    check_recordable();
    device_->check_usable();
    Buffer memory = device_->allocate_internal(std::max<uint64_t>(commands_.size(), 8),
                                               BufferOptions{.host = false, .cpu_access = true, .uncached = true});
    if (commands_.size()) std::memcpy(memory.cpu(), commands_.data(), commands_.size());
    engine_->relocate(std::span(memory.cpu(), commands_.size()), memory.address());
    bound_ = std::move(memory);
    submitted_bound_ = false;
}

void Queue::reset() {
    try {
        wait_idle(default_timeout());
    } catch (...) {
        device_->quarantine(std::move(bound_));
        throw;
    }
    bound_ = Buffer();
    submitted_bound_ = false;
    commands_.clear();
    records_.clear();
    spans_.clear();
    last_user_ = 0;
}

void Queue::wait_idle(Duration timeout) {
    if (submitted_bound_ && engine_->completed_ticket() < last_ticket_) engine_->wait_ticket(last_ticket_, timeout);
}

const Queue::Record& Queue::record_of(CommandId id, Kind kind) const {
    auto index = size_t(id);
    if (index >= records_.size() || records_[index].kind != kind) {
        static constexpr const char* names[] = {"wait", "signal", "timestamp", "memory_barrier", "exec", "copy", "profile timestamp"};
        throw std::logic_error(fmt::format("{}: {} queue: command #{} is {}, not {}", device_->name(), engine_->name(), index,
                                           index < records_.size() ? names[int(records_[index].kind)] : "not recorded",
                                           names[int(kind)]));
    }
    return records_[index];
}

std::span<std::byte> Queue::writable(const Record& record) {
    if (bound_) {
        // The device may still be reading the previous submission of these commands.
        wait_idle(default_timeout());
        return {bound_.cpu() + record.offset, record.size};
    }
    return {commands_.data() + record.offset, record.size};
}

void Queue::update_wait(CommandId id, const Signal& signal, uint64_t value) {
    auto cmd = writable(record_of(id, Kind::wait));
    engine_->patch(cmd, Field::signal_address, signal.address().value());
    engine_->patch(cmd, Field::signal_value, value);
}

void Queue::update_wait_value(CommandId id, uint64_t value) {
    engine_->patch(writable(record_of(id, Kind::wait)), Field::signal_value, value);
}

void Queue::update_signal(CommandId id, const Signal& signal, uint64_t value) {
    auto cmd = writable(record_of(id, Kind::signal));
    engine_->patch(cmd, Field::signal_address, signal.address().value());
    engine_->patch(cmd, Field::signal_value, value);
}

void Queue::update_signal_value(CommandId id, uint64_t value) {
    engine_->patch(writable(record_of(id, Kind::signal)), Field::signal_value, value);
}

void Queue::update_timestamp(CommandId id, const Signal& signal) {
    engine_->patch(writable(record_of(id, Kind::timestamp)), Field::timestamp_address, signal.timestamp_address().value());
}

void Queue::update_copy(CommandId id, GpuVirtualAddress dst, GpuVirtualAddress src, uint64_t size) {
    auto cmd = writable(record_of(id, Kind::copy));
    engine_->patch(cmd, Field::copy_dst, dst.value());
    engine_->patch(cmd, Field::copy_src, src.value());
    engine_->patch(cmd, Field::copy_size, size);
}

void Queue::update_copy_dst(CommandId id, GpuVirtualAddress dst) {
    engine_->patch(writable(record_of(id, Kind::copy)), Field::copy_dst, dst.value());
}

void Queue::update_copy_src(CommandId id, GpuVirtualAddress src) {
    engine_->patch(writable(record_of(id, Kind::copy)), Field::copy_src, src.value());
}

void Queue::update_exec_buffer(CommandId id, uint32_t index, const Buffer& buffer) {
    update_exec_address(id, index, buffer.address());
}

void Queue::update_exec_address(CommandId id, uint32_t index, GpuVirtualAddress address) {
    const Record& r = record_of(id, Kind::exec);
    const KernelInfo& k = r.program->info();
    if (index >= k.num_buffers) {
        throw std::out_of_range(fmt::format("kernel '{}' has {} buffer arguments; index {} is out of range", k.name, k.num_buffers, index));
    }
    uint64_t v = address.value();
    engine_->patch_exec_args(writable(r), KernelInfo::buffer_offset(index), std::as_bytes(std::span(&v, 1)));
}

void Queue::update_exec_value(CommandId id, uint32_t index, uint32_t value) {
    const Record& r = record_of(id, Kind::exec);
    const KernelInfo& k = r.program->info();
    if (index >= k.num_values) {
        throw std::out_of_range(fmt::format("kernel '{}' has {} value arguments; index {} is out of range", k.name, k.num_values, index));
    }
    engine_->patch_exec_args(writable(r), k.value_offset(index), std::as_bytes(std::span(&value, 1)));
}

void Queue::update_exec_dims(CommandId id, Dim3 grid, Dim3 block) {
    const Record& r = record_of(id, Kind::exec);
    check_launch(r.program->info(), grid, block);
    engine_->patch_exec_dims(writable(r), grid, block);
}

}  // namespace baregpu::hcq
