#include "drivers/qcom/qcom_engine.hpp"

#include "base/error.hpp"
#include "drivers/qcom/a6xx_registers.hpp"
#include "drivers/qcom/pm4.hpp"
#include "drivers/qcom/qcom_program.hpp"
#include "hcq/clock.hpp"
#include "hcq/device.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>

namespace baregpu::qcom {

using namespace pm4;

namespace {

// Dword positions inside the fixed encodings (see the header comment).
constexpr size_t kWaitHiAddr = 2, kWaitHiRef = 4, kWaitCondTsAddr = 10, kWaitCondRef = 12, kWaitLoAddr = 16, kWaitLoRef = 18;
constexpr size_t kSignalAddr = 8, kSignalValue = 10;
constexpr size_t kTimestampAddr = 3;
constexpr size_t kExecCsDwords = 5;  // the trailing CP_EXEC_CS
// exec: the program state (marker 2, SP_MODE_CNTL 2, SP_UPDATE_CNTL 2, SP_CS_CONST_CONFIG 2,
// SP_CS_CNTL_0/1 3, SP_CS_BASE + PVT_MEM 7, SP_CS_CONFIG + INSTR_SIZE + PVT stack 4; A7XX also
// SP_PS_WAVE_CNTL 2, SP_REG_PROG_ID_0..3 5, SP_CS_WIE_CNTL_0/1 3; A6XX a 1-dword CP_NOP), the
// shader load (4), SP_CS_NDRANGE_0..6 (8), then A6XX SP_CS_CONST_CONFIG_0, SP_CS_WGE_CNTL and
// SP_CS_KERNEL_GROUP_X..Z (6), A7XX SP_CS_WGE_CNTL and SP_CS_KERNEL_GROUP_X..Z (5) and
// SP_CS_NDRANGE_7 (2), the constants (4 + 4 per vec4) and CP_EXEC_CS (5): 50 + 4n dwords on A6XX,
// 60 + 4n on A7XX, even, so CP_EXEC_CS comes last.
constexpr size_t kExecState6 = 23, kExecState7 = 32;
struct ExecLayout {
    size_t ndrange, groups, ndrange7, wge, args;  // dword positions of the patched values
};
constexpr ExecLayout exec_layout(bool a7xx) {
    size_t nd = (a7xx ? kExecState7 : kExecState6) + 4 + 1;
    return a7xx ? ExecLayout{nd, nd + 9, nd + 13, nd + 8, nd + 14 + 4} : ExecLayout{nd, nd + 10, 0, nd + 9, nd + 13 + 4};
}

// Collects one command's dwords, then appends them padded to 8 bytes with a CP_NOP.
class Emit {
public:
    explicit Emit(hcq::CommandBuffer& out, size_t dwords) {
        size_t padded = (dwords + 1) & ~size_t{1};
        words_ = reinterpret_cast<uint32_t*>(out.append(padded * 4));
        if (padded != dwords) words_[padded - 1] = type7(CP_NOP, 0);
    }
    Emit& operator()(uint32_t w) {
        words_[n_++] = w;
        return *this;
    }
    Emit& addr(uint64_t a) { return (*this)(uint32_t(a))(uint32_t(a >> 32)); }
    // Dwords written directly through at().
    Emit& skip(size_t n) {
        n_ += n;
        return *this;
    }
    uint32_t* at(size_t i) { return words_ + i; }

private:
    uint32_t* words_ = nullptr;
    size_t n_ = 0;
};

void put32(std::span<std::byte> command, size_t dword, uint32_t v) { std::memcpy(command.data() + dword * 4, &v, 4); }
void put64(std::span<std::byte> command, size_t dword, uint64_t v) {
    put32(command, dword, uint32_t(v));
    put32(command, dword + 1, uint32_t(v >> 32));
}

uint32_t ms_ceil(uint64_t ns) { return uint32_t(std::min<uint64_t>((ns + 999'999) / 1'000'000, 0xffffffffu)); }

}  // namespace

QcomEngine::QcomEngine(hcq::Device& device, KgslDevice& kgsl, hcq::QueueKind kind, std::string name, uint32_t context_id)
    : Engine(kind, std::move(name)), device_(device), kgsl_(kgsl), context_(context_id) {}

void QcomEngine::restart(uint32_t context_id) {
    std::lock_guard lock(submit_mutex_);
    std::lock_guard dq(drawqueue_mutex_);
    in_flight_head_ = in_flight_tail_;
    held_head_ = held_tail_;
    uint64_t submitted = submitted_.load(std::memory_order_acquire);
    base_.store(submitted, std::memory_order_release);
    queued_.store(submitted, std::memory_order_release);
    completed_.store(submitted, std::memory_order_release);
    context_.store(context_id, std::memory_order_release);
}

void QcomEngine::start(hcq::Buffer ring, const Shared& shared) {
    std::lock_guard lock(submit_mutex_);
    ring_ = std::move(ring);
    shared_ = shared;
}

QcomEngine::~QcomEngine() = default;

void QcomEngine::release() noexcept {
    std::lock_guard lock(submit_mutex_);
    std::lock_guard dq(drawqueue_mutex_);
    in_flight_head_ = in_flight_tail_;
    held_head_ = held_tail_;
    ring_ = {};
}

void QcomEngine::retire_in_flight(bool need_room) {
    if (in_flight_empty()) return;
    uint64_t done = completed_ticket();
    while (!in_flight_empty() && in_flight_front().ticket <= done) ++in_flight_head_;
    if (need_room && in_flight_tail_ - in_flight_head_ >= kMaxInFlight) {
        wait_ticket(in_flight_front().ticket, hcq::default_timeout());
        ++in_flight_head_;
    }
}

void QcomEngine::push_in_flight(const InFlight& f) { in_flight_[in_flight_tail_++ % kMaxInFlight] = f; }

// ---- encoding ----

void QcomEngine::encode_wait(hcq::CommandBuffer& out, GpuVirtualAddress signal, uint64_t value) {
    uint64_t lo = signal.value(), hi = lo + 4;
    uint32_t ref_hi = uint32_t(value >> 32), ref_lo = uint32_t(value);
    Emit e(out, 21);
    e(type7(CP_WAIT_REG_MEM, 6))(kWriteGe | kPollMemory << 4).addr(hi)(ref_hi)(0xffffffffu)(32);
    // Only while the high word still equals H does the low word decide.
    e(type7(CP_COND_EXEC, 6)).addr(shared_.one.value()).addr(hi)(ref_hi)(7);
    e(type7(CP_WAIT_REG_MEM, 6))(kWriteGe | kPollMemory << 4).addr(lo)(ref_lo)(0xffffffffu)(32);
}

void QcomEngine::encode_signal(hcq::CommandBuffer& out, GpuVirtualAddress signal, uint64_t value) {
    Emit e(out, 12);
    e(type7(CP_WAIT_FOR_IDLE, 0));
    e(type7(CP_EVENT_WRITE, 4))(flush_event()).addr(shared_.scratch.value())(0);
    e(type7(CP_WAIT_MEM_WRITES, 0));
    e(type7(CP_MEM_WRITE, 4)).addr(signal.value())(uint32_t(value))(uint32_t(value >> 32));
}

void QcomEngine::encode_timestamp(hcq::CommandBuffer& out, GpuVirtualAddress dst) {
    Emit e(out, 5);
    e(type7(CP_WAIT_FOR_IDLE, 0));
    e(type7(CP_REG_TO_MEM, 3))(reg_to_mem0(a6xx::CP_ALWAYS_ON_COUNTER, 2, true)).addr(dst.value());
}

void QcomEngine::encode_memory_barrier(hcq::CommandBuffer& out) {
    Emit e(out, 9);
    e(type7(CP_EVENT_WRITE, 4))(flush_event()).addr(shared_.scratch.value())(0);
    e(type7(CP_EVENT_WRITE, 1))(a7xx() ? event_write7_0(CACHE_INVALIDATE7, false) : uint32_t(CACHE_INVALIDATE));
    e(type7(CP_WAIT_MEM_WRITES, 0));
    e(type7(CP_WAIT_FOR_IDLE, 0));
}

void QcomEngine::encode_dispatch(hcq::CommandBuffer& out, uint64_t program_address, const ShaderState& shader, std::span<const std::byte> kernargs,
                                 hcq::Dim3 grid, hcq::Dim3 block) {
    using namespace a6xx;
    const Generation& g = shared_.generation;
    const bool a7 = a7xx();
    const ExecLayout at = exec_layout(a7);
    const uint32_t units = uint32_t((kernargs.size() + 15) / 16);  // vec4 constants
    const uint32_t constlen = (units + 3) & ~3u;                  // what the shader sees (computerator aligns to 4)
    Emit e(out, at.args + 4 * units + kExecCsDwords);
    // The program state a real SP reads, in the order of mesa computerator's cs_program_emit.
    e(type7(CP_SET_MARKER, 1))(kRm6Compute);
    e(type4(SP_MODE_CNTL, 1))(kModeCntl);
    e(type4(g.update_cntl, 1))(kUpdateCntl);
    e(type4(g.const_config, 1))(const_config(constlen));
    e(type4(SP_CS_CNTL_0, 2))(cs_cntl_0(shader.full_regs, shader.half_regs, shader.branchstack, shader.thread128))(
        cs_cntl_1(shader.shared_bytes, constlen));
    // SP_CS_BASE, then SP_CS_PVT_MEM_PARAM / _BASE / _SIZE: no private memory (0 bytes per item).
    e(type4(SP_CS_BASE, 6)).addr(program_address)(0).addr(0)(0);
    e(type4(SP_CS_CONFIG, 3))(cs_config(shader.uavs))(shader.instr_units)(0);  // + SP_CS_INSTR_SIZE, PVT_MEM_STACK_OFFSET
    if (a7) {
        e(type4(a7xx::SP_PS_WAVE_CNTL, 1))(0);  // THREAD64
        e(type4(a7xx::SP_REG_PROG_ID_0, 4))(0xfcfcfcfcu)(0xfcfcfcfcu)(0xfcfcfcfcu)(0x0000fc00u);
        e(type4(a7xx::SP_CS_WIE_CNTL_0, 2))(wie_cntl_0(shader.wg_id_const, shader.local_id_reg))(a7xx::wie_cntl_1(shader.thread128));
    } else {
        e(type7(CP_NOP, 0));  // keeps the length even
    }
    // The instructions: CP_LOAD_STATE6(ST6_SHADER, SS6_INDIRECT) from SP_CS_BASE.
    e(type7(CP_LOAD_STATE6_FRAG, 3))(load_state6_0(0, kSt6Shader, kSs6Indirect, kSb6CsShader, std::min(shader.instr_units, kInstrCacheUnits)))
        .addr(program_address);
    e(type4(g.ndrange0, 7))(ndrange0(block.x, block.y, block.z));
    e(grid.x * block.x)(0)(grid.y * block.y)(0)(grid.z * block.z)(0);
    if (a7) {
        e(type4(a7xx::SP_CS_WGE_CNTL, 4))(a7xx::wge_cntl(shader.thread128, block.y))(grid.x)(grid.y)(grid.z);
        e(type4(a7xx::SP_CS_NDRANGE_7, 1))(a7xx::ndrange7(block.x, block.y, block.z));
    } else {
        e(type4(SP_CS_CONST_CONFIG_0, 5))(wie_cntl_0(shader.wg_id_const, shader.local_id_reg))(wge_cntl(shader.thread128))(grid.x)(grid.y)(
            grid.z);
    }
    e(type7(CP_LOAD_STATE6_FRAG, 3 + 4 * units))(load_state6_0(0, kSt6Constants, kSs6Direct, kSb6CsShader, units))(0)(0);
    auto* args = reinterpret_cast<std::byte*>(e.at(at.args));
    std::memset(args, 0, size_t(units) * 16);
    if (!kernargs.empty()) std::memcpy(args, kernargs.data(), kernargs.size());
    e.skip(4 * size_t(units));
    e(type7(CP_EXEC_CS, 4))(0)(grid.x)(grid.y)(grid.z);
}

void QcomEngine::encode_exec(hcq::CommandBuffer& out, const hcq::Program& program, std::span<const std::byte> kernargs, hcq::Dim3 grid,
                             hcq::Dim3 block) {
    // The queue checked that the program belongs to this device.
    const auto& p = static_cast<const QcomProgram&>(program);
    encode_dispatch(out, p.code_address(), p.shader(), kernargs, grid, block);
}

void QcomEngine::encode_copy(hcq::CommandBuffer& out, GpuVirtualAddress dst, GpuVirtualAddress src, uint64_t size) {
    uint64_t args[3] = {dst.value(), src.value(), size};
    const QcomProgram* p = shared_.copy_program;
    encode_dispatch(out, p ? p->code_address() : 0, p ? p->shader() : ShaderState{}, std::as_bytes(std::span(args)), {1, 1, 1}, {1, 1, 1});
}

void QcomEngine::patch(std::span<std::byte> command, hcq::Field field, uint64_t value) {
    switch (field) {
        case hcq::Field::signal_address:
            // Waits and signals differ in size (22 and 12 dwords).
            if (command.size() == 22 * 4) {
                put64(command, kWaitHiAddr, value + 4);
                put64(command, kWaitCondTsAddr, value + 4);
                put64(command, kWaitLoAddr, value);
            } else {
                put64(command, kSignalAddr, value);
            }
            break;
        case hcq::Field::signal_value:
            if (command.size() == 22 * 4) {
                put32(command, kWaitHiRef, uint32_t(value >> 32));
                put32(command, kWaitCondRef, uint32_t(value >> 32));
                put32(command, kWaitLoRef, uint32_t(value));
            } else {
                put64(command, kSignalValue, value);
            }
            break;
        case hcq::Field::timestamp_address: put64(command, kTimestampAddr, value); break;
        case hcq::Field::copy_dst: std::memcpy(command.data() + exec_layout(a7xx()).args * 4, &value, 8); break;
        case hcq::Field::copy_src: std::memcpy(command.data() + exec_layout(a7xx()).args * 4 + 8, &value, 8); break;
        case hcq::Field::copy_size: std::memcpy(command.data() + exec_layout(a7xx()).args * 4 + 16, &value, 8); break;
    }
}

void QcomEngine::patch_exec_args(std::span<std::byte> command, uint32_t offset, std::span<const std::byte> bytes) {
    std::memcpy(command.data() + exec_layout(a7xx()).args * 4 + offset, bytes.data(), bytes.size());
}

void QcomEngine::patch_exec_dims(std::span<std::byte> command, hcq::Dim3 grid, hcq::Dim3 block) {
    const ExecLayout at = exec_layout(a7xx());
    const uint32_t nd[7] = {a6xx::ndrange0(block.x, block.y, block.z), grid.x * block.x, 0, grid.y * block.y, 0, grid.z * block.z, 0};
    std::memcpy(command.data() + at.ndrange * 4, nd, sizeof nd);
    const uint32_t groups[3] = {grid.x, grid.y, grid.z};
    std::memcpy(command.data() + at.groups * 4, groups, sizeof groups);
    if (a7xx()) {
        // The last workgroup's size and the workgroup tiling follow the local size.
        put32(command, at.ndrange7, a7xx::ndrange7(block.x, block.y, block.z));
        uint32_t wge = 0;
        std::memcpy(&wge, command.data() + at.wge * 4, 4);
        put32(command, at.wge, a7xx::wge_cntl((wge >> 9) & 1, block.y));
    }
    // CP_EXEC_CS is the last packet (no padding follows it: the length is even).
    std::memcpy(command.data() + command.size() - 3 * 4, groups, sizeof groups);
}

// ---- submission ----

uint64_t QcomEngine::extend(uint32_t timestamp, uint64_t near) const noexcept {
    // The 64-bit ticket closest to `near` whose low 32 bits are `timestamp`.
    return near + uint64_t(int64_t(int32_t(timestamp - uint32_t(near))));
}

uint64_t QcomEngine::submit_ib(uint64_t gpuaddr, uint64_t bytes) {
    device_.check_usable();
    std::lock_guard dq(drawqueue_mutex_);
    feed_drawqueue_locked();  // older held-back submissions first
    uint64_t ticket = 0;
    if (held_head_ == held_tail_ && hand_over_locked(gpuaddr, bytes, 0, ticket)) {
        submitted_.store(ticket, std::memory_order_release);
        return ticket;
    }
    // Held back. KGSL numbers a context's submissions one by one (adreno_dispatch.c
    // get_timestamp: ++drawctxt->timestamp), so the ticket is known before KGSL takes the IB.
    ticket = submitted_.load(std::memory_order_relaxed) + 1;
    held_[held_tail_++ % kMaxInFlight] = {gpuaddr, bytes, ticket};
    submitted_.store(ticket, std::memory_order_release);
    return ticket;
}

bool QcomEngine::hand_over_locked(uint64_t ib, uint64_t bytes, uint64_t promised, uint64_t& ticket) {
    uint64_t queued = queued_.load(std::memory_order_relaxed);
    // The last known retirement first: a READTIMESTAMP only when that says KGSL is full.
    uint64_t in_kgsl = queued - completed_.load(std::memory_order_relaxed);
    if (in_kgsl >= depth_) in_kgsl = queued - completed_ticket();
    if (in_kgsl >= depth_) return false;  // KGSL would block GPU_COMMAND: hand it over later
    uint32_t ts = 0;
    int err = kgsl_.try_gpu_command(context_id(), ib, bytes, ts);
    if (err == ETIMEDOUT || err == EAGAIN) {
        // The drawqueue is shallower than assumed (a lowered context_drawqueue_size): remember.
        depth_ = uint32_t(std::max<uint64_t>(1, std::min<uint64_t>(depth_, in_kgsl)));
        return false;
    }
    uint64_t base = base_.load(std::memory_order_relaxed);
    ticket = base + extend(ts, queued - base + 1);
    std::string what;
    if (err != 0) {
        what = kgsl_.gpu_command_failure(context_id(), ib, bytes, err);
    } else if (promised != 0 && ticket != promised) {
        what = fmt::format("IOCTL_KGSL_GPU_COMMAND on KGSL context {} returned timestamp {} for a held-back submission promised timestamp {}",
                           context_id(), ts, kgsl_timestamp(promised));
    }
    if (!what.empty()) {
        std::string message = fmt::format("{} queue: {}; last retired timestamp {}", name(), what, kgsl_timestamp(completed_ticket()));
        device_.fail(message);
        throw DeviceLostError(device_.name(), message);
    }
    queued_.store(ticket, std::memory_order_release);
    return true;
}

void QcomEngine::feed_drawqueue() {
    std::lock_guard dq(drawqueue_mutex_);
    feed_drawqueue_locked();
}

void QcomEngine::feed_drawqueue_locked() {
    while (held_head_ != held_tail_) {
        const HeldBack& h = held_[held_head_ % kMaxInFlight];
        uint64_t ticket = 0;
        if (!hand_over_locked(h.ib, h.bytes, h.ticket, ticket)) return;
        ++held_head_;
    }
}

bool QcomEngine::feed_all() noexcept {
    try {
        feed_drawqueue();
        if (sibling_) sibling_->feed_drawqueue();
        return true;
    } catch (...) {
        return false;  // the device is in its error state now
    }
}

uint64_t QcomEngine::held_back() const {
    std::lock_guard dq(drawqueue_mutex_);
    return held_tail_ - held_head_;
}

uint32_t QcomEngine::drawqueue_depth() const {
    std::lock_guard dq(drawqueue_mutex_);
    return depth_;
}

uint64_t QcomEngine::submit(std::span<const std::byte> commands) {
    if (commands.size() > ring_.size() || commands.size() > uint64_t(kMaxIbDwords) * 4) {
        throw UnsupportedError(device_.name(), fmt::format("{} queue: 0x{:x} bytes of commands do not fit the 0x{:x}-byte command ring; "
                                                           "bind() the queue or open the device with a larger ?ring=",
                                                           name(), commands.size(), ring_.size()));
    }
    if (commands.empty()) return completed_ticket();
    std::lock_guard lock(submit_mutex_);
    uint64_t size = commands.size();
    uint64_t pos = head_ % ring_.size();
    if (ring_.size() - pos < size) head_ += ring_.size() - pos;  // an IB is contiguous: skip the tail
    uint64_t begin = head_, end = head_ + size;
    // Reuse ring bytes only once the IB that used them retired.
    while (!in_flight_empty() && end - in_flight_front().begin > ring_.size()) {
        wait_ticket(in_flight_front().ticket, hcq::default_timeout());
        ++in_flight_head_;
    }
    retire_in_flight(true);
    uint64_t offset = begin % ring_.size();
    std::memcpy(ring_.cpu() + offset, commands.data(), size);
    uint64_t ticket = submit_ib(ring_.address().value() + offset, size);
    head_ = end;
    push_in_flight({begin, end, ticket, ring_.address().value() + offset, size});
    return ticket;
}

uint64_t QcomEngine::submit_bound(GpuVirtualAddress commands, uint64_t size) {
    if (size > uint64_t(kMaxIbDwords) * 4) {
        throw UnsupportedError(device_.name(), fmt::format("{} queue: 0x{:x} bytes of bound commands exceed one IB (CP_INDIRECT_BUFFER "
                                                           "IB_SIZE holds at most 0x{:x} dwords)",
                                                           name(), size, kMaxIbDwords));
    }
    std::lock_guard lock(submit_mutex_);
    retire_in_flight(true);
    uint64_t ticket = submit_ib(commands.value(), size);
    push_in_flight({head_, head_, ticket, commands.value(), size});
    return ticket;
}

uint64_t QcomEngine::completed_ticket() const noexcept {
    uint32_t ts = 0;
    uint64_t base = base_.load(std::memory_order_acquire);
    uint64_t queued = queued_.load(std::memory_order_acquire) - base;
    if (kgsl_.read_retired(context_id(), ts) != 0) return completed_.load(std::memory_order_relaxed);
    uint64_t done = base + std::min(extend(ts, queued), queued);
    completed_.store(done, std::memory_order_relaxed);
    return done;
}

std::string QcomEngine::wait_failure(uint64_t ticket, int err, double waited_ms) const {
    uint64_t retired = completed_ticket();
    std::string log = kgsl_.syscalls().kernel_log(context_id());
    std::string what = err == 0 ? fmt::format("did not retire timestamp {} within {:.0f} ms", kgsl_timestamp(ticket), waited_ms)
                                : fmt::format("IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID for timestamp {} failed with {}{}", kgsl_timestamp(ticket),
                                              errno_name(err), err == EDEADLK ? " (the context was invalidated by a GPU fault)" : "");
    return fmt::format("{} queue: KGSL context {} {}; last retired timestamp {}, last submitted {}{}", name(), context_id(), what,
                       kgsl_timestamp(retired), kgsl_timestamp(submitted()), log.empty() ? "" : "; kernel log: " + log);
}

void QcomEngine::wait_ticket(uint64_t ticket, hcq::Duration timeout) {
    uint64_t start = hcq::host_now_ns();
    uint64_t deadline = start + uint64_t(std::max<int64_t>(timeout.count(), 0));
    for (;;) {
        feed_drawqueue();
        if (sibling_) sibling_->feed_drawqueue();
        if (completed_ticket() >= ticket) return;
        device_.check_usable();
        uint64_t now = hcq::host_now_ns();
        if (now >= deadline) {
            std::string message = wait_failure(ticket, 0, double(now - start) / 1e6);
            device_.fail("hang: " + message);
            throw TimeoutError(device_.name(), message);
        }
        // A finite slice, never longer than what is left of the caller's timeout.
        uint32_t ms = std::clamp<uint32_t>(ms_ceil(deadline - now), 1, 100);
        // Only a timestamp KGSL was given (kgsl_events.c kgsl_add_event: EINVAL past QUEUED); a
        // held-back ticket is reached through the ones before it.
        uint64_t target = std::min(ticket, queued());
        int err = kgsl_.wait_timestamp(context_id(), kgsl_timestamp(target), ms);
        if (err == 0 || err == ETIMEDOUT || err == EINTR || err == EAGAIN) continue;
        std::string message = wait_failure(ticket, err, double(hcq::host_now_ns() - start) / 1e6);
        device_.fail(message);
        throw DeviceLostError(device_.name(), message);
    }
}

void QcomEngine::sleep_once(uint32_t timeout_ms) noexcept {
    if (!feed_all()) return;
    uint64_t pending = queued();
    uint64_t done = completed_ticket();
    if (done >= pending) return;
    int err = kgsl_.wait_timestamp(context_id(), kgsl_timestamp(done + 1), timeout_ms);
    if (err == 0 || err == ETIMEDOUT || err == EINTR || err == EAGAIN) return;
    try {
        device_.fail(wait_failure(done + 1, err, 0));
    } catch (...) {
        device_.fail("KGSL wait failed");
    }
}

std::string QcomEngine::stuck_on(uint64_t ib, uint64_t bytes) const {
    const auto* w = reinterpret_cast<const uint32_t*>(ib);
    const uint64_t n = bytes / 4;
    for (uint64_t i = 0; i < n;) {
        uint32_t h = w[i];
        uint64_t count = (h & 0xf0000000u) == kType7 ? (h & 0x3fff) : (h & 0xf0000000u) == kType4 ? (h & 0x7f) : 0;
        uint32_t opcode = (h >> 16) & 0x7f;
        // Our 64-bit wait: CP_WAIT_REG_MEM(hi) + CP_COND_EXEC + CP_WAIT_REG_MEM(lo), 21 dwords.
        if ((h & 0xf0000000u) == kType7 && opcode == CP_WAIT_REG_MEM && i + 21 <= n && (w[i + 7] >> 16 & 0x7f) == CP_COND_EXEC) {
            uint64_t addr = uint64_t(w[i + kWaitLoAddr]) | uint64_t(w[i + kWaitLoAddr + 1]) << 32;
            uint64_t value = uint64_t(w[i + kWaitHiRef]) << 32 | w[i + kWaitLoRef];
            uint64_t now = std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(addr)).load(std::memory_order_acquire);
            if (now < value) {
                return fmt::format("executing wait for {} >= {} (value now {}; the first unsatisfied wait of the oldest unretired IB)",
                                   device_.signal_name(GpuVirtualAddress(addr)), value, now);
            }
            i += 21;
            continue;
        }
        i += 1 + count;
    }
    return "executing the oldest unretired IB (no unsatisfied wait in it)";
}

std::string QcomEngine::describe() const {
    uint64_t s = submitted(), c = completed_ticket();
    std::string ring;
    std::unique_lock lock(submit_mutex_, std::try_to_lock);
    if (lock.owns_lock() && ring_) {
        uint64_t rptr = head_;
        std::string doing;
        for (uint64_t k = in_flight_head_; k != in_flight_tail_; ++k) {
            const InFlight& f = in_flight_[k % kMaxInFlight];
            if (f.ticket > c) {
                rptr = f.begin;
                doing = ", " + stuck_on(f.ib, f.ib_bytes);
                break;
            }
        }
        ring = fmt::format("ring {} of 0x{:x} bytes, wptr=0x{:x} rptr=0x{:x} (the oldest unretired IB), {} bytes pending{}; ", ring_.address().hex(),
                           ring_.size(), head_, rptr, head_ - rptr, doing);
        uint64_t held = held_back();
        if (held != 0) ring += fmt::format("{} submissions held back (KGSL's drawqueue holds {}); ", held, drawqueue_depth());
    } else {
        ring = "rptr= wptr= (the ring is being written); ";
    }
    return fmt::format("{} (KGSL context {}): {}submitted timestamp {}, last retired timestamp {}{}", name(), context_id(), ring,
                       kgsl_timestamp(s), kgsl_timestamp(c), s > c ? fmt::format(", awaiting timestamp {}", kgsl_timestamp(c + 1)) : "");
}

}  // namespace baregpu::qcom
