#include "drivers/cpu/command_processor.hpp"

#include "base/error.hpp"
#include "drivers/cpu/cpu_device.hpp"
#include "drivers/cpu/cpu_program.hpp"
#include "drivers/hostcode/kernel_abi.h"
#include "hcq/clock.hpp"
#include "hcq/profiler.hpp"
#include "hcq/program.hpp"
#include "hcq/signal.hpp"

#include <cstring>
#include <fmt/format.h>

namespace baregpu::cpu {

namespace {

// Spin this long for the next packet or signal before sleeping: back-to-back submissions and
// short waits never pay for a futex round trip.
constexpr uint64_t kIdleSpinNs = 30'000;
constexpr uint64_t kWaitSpinNs = 20'000;
// Sleep at most this long at a time (to notice stop requests and missed wakeups).
constexpr uint64_t kSleepSliceNs = 2'000'000;

template <typename T>
T load_packet(const std::byte* p) {
    T out;
    std::memcpy(&out, p, sizeof(T));
    return out;
}

template <typename T>
T* begin_packet(hcq::CommandBuffer& out, Opcode opcode, size_t size = sizeof(T)) {
    auto* p = reinterpret_cast<T*>(out.append(size));
    p->header = PacketHeader{opcode, uint32_t((size + 7) & ~size_t{7})};
    return p;
}

const char* opcode_name(uint32_t op) {
    switch (Opcode(op)) {
        case Opcode::nop: return "nop";
        case Opcode::wrap: return "wrap";
        case Opcode::wait: return "wait";
        case Opcode::signal: return "signal";
        case Opcode::timestamp: return "timestamp";
        case Opcode::barrier: return "barrier";
        case Opcode::exec: return "exec";
        case Opcode::copy: return "copy";
        case Opcode::indirect: return "indirect";
    }
    return "invalid";
}

struct ExecContext {
    baregpu_kernel_fn fn;
    const void* kernargs;
    uint32_t grid[3];
    uint32_t block[3];
    CpuDevice* device;
};

void run_workgroup(void* context, uint64_t index, unsigned thread) {
    auto* c = static_cast<ExecContext*>(context);
    baregpu_dispatch d;
    uint64_t gx = c->grid[0], gy = c->grid[1];
    d.group_id[0] = uint32_t(index % gx);
    d.group_id[1] = uint32_t((index / gx) % gy);
    d.group_id[2] = uint32_t(index / (gx * gy));
    std::memcpy(d.grid, c->grid, sizeof d.grid);
    std::memcpy(d.block, c->block, sizeof d.block);
    d.thread = thread;
    d.shared = c->device->shared_memory(thread);
    c->fn(c->kernargs, &d);
}

}  // namespace

CommandProcessor::CommandProcessor(CpuDevice& device, hcq::QueueKind kind, std::string name)
    : Engine(kind, std::move(name)), device_(device) {}

CommandProcessor::~CommandProcessor() { stop(); }

void CommandProcessor::start(std::span<std::byte> ring) {
    ring_ = ring;
    mask_ = ring.size() - 1;
    worker_ = std::thread([this] { run(); });
}

void CommandProcessor::stop() noexcept {
    if (!worker_.joinable()) return;
    stop_.store(true, std::memory_order_seq_cst);
    doorbell_.notify();
    CpuDevice::signal_event().notify();
    worker_.join();
}

void CommandProcessor::restart() {
    stop();
    stop_.store(false, std::memory_order_seq_cst);
    publish_read(write_ptr_.load(std::memory_order_acquire), true);
    worker_ = std::thread([this] { run(); });
}

// ---- encoding ----

void CommandProcessor::encode_wait(hcq::CommandBuffer& out, GpuVirtualAddress signal, uint64_t value) {
    auto* p = begin_packet<WaitPacket>(out, Opcode::wait);
    p->signal = signal.value();
    p->value = value;
}

void CommandProcessor::encode_signal(hcq::CommandBuffer& out, GpuVirtualAddress signal, uint64_t value) {
    auto* p = begin_packet<SignalPacket>(out, Opcode::signal);
    p->signal = signal.value();
    p->value = value;
}

void CommandProcessor::encode_timestamp(hcq::CommandBuffer& out, GpuVirtualAddress dst) {
    begin_packet<TimestampPacket>(out, Opcode::timestamp)->dst = dst.value();
}

void CommandProcessor::encode_memory_barrier(hcq::CommandBuffer& out) { begin_packet<BarrierPacket>(out, Opcode::barrier); }

void CommandProcessor::encode_exec(hcq::CommandBuffer& out, const hcq::Program& program, std::span<const std::byte> kernargs,
                                   hcq::Dim3 grid, hcq::Dim3 block) {
    // The queue checked that the program belongs to this device, so it is one of ours.
    const auto& cpu_program = static_cast<const CpuProgram&>(program);
    size_t size = sizeof(ExecPacket) + ((kernargs.size() + 7) & ~size_t{7});
    auto* p = begin_packet<ExecPacket>(out, Opcode::exec, size);
    p->entry = cpu_program.entry();
    p->program_slot = cpu_program.slot();
    p->kernarg_size = uint32_t(kernargs.size());
    p->grid[0] = grid.x;
    p->grid[1] = grid.y;
    p->grid[2] = grid.z;
    p->block[0] = block.x;
    p->block[1] = block.y;
    p->block[2] = block.z;
    p->shared_bytes = program.info().static_shared_bytes;
    p->reserved = 0;
    auto* args = reinterpret_cast<std::byte*>(p) + sizeof(ExecPacket);
    if (!kernargs.empty()) std::memcpy(args, kernargs.data(), kernargs.size());
    std::memset(args + kernargs.size(), 0, size - sizeof(ExecPacket) - kernargs.size());
}

void CommandProcessor::encode_copy(hcq::CommandBuffer& out, GpuVirtualAddress dst, GpuVirtualAddress src, uint64_t size) {
    auto* p = begin_packet<CopyPacket>(out, Opcode::copy);
    p->dst = dst.value();
    p->src = src.value();
    p->size = size;
}

void CommandProcessor::patch(std::span<std::byte> command, hcq::Field field, uint64_t value) {
    size_t offset = 0;
    switch (field) {
        case hcq::Field::signal_address: offset = offsetof(WaitPacket, signal); break;
        case hcq::Field::signal_value: offset = offsetof(WaitPacket, value); break;
        case hcq::Field::timestamp_address: offset = offsetof(TimestampPacket, dst); break;
        case hcq::Field::copy_dst: offset = offsetof(CopyPacket, dst); break;
        case hcq::Field::copy_src: offset = offsetof(CopyPacket, src); break;
        case hcq::Field::copy_size: offset = offsetof(CopyPacket, size); break;
    }
    static_assert(offsetof(WaitPacket, signal) == offsetof(SignalPacket, signal));
    static_assert(offsetof(WaitPacket, value) == offsetof(SignalPacket, value));
    std::memcpy(command.data() + offset, &value, 8);
}

void CommandProcessor::patch_exec_args(std::span<std::byte> command, uint32_t offset, std::span<const std::byte> bytes) {
    std::memcpy(command.data() + sizeof(ExecPacket) + offset, bytes.data(), bytes.size());
}

void CommandProcessor::patch_exec_dims(std::span<std::byte> command, hcq::Dim3 grid, hcq::Dim3 block) {
    const uint32_t dims[6] = {grid.x, grid.y, grid.z, block.x, block.y, block.z};
    std::memcpy(command.data() + offsetof(ExecPacket, grid), dims, sizeof dims);
}

// ---- submission (host side) ----

template <typename Ready>
bool CommandProcessor::wait_progress(Ready ready, uint64_t start, uint64_t deadline) {
    for (;;) {
        if (ready()) return true;
        device_.check_usable();
        uint64_t now = hcq::host_now_ns();
        if (now >= deadline) return ready();
        if (now - start < kIdleSpinNs) {
            hcq::cpu_relax();
            continue;
        }
        uint32_t seen = progress_.prepare();
        if (!ready()) progress_.sleep(seen, std::min(deadline - now, kSleepSliceNs));
        progress_.done();
    }
}

void CommandProcessor::wait_space(uint64_t need) {
    // The cached read pointer is behind the real one: if it says there is room, there is.
    if (wptr_ + need - read_seen_ <= ring_.size()) return;
    auto has_space = [&] {
        read_seen_ = read_ptr_.load(std::memory_order_seq_cst);
        return wptr_ + need - read_seen_ <= ring_.size();
    };
    if (has_space()) return;
    uint64_t start = hcq::host_now_ns();
    if (wait_progress(has_space, start, start + uint64_t(hcq::default_timeout().count()))) return;
    throw TimeoutError(device_.name(), fmt::format("{} ring stayed full for {:.0f} ms (need 0x{:x} bytes): {}. The queue is stalled, "
                                                  "probably on a wait that nothing signals",
                                                  name(), double(hcq::host_now_ns() - start) / 1e6, need, describe()));
}

void CommandProcessor::write_ring(std::span<const std::byte> bytes) {
    uint64_t size = bytes.size();
    uint64_t pos = wptr_ & mask_;
    uint64_t tail = ring_.size() - pos;
    if (size > tail) {
        // The packets must be contiguous: fill the tail with a wrap packet and publish it first,
        // so the worker consumes it before we reuse the start of the ring.
        wait_space(tail);
        PacketHeader wrap{Opcode::wrap, uint32_t(tail)};
        std::memcpy(ring_.data() + pos, &wrap, sizeof wrap);
        wptr_ += tail;
        write_ptr_.store(wptr_, std::memory_order_seq_cst);
        doorbell_.notify_if_waiting();
        pos = 0;
    }
    wait_space(size);
    std::memcpy(ring_.data() + pos, bytes.data(), size);
    wptr_ += size;
    write_ptr_.store(wptr_, std::memory_order_seq_cst);
    doorbell_.notify_if_waiting();
}

uint64_t CommandProcessor::submit(std::span<const std::byte> commands) {
    if (commands.size() > ring_.size()) {
        throw UnsupportedError(device_.name(), fmt::format("{} queue: 0x{:x} bytes of commands do not fit the 0x{:x}-byte ring; bind() "
                                                           "the queue or open the device with a larger ?ring=",
                                                           name(), commands.size(), ring_.size()));
    }
    if (commands.empty()) return read_ptr_.load(std::memory_order_acquire);
    std::lock_guard lock(submit_mutex_);
    write_ring(commands);
    return wptr_;
}

uint64_t CommandProcessor::submit_bound(GpuVirtualAddress commands, uint64_t size) {
    IndirectPacket p{{Opcode::indirect, sizeof(IndirectPacket)}, commands.value(), size};
    std::lock_guard lock(submit_mutex_);
    write_ring(std::as_bytes(std::span(&p, 1)));
    return wptr_;
}

void CommandProcessor::wait_ticket(uint64_t ticket, hcq::Duration timeout) {
    if (completed_ticket() >= ticket) return;
    uint64_t start = hcq::host_now_ns();
    if (wait_progress([&] { return completed_ticket() >= ticket; }, start, start + uint64_t(timeout.count()))) return;
    throw TimeoutError(device_.name(), fmt::format("{} queue did not reach 0x{:x} within {:.0f} ms: {}", name(), ticket,
                                                  double(hcq::host_now_ns() - start) / 1e6, describe()));
}

std::string CommandProcessor::describe() const {
    uint64_t r = read_ptr_.load(std::memory_order_acquire), w = write_ptr_.load(std::memory_order_acquire);
    std::string out = fmt::format("{} ring rptr=0x{:x} wptr=0x{:x} ({} bytes pending, ring 0x{:x})", name(), r, w, w - r, ring_.size());
    if (w != r) {
        out += fmt::format(", executing {} at 0x{:x}", opcode_name(executing_opcode_.load(std::memory_order_relaxed)),
                           executing_.load(std::memory_order_relaxed));
    }
    return out;
}

// ---- the worker ----

void CommandProcessor::publish_read(uint64_t rptr, bool wake) noexcept {
    if (wake) {
        // The waiter announces itself, then re-reads read_ptr_: a sequentially consistent store
        // comes before our look at the waiter count (no lost wakeup).
        read_ptr_.store(rptr, std::memory_order_seq_cst);
        progress_.notify_if_waiting();
    } else {
        read_ptr_.store(rptr, std::memory_order_release);
    }
}

bool CommandProcessor::idle_wait(uint64_t rptr) {
    uint64_t start = hcq::host_now_ns();
    for (uint32_t i = 0;; ++i) {
        if (write_ptr_.load(std::memory_order_acquire) != rptr) return true;
        if (stop_.load(std::memory_order_relaxed)) return false;
        hcq::cpu_relax();
        if ((i & 127) == 0 && hcq::host_now_ns() - start > kIdleSpinNs) break;
    }
    uint32_t seen = doorbell_.prepare();
    if (write_ptr_.load(std::memory_order_seq_cst) == rptr && !stop_.load(std::memory_order_seq_cst)) {
        doorbell_.sleep(seen, 100'000'000);
    }
    doorbell_.done();
    return !stop_.load(std::memory_order_relaxed);
}

void CommandProcessor::run() noexcept {
    try {
        consume();
    } catch (...) {
        // Out of memory building a fault message, and the like: the queue stops as on a fault.
        try {
            std::string what = "command processor failed";
            try {
                throw;
            } catch (const std::exception& e) {
                what += fmt::format(": {}", e.what());
            } catch (...) {
            }
            fault(executing_.load(std::memory_order_relaxed), what);
        } catch (...) {
            device_.fail(std::string());  // no memory left even for the message
        }
    }
}

void CommandProcessor::consume() {
    uint64_t rptr = read_ptr_.load(std::memory_order_acquire);  // 0, or where restart() left it
    uint64_t packets = 0;
    for (;;) {
        uint64_t w = write_ptr_.load(std::memory_order_acquire);
        if (rptr == w) {
            if (!idle_wait(rptr)) return;
            continue;
        }
        uint64_t pos = rptr & mask_;
        auto header = load_packet<PacketHeader>(ring_.data() + pos);
        Result result = Result::ok;
        if (header.size < sizeof(PacketHeader) || header.size % 8 != 0 || header.size > ring_.size() - pos || header.size > w - rptr) {
            result = fault(rptr, fmt::format("packet size {} is invalid at ring offset 0x{:x} (multiple of 8, at least 8, inside the "
                                             "ring and the submitted range expected)",
                                             header.size, pos));
        } else if (header.opcode == Opcode::wrap && header.size != ring_.size() - pos) {
            result = fault(rptr, fmt::format("wrap packet of {} bytes at ring offset 0x{:x} does not reach the ring's end (0x{:x} bytes "
                                             "expected)",
                                             header.size, pos, ring_.size() - pos));
        } else if (header.opcode != Opcode::wrap) {
            executing_.store(rptr, std::memory_order_relaxed);
            executing_opcode_.store(uint32_t(header.opcode), std::memory_order_relaxed);
            result = execute(ring_.data() + pos, header.size, false, rptr);
        }
        if (result == Result::stopped) return;
        if (result == Result::fault) {
            // A faulted queue stops where it is, like a GPU's: nothing after the bad packet runs.
            while (!stop_.load(std::memory_order_acquire)) {
                uint32_t seen = doorbell_.prepare();
                if (!stop_.load(std::memory_order_seq_cst)) doorbell_.sleep(seen, 100'000'000);
                doorbell_.done();
            }
            return;
        }
        rptr += header.size;
        // Waking host waiters costs a fence; do it when caught up and every 64 packets. A waiter
        // missed in between sleeps at most one slice (kSleepSliceNs) longer.
        publish_read(rptr, rptr == w || (++packets & 63) == 0);
    }
}

CommandProcessor::Result CommandProcessor::fault(uint64_t where, const std::string& what) noexcept {
    try {
        device_.fail(fmt::format("{} queue fault at 0x{:x}: {}", name(), where, what));
    } catch (...) {
        device_.fail("queue fault");
    }
    return Result::fault;
}

bool CommandProcessor::check_range(uint64_t address, uint64_t size, Access access, uint64_t where, const char* what, Result& result) {
    bool write = access == Access::write;
    if (size == 0 || pages_.contains(address, size, write)) return true;
    bool mapped = write && pages_.contains(address, size, false);
    result = fault(where, mapped ? fmt::format("page fault: {} writes 0x{:x}+0x{:x}, which is read-only (program code or constants)",
                                               what, address, size)
                                 : fmt::format("page fault: {} touches 0x{:x}+0x{:x}, which is not mapped on any CPU device", what,
                                               address, size));
    return false;
}

CommandProcessor::Result CommandProcessor::execute(const std::byte* packet, uint32_t size, bool indirect, uint64_t where) {
    auto header = load_packet<PacketHeader>(packet);
    // While profiling, log what the command took (no extra packets, no host work).
    if (log_enabled_ && hcq::Profiler::active() &&
        (header.opcode == Opcode::exec || header.opcode == Opcode::copy || header.opcode == Opcode::wait)) {
        LogRecord r{header.opcode, 0, device_.ticks(), 0, 0, 0};
        Result result = execute_packet(packet, size, indirect, where);
        r.end = device_.ticks();
        if (result != Result::ok) return result;
        if (header.opcode == Opcode::exec && size >= sizeof(ExecPacket)) {
            auto p = load_packet<ExecPacket>(packet);
            r.program = p.program_slot;
            r.arg = uint64_t(p.grid[0]) * p.grid[1] * p.grid[2] * p.block[0] * p.block[1] * p.block[2];
        } else if (header.opcode == Opcode::copy) {
            r.arg = load_packet<CopyPacket>(packet).size;
        } else if (header.opcode == Opcode::wait) {
            auto p = load_packet<WaitPacket>(packet);
            r.arg = p.value;
            r.signal = p.signal;
        }
        log(r);
        return result;
    }
    return execute_packet(packet, size, indirect, where);
}

void CommandProcessor::log(const LogRecord& record) noexcept {
    LogRecord* records = log_records_.get();
    if (!records) {
        try {
            log_records_ = std::make_unique<LogRecord[]>(kLogRecords);
        } catch (...) {
            log_dropped_.fetch_add(1, std::memory_order_relaxed);
            return;
        }
        records = log_records_.get();
        log_published_.store(records, std::memory_order_release);
    }
    uint64_t w = log_write_.load(std::memory_order_relaxed);
    if (w - log_read_.load(std::memory_order_acquire) >= kLogRecords) {
        log_dropped_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    records[w % kLogRecords] = record;
    log_write_.store(w + 1, std::memory_order_release);
}

uint64_t CommandProcessor::drain_profile(std::vector<hcq::EngineEvent>& out) {
    std::lock_guard lock(drain_mutex_);
    const LogRecord* records = log_published_.load(std::memory_order_acquire);
    if (!records) return log_dropped_.exchange(0);
    uint64_t r = log_read_.load(std::memory_order_relaxed), w = log_write_.load(std::memory_order_acquire);
    static const uint32_t copy_name = hcq::Profiler::intern("copy");
    for (; r < w; ++r) {
        const LogRecord& rec = records[r % kLogRecords];
        hcq::EngineEvent e{};
        e.begin_ticks = rec.begin;
        e.end_ticks = rec.end;
        e.arg = rec.arg;
        switch (rec.opcode) {
            case Opcode::exec:
                e.kind = hcq::ProfileKind::exec;
                e.name_id = device_.program_name(rec.program);
                break;
            case Opcode::copy:
                e.kind = hcq::ProfileKind::copy;
                e.name_id = copy_name;
                break;
            default:
                e.kind = hcq::ProfileKind::wait;
                e.name_id = hcq::Profiler::intern("wait " + device_.signal_name(GpuVirtualAddress(rec.signal)));
                break;
        }
        out.push_back(e);
    }
    log_read_.store(w, std::memory_order_release);
    return log_dropped_.exchange(0);
}

CommandProcessor::Result CommandProcessor::execute_packet(const std::byte* packet, uint32_t size, bool indirect, uint64_t where) {
    auto header = load_packet<PacketHeader>(packet);
    auto expect_size = [&](uint32_t want) -> bool { return size == want; };
    Result result = Result::ok;
    switch (header.opcode) {
        case Opcode::nop: return Result::ok;
        case Opcode::wait: {
            if (!expect_size(sizeof(WaitPacket))) break;
            auto p = load_packet<WaitPacket>(packet);
            if (p.signal % 8 != 0) return fault(where, fmt::format("wait: signal address 0x{:x} is not 8-byte aligned", p.signal));
            if (!check_range(p.signal, 8, Access::read, where, "wait", result)) return result;
            return execute_wait(p.signal, p.value, where);
        }
        case Opcode::signal: {
            if (!expect_size(sizeof(SignalPacket))) break;
            auto p = load_packet<SignalPacket>(packet);
            if (p.signal % 8 != 0) return fault(where, fmt::format("signal: address 0x{:x} is not 8-byte aligned", p.signal));
            if (!check_range(p.signal, 8, Access::write, where, "signal", result)) return result;
            // Release: everything the queue did before is visible to whoever sees the value.
            std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p.signal)).store(p.value, std::memory_order_release);
            CpuDevice::signal_event().notify();
            return Result::ok;
        }
        case Opcode::timestamp: {
            if (!expect_size(sizeof(TimestampPacket))) break;
            auto p = load_packet<TimestampPacket>(packet);
            if (p.dst % 8 != 0) return fault(where, fmt::format("timestamp: address 0x{:x} is not 8-byte aligned", p.dst));
            if (!check_range(p.dst, 8, Access::write, where, "timestamp", result)) return result;
            std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p.dst)).store(device_.ticks(), std::memory_order_release);
            return Result::ok;
        }
        case Opcode::barrier:
            if (!expect_size(sizeof(BarrierPacket))) break;
            // A full fence (a locked read-modify-write). Host writes made before the submit are
            // visible already through the write pointer's release/acquire; this orders writes
            // that peers made through other paths.
            barrier_word_.fetch_add(1, std::memory_order_seq_cst);
            return Result::ok;
        case Opcode::exec:
            if (kind() != hcq::QueueKind::compute) return fault(where, "exec packet on a copy queue");
            return execute_exec(packet, size, where);
        case Opcode::copy: {
            if (kind() != hcq::QueueKind::copy) return fault(where, "copy packet on a compute queue");
            if (!expect_size(sizeof(CopyPacket))) break;
            auto p = load_packet<CopyPacket>(packet);
            if (!check_range(p.src, p.size, Access::read, where, "copy source", result)) return result;
            if (!check_range(p.dst, p.size, Access::write, where, "copy destination", result)) return result;
            if (p.size) std::memmove(reinterpret_cast<void*>(p.dst), reinterpret_cast<const void*>(p.src), p.size);
            return Result::ok;
        }
        case Opcode::indirect: {
            if (indirect) return fault(where, "indirect packet inside an indirect buffer (no nesting)");
            if (!expect_size(sizeof(IndirectPacket))) break;
            auto p = load_packet<IndirectPacket>(packet);
            return execute_indirect(p.address, p.size, where);
        }
        case Opcode::wrap:
            if (indirect) return fault(where, "wrap packet inside an indirect buffer");
            return Result::ok;
        default: return fault(where, fmt::format("unknown opcode {}", uint32_t(header.opcode)));
    }
    return fault(where, fmt::format("{} packet has size {}, which is wrong for its opcode", opcode_name(uint32_t(header.opcode)), size));
}

CommandProcessor::Result CommandProcessor::execute_wait(uint64_t signal, uint64_t value, uint64_t where) {
    std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(signal));
    if (word.load(std::memory_order_acquire) >= value) return Result::ok;
    uint64_t start = hcq::host_now_ns();
    for (uint32_t i = 0;; ++i) {
        if (word.load(std::memory_order_acquire) >= value) return Result::ok;
        if (stop_.load(std::memory_order_relaxed)) return Result::stopped;
        hcq::cpu_relax();
        if ((i & 127) == 0 && hcq::host_now_ns() - start > kWaitSpinNs) break;
    }
    // About to sleep: let host waiters see everything before this packet first (an indirect
    // buffer's packets report the indirect packet's position, which is not done yet).
    if (!in_indirect_) publish_read(where, true);
    WakeWord& event = CpuDevice::signal_event();
    for (;;) {
        uint32_t seen = event.prepare();
        bool done = word.load(std::memory_order_seq_cst) >= value;
        if (!done && !stop_.load(std::memory_order_seq_cst)) event.sleep(seen, kSleepSliceNs);
        event.done();
        if (done || word.load(std::memory_order_acquire) >= value) return Result::ok;
        if (stop_.load(std::memory_order_relaxed)) return Result::stopped;
    }
}

CommandProcessor::Result CommandProcessor::execute_exec(const std::byte* packet, uint32_t size, uint64_t where) {
    if (size < sizeof(ExecPacket)) return fault(where, fmt::format("exec packet of {} bytes is shorter than its header", size));
    auto p = load_packet<ExecPacket>(packet);
    const hcq::DeviceLimits& lim = device_.limits();
    if (size != sizeof(ExecPacket) + ((uint64_t(p.kernarg_size) + 7) & ~uint64_t{7})) {
        return fault(where, fmt::format("exec packet of {} bytes does not hold its {} bytes of kernel arguments", size, p.kernarg_size));
    }
    const CpuDevice::LoadedProgram* program = device_.program(p.program_slot, p.entry);
    if (!program) {
        return fault(where, fmt::format("exec: no program is loaded at 0x{:x} (slot {}); was it unloaded while still in use?", p.entry,
                                        p.program_slot));
    }
    // What the program was loaded with: a packet that claims other arguments or more shared
    // memory would let the kernel read past its packet or its shared area.
    uint32_t kernarg_size = program->kernarg_size.load(std::memory_order_relaxed);
    uint32_t shared_bytes = program->shared_bytes.load(std::memory_order_relaxed);
    uint32_t max_threads = std::min(program->max_threads.load(std::memory_order_relaxed), lim.max_threads_per_group);
    if (p.kernarg_size != kernarg_size || p.shared_bytes != shared_bytes) {
        return fault(where, fmt::format("exec: packet has {} bytes of kernel arguments and {} of shared memory; the program was loaded "
                                        "with {} and {}",
                                        p.kernarg_size, p.shared_bytes, kernarg_size, shared_bytes));
    }
    // Each dimension first, so that the products below cannot wrap.
    bool inside = true;
    for (int i = 0; i < 3; ++i) {
        uint32_t grid_limit = i == 0 ? lim.max_grid.x : i == 1 ? lim.max_grid.y : lim.max_grid.z;
        inside = inside && p.grid[i] != 0 && p.grid[i] <= grid_limit && p.block[i] != 0 && p.block[i] <= max_threads;
    }
    uint64_t groups = uint64_t(p.grid[0]) * p.grid[1] * p.grid[2];
    uint64_t threads = uint64_t(p.block[0]) * p.block[1] * p.block[2];
    if (!inside || threads > max_threads || groups >= (1ull << 40)) {
        return fault(where, fmt::format("exec: grid {}x{}x{} block {}x{}x{} is outside the limits (grid {}x{}x{}, at most {} threads "
                                        "per group, 2^40 groups)",
                                        p.grid[0], p.grid[1], p.grid[2], p.block[0], p.block[1], p.block[2], lim.max_grid.x,
                                        lim.max_grid.y, lim.max_grid.z, max_threads));
    }
    // The kernel's buffers (the leading u64s of its arguments) must be mapped, as a GPU's page
    // tables require of every address a kernel uses; here the kernel would touch them as host
    // pointers, and an unmapped one would be the process's SIGSEGV instead of this device's fault.
    // Each buffer's first byte is checked: where a buffer ends is not in the arguments.
    const uint32_t num_buffers = std::min(program->num_buffers.load(std::memory_order_relaxed), kernarg_size / 8);
    const std::byte* args = packet + sizeof(ExecPacket);
    for (uint32_t i = 0; i < num_buffers; ++i) {
        uint64_t address = 0;
        std::memcpy(&address, args + 8ull * i, 8);
        if (!pages_.contains(address, 1, false)) {
            return fault(where, fmt::format("page fault: exec: buffer argument {} is 0x{:x}, which is not mapped on any CPU device", i,
                                            address));
        }
    }
    ExecContext context{reinterpret_cast<baregpu_kernel_fn>(p.entry), packet + sizeof(ExecPacket), {p.grid[0], p.grid[1], p.grid[2]},
                        {p.block[0], p.block[1], p.block[2]}, &device_};
    device_.pool().run(groups, run_workgroup, &context);
    return Result::ok;
}

CommandProcessor::Result CommandProcessor::execute_indirect(uint64_t address, uint64_t size, uint64_t where) {
    Result result = Result::ok;
    if (address % 8 != 0 || size % 8 != 0) return fault(where, fmt::format("indirect buffer 0x{:x}+0x{:x} is not 8-byte aligned", address, size));
    if (!check_range(address, size, Access::read, where, "indirect buffer", result)) return result;
    const auto* base = reinterpret_cast<const std::byte*>(address);
    struct Flag {
        bool& f;
        explicit Flag(bool& flag) : f(flag) { f = true; }
        ~Flag() { f = false; }
    } inside(in_indirect_);
    for (uint64_t off = 0; off < size;) {
        auto header = load_packet<PacketHeader>(base + off);
        if (header.size < sizeof(PacketHeader) || header.size % 8 != 0 || header.size > size - off) {
            return fault(where, fmt::format("indirect buffer 0x{:x}: packet at +0x{:x} has invalid size {}", address, off, header.size));
        }
        executing_opcode_.store(uint32_t(header.opcode), std::memory_order_relaxed);
        result = execute(base + off, header.size, true, where);
        if (result != Result::ok) return result;
        off += header.size;
    }
    return Result::ok;
}

}  // namespace baregpu::cpu
