#include "drivers/nv/channel_queue.hpp"

#include "base/error.hpp"
#include "drivers/nv/ce_methods.hpp"
#include "drivers/nv/compute_methods.hpp"
#include "drivers/nv/hcq_device.hpp"
#include "drivers/nv/program.hpp"
#include "drivers/nv/qmd.hpp"
#include "hcq/clock.hpp"
#include "hcq/program.hpp"
#include "hcq/signal.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fmt/format.h>
#include <thread>

namespace baregpu::nv {

namespace {

// clc6c0.h NVC6C0_NO_OPERATION (and clc7b5.h NVC7B5_NOP): data ignored.
constexpr uint32_t kNoOperation = 0x0100;
// The exec command's first NO_OPERATION data word: "BGKA" little-endian. Ours; the class ignores it.
constexpr uint32_t kExecMagic = 0x414b4742;
// An exec command: [0] NO_OPERATION header, [1] magic, [2] argument bytes | QMD version << 24, [3] where the QMD
// is (dwords from the command's start; 0 = not placed yet: kQmdAt), then 64 dwords of slack, the QMD (V03: 256
// bytes; V04/V05: 384, clcbc0qmd.h / clcec0qmd.h) and the arguments, then SEND_PCAS_A / SEND_SIGNALING_PCAS2_B.
// Where the command lands, the QMD and the arguments move down into the slack to the first 256-byte aligned
// address (SEND_PCAS_A is QMD >> 8; the arguments, constant buffer 0, follow the QMD: 64-byte aligned, what
// V04's CONSTANT_BUFFER_ADDR_SHIFTED6 can name).
constexpr size_t kExecHeader = 4, kQmdAt = kExecHeader + 64;
constexpr uint64_t kAlign = 8;  // where submissions are placed in the ring
constexpr size_t kFenceDwords = 6;            // SEM_ADDR_LO..SEM_EXECUTE
constexpr uint64_t kUserdGpGet = 0x88, kUserdGpPut = 0x8c;  // clc56f.h AmpereAControlGPFifo
constexpr uint64_t kCopyChunk = 1ull << 31;

size_t qmd_dwords(QmdVersion v) { return v == QmdVersion::v03_00 ? 64 : 96; }
// Word 2 of an exec command: constant buffer 0's bytes 15:0, where the kernel parameters sit in it (/ 16) 23:16,
// the QMD version 31:24.
uint32_t exec_args_bytes(std::span<const uint32_t> command) { return command[2] & 0xffff; }
uint32_t exec_param_offset(std::span<const uint32_t> command) { return ((command[2] >> 16) & 0xff) * 16; }
QmdVersion exec_qmd_version(std::span<const uint32_t> command) { return static_cast<QmdVersion>(command[2] >> 24); }

// Constant bank 0's driver words, as tinygrad's runtime/ops_nv.py fills them for a cubin (cbuf_0[6:12]): the
// shared-memory window, the local-memory window, then 0xfffdc0; the windows are the ones it programs too.
constexpr uint64_t kSharedWindow = 0xfe000000, kLocalWindow = 0xff000000;
constexpr uint32_t kDriverWords[6] = {static_cast<uint32_t>(kSharedWindow), 0, static_cast<uint32_t>(kLocalWindow), 0, 0xfffdc0, 0};
// clc7c0.h NVC7C0_SET_SHADER_SHARED_MEMORY_WINDOW_A/B (0x02a0: upper, lower) and SET_SHADER_LOCAL_MEMORY_WINDOW_A/B
// (0x07b0): where SASS sees shared and local memory in its generic address space. tinygrad sends these offsets on every
// compute class it drives, once per compute channel.
constexpr uint32_t kSetShaderSharedMemoryWindowA = 0x02a0, kSetShaderLocalMemoryWindowA = 0x07b0;

// The QMD a compute class reads: V04 from HOPPER_COMPUTE_A, V05 from Blackwell (Mesa NVK nak qmd.rs picks by class;
// clcbc0qmd.h, clcec0qmd.h), else V03 (clc6c0qmd.h).
QmdVersion qmd_version_for(uint32_t compute_class) {
    if (compute_class == BLACKWELL_COMPUTE_B) return QmdVersion::v05_00;
    if (compute_class == HOPPER_COMPUTE_A) return QmdVersion::v04_00;
    return QmdVersion::v03_00;
}

uint32_t lo(uint64_t v) { return static_cast<uint32_t>(v); }
uint32_t hi(uint64_t v) { return static_cast<uint32_t>(v >> 32); }

struct Header {
    unsigned sec_op, subchannel;
    uint32_t method;  // byte offset
    uint32_t count;
    size_t dwords() const { return sec_op == 4 ? 1 : 1 + size_t{count}; }
};
Header decode(uint32_t h) { return {h >> 29, (h >> 13) & 7, (h & 0xfff) << 2, (h >> 16) & 0x1fff}; }

std::span<uint32_t> words_of(std::span<std::byte> b) { return {reinterpret_cast<uint32_t*>(b.data()), b.size() / 4}; }

// NO_OPERATION filler of exactly n dwords on `subchannel`.
void fill(uint32_t* w, size_t n, unsigned subchannel) {
    if (n == 0) return;
    if (n == 1) {
        w[0] = method_immediate(subchannel, kNoOperation, 0);
        return;
    }
    w[0] = method_nonincr(subchannel, kNoOperation, static_cast<uint32_t>(n - 1));
    std::fill(w + 1, w + n, 0u);
}

bool is_exec(std::span<const uint32_t> w, size_t i) {
    const Header h = decode(w[i]);
    return h.sec_op == 3 && h.subchannel == kComputeSubchannel && h.method == kNoOperation && i + 2 < w.size() &&
           w[i + 1] == kExecMagic && h.count > kQmdAt + qmd_dwords(exec_qmd_version(w.subspan(i)));
}
size_t qmd_at(std::span<const uint32_t> command) { return command[3] != 0 ? command[3] : kQmdAt; }

// Moves every exec command's QMD and arguments in `w` (which lives at GPU VA `va`) to their aligned place
// and fills in the addresses.
void fixup(std::span<uint32_t> w, uint64_t va) {
    for (size_t i = 0; i < w.size();) {
        const Header h = decode(w[i]);
        if (is_exec(w, i)) {
            const uint32_t args_bytes = exec_args_bytes(w.subspan(i));
            const QmdVersion version = exec_qmd_version(w.subspan(i));
            const size_t dwords = qmd_dwords(version);
            const size_t from = i + qmd_at(w.subspan(i)), block = dwords + args_bytes / 4;
            size_t to = i + kExecHeader;
            while ((va + to * 4) % 256 != 0) ++to;
            std::memmove(&w[to], &w[from], block * 4);
            w[i + 3] = static_cast<uint32_t>(to - i);
            const uint64_t qmd_va = va + to * 4;
            Qmd q(version, w.subspan(to, dwords));
            q.set_constant_buffer(0, qmd_va + dwords * 4, args_bytes);
            std::copy(q.words().begin(), q.words().end(), w.begin() + static_cast<ptrdiff_t>(to));
            const size_t next = i + h.dwords();  // SEND_PCAS_A
            w[next + 1] = static_cast<uint32_t>(qmd_va >> 8);
        }
        i += h.dwords();
    }
}

}  // namespace

ChannelQueue::ChannelQueue(NvHcqDevice& device, Config config)
    : Engine(config.kind, config.name), device_(device), config_(std::move(config)) {
    const uint64_t r = config_.ring_bytes;
    if (r < 4096 || (r & (r - 1)) != 0)
        throw Error(device.name(), fmt::format("{}: command ring of {} bytes: a power of two of at least 4 KiB is needed", name(), r));
    const uint32_t e = config_.gpfifo_entries;
    if (e < 4 || (e & (e - 1)) != 0 || e > (1u << 20))
        throw Error(device.name(), fmt::format("{}: {} GPFIFO entries: a power of two from 4 to 2^20 is needed", name(), e));
}

ChannelQueue::~ChannelQueue() { stop(); }

void ChannelQueue::start() {
    // The GP ring and its USERD right after it (tinygrad's layout; the RM model's USERD simplification).
    userd_offset_ = (uint64_t{config_.gpfifo_entries} * 8 + 511) & ~uint64_t{511};
    channel_mem_ = device_.allocate_owned(userd_offset_ + 4096, {.cpu_access = true, .uncached = true});
    std::memset(channel_mem_.cpu(), 0, userd_offset_ + 4096);
    ring_ = device_.allocate_owned(config_.ring_bytes, {.host = true, .uncached = true});
    control_ = device_.allocate_owned(4096, {.host = true, .uncached = true});
    std::memset(control_.cpu(), 0, 4096);
    open_channel();
}

void ChannelQueue::open_channel() {
    std::lock_guard q(mutex_);
    open_channel_locked();
}

void ChannelQueue::open_channel_locked() {
    gpfifo_.emplace(std::span(reinterpret_cast<uint64_t*>(channel_mem_.cpu()), config_.gpfifo_entries));
    RmDevice& rm = device_.rm();
    qmd_version_ = qmd_version_for(rm.classes().compute);
    host_ = rm.classes().gpfifo == AMPERE_CHANNEL_GPFIFO_A ? HostClass::ampere_c56f : HostClass::hopper_c86f;
    {
        std::lock_guard lock(device_.rm_mutex());
        // USERD is read by the GPU from the physical pages of hUserdMemory at userdOffset (kernel_channel_gv100.c
        // kchannelGetUserdInfo): the memory object that holds the ring and the USERD we write GPPut into. Where the
        // platform's memory is not RM's (nvpci), RM gets an object of its own (README: the physical userdMem is
        // not passed yet).
        NvHandle userd = device_.platform().memory_object(channel_mem_.address());
        if (userd == 0) userd = rm_memory_ = rm.alloc_vram(userd_offset_ + 4096, 4096);
        RmChannelSpec spec;
        spec.engine_class = compute() ? rm.classes().compute : rm.classes().copy;
        spec.memory = userd;
        spec.gpfifo_va = channel_mem_.address().value();
        spec.entries = config_.gpfifo_entries;
        spec.userd_offset = userd_offset_;
        spec.error_notifier = device_.platform().new_error_notifier();
        RmChannel ch = rm.create_channel(spec);
        rm_channel_ = ch.channel;
        // The compute channel's GRCE: the copy class on subchannel 4, for timestamps.
        if (compute()) rm.rm().alloc_empty(rm.client(), rm_channel_, rm.classes().copy);
        token_ = ch.work_submit_token;
        device_.platform().channel_opened(token_, spec.error_notifier);
        rm.schedule();
    }
    device_.channel_opened(token_, name());
    started_ = true;

    // Bind the classes to their subchannels.
    uint32_t words[16];
    PushBuffer pb(words);
    if (compute()) {
        compute_set_object(pb, kComputeSubchannel, static_cast<ComputeClass>(rm.classes().compute));
        pb.incr(kComputeSubchannel, kSetShaderSharedMemoryWindowA, {static_cast<uint32_t>(kSharedWindow >> 32), static_cast<uint32_t>(kSharedWindow)})
            .incr(kComputeSubchannel, kSetShaderLocalMemoryWindowA, {static_cast<uint32_t>(kLocalWindow >> 32), static_cast<uint32_t>(kLocalWindow)});
    }
    ce_set_object(pb, kCopySubchannel, static_cast<CopyClass>(rm.classes().copy));
    const uint64_t bytes = pb.size_dwords() * 4 + kFenceDwords * 4;
    const uint64_t at = reserve(bytes);
    std::memcpy(ring_.cpu() + at, words, pb.size_dwords() * 4);
    wptr_ += bytes;
    PushBuffer(std::span(reinterpret_cast<uint32_t*>(ring_.cpu() + at + pb.size_dwords() * 4), kFenceDwords))
        .sem_release(control_.address().value(), wptr_, /*timestamp=*/false);
    push_entry(ring_.address().value() + at, bytes);
    ring_doorbell();
}

void ChannelQueue::stop() noexcept {
    if (!started_) return;
    started_ = false;
    device_.channel_closed(token_);
    try {
        std::lock_guard lock(device_.rm_mutex());
        device_.platform().channel_closed(token_);
        device_.rm().free_object(device_.rm().channel_group(), rm_channel_);
        if (rm_memory_ != 0) device_.rm().free_object(device_.rm().device(), rm_memory_);
        rm_memory_ = 0;
    } catch (...) {
        // GSP gone or hung: nothing more to take down.
    }
}

void ChannelQueue::restart() {
    std::lock_guard q(mutex_);
    // RM frees the faulted channel (the engines forget it) and allocates a new one on the same memory:
    // GP ring and USERD zeroed, everything handed out so far counts as done (tickets stay monotonic).
    stop();
    std::memset(channel_mem_.cpu(), 0, userd_offset_ + 4096);
    hcq::store_release(*reinterpret_cast<uint64_t*>(control_.cpu()), wptr_);
    open_channel_locked();
}

void ChannelQueue::release() noexcept {
    gpfifo_.reset();
    channel_mem_ = {};
    ring_ = {};
    control_ = {};
}

uint32_t* ChannelQueue::append(hcq::CommandBuffer& out, size_t dwords) {
    // HCQ commands are multiples of 8 bytes. The copy queue's filler is an immediate host WFI (harmless:
    // the engine is idle between commands anyway), the compute queue's a compute NO_OPERATION.
    const size_t padded = (dwords + 1) & ~size_t{1};
    auto* w = reinterpret_cast<uint32_t*>(out.append(padded * 4));
    if (compute()) {
        fill(w + dwords, padded - dwords, kComputeSubchannel);
    } else if (padded != dwords) {
        w[dwords] = method_immediate(kHostSubchannel, host::WFI, 0);
    }
    return w;
}

void ChannelQueue::emit(hcq::CommandBuffer& out, const PushBuffer& pb) {
    const std::span<const uint32_t> w = pb.dwords();
    std::copy(w.begin(), w.end(), append(out, w.size()));
}

void ChannelQueue::encode_wait(hcq::CommandBuffer& out, GpuVirtualAddress signal, uint64_t value) {
    uint32_t w[16];
    PushBuffer pb(w, host_);
    // Ampere/Ada: ACQ_STRICT_GEQ, a plain 64-bit compare (HCQ signals are counters). Hopper on: the host class lists
    // ACQUIRE, RELEASE and ACQ_CIRC_GEQ only (clc86f.h SEM_EXECUTE_OPERATION; UVM's Hopper HAL waits with
    // ACQ_CIRC_GEQ, uvm_hopper_host.c), wrap-aware over the 64-bit payload: right while a signal is less than 2^63
    // ahead of the value awaited.
    const SemOperation op = host_ == HostClass::ampere_c56f ? SemOperation::acq_strict_geq : SemOperation::acq_circ_geq;
    emit(out, pb.semaphore(signal.value(), value, SemExecute{.operation = op, .payload_64bit = true}));
}

void ChannelQueue::encode_signal(hcq::CommandBuffer& out, GpuVirtualAddress signal, uint64_t value) {
    uint32_t w[16];
    PushBuffer pb(w);
    emit(out, pb.sem_release(signal.value(), value, /*timestamp=*/true));
}

void ChannelQueue::encode_timestamp(hcq::CommandBuffer& out, GpuVirtualAddress dst) {
    uint32_t w[32];
    PushBuffer pb(w);
    const uint64_t scratch = control_.address().value() + 0x100;
    pb.sem_release(scratch, 0, /*timestamp=*/true);
    ce_copy(pb, kCopySubchannel, scratch + 8, dst.value(), 8);
    emit(out, pb);
}

void ChannelQueue::encode_memory_barrier(hcq::CommandBuffer& out) {
    uint32_t w[4];
    PushBuffer pb(w);
    emit(out, pb.incr(kHostSubchannel, host::WFI, {0}));
}

void ChannelQueue::encode_exec(hcq::CommandBuffer& out, const hcq::Program& program, std::span<const std::byte> kernargs,
                               hcq::Dim3 grid, hcq::Dim3 block) {
    if (!compute()) throw std::logic_error("the NV copy queue records no launches");
    const auto& p = static_cast<const NvProgram&>(program);
    // Constant buffer 0: the kernel arguments (host code); for a cubin its .nv.constant0 image with the driver words
    // and the parameters at EIATTR_PARAM_CBANK's offset.
    const std::optional<NvCubinLaunch>& cubin = p.cubin();
    const uint32_t param_offset = cubin ? cubin->param_offset : 0;
    const size_t cb_used = cubin ? std::max<size_t>(cubin->constant_bank0.size(), param_offset + kernargs.size()) : kernargs.size();
    const uint32_t args_bytes = static_cast<uint32_t>(std::max<size_t>(16, (cb_used + 15) & ~size_t{15}));
    if (args_bytes > 0xffff || param_offset % 16 != 0 || param_offset / 16 > 0xff)
        throw std::invalid_argument(fmt::format("{}: constant buffer 0 of {} bytes with the parameters at +{:#x} does not fit an exec "
                                                "command", name(), args_bytes, param_offset));
    const size_t args_dwords = args_bytes / 4;
    const size_t args_at = kQmdAt + qmd_dwords(qmd_version_), launch_at = args_at + args_dwords;
    uint32_t* w = append(out, launch_at + 4);
    w[0] = method_nonincr(kComputeSubchannel, kNoOperation, static_cast<uint32_t>(launch_at - 1));
    std::fill(w + 1, w + launch_at, 0u);
    w[1] = kExecMagic;
    w[2] = args_bytes | (param_offset / 16) << 16 | static_cast<uint32_t>(qmd_version_) << 24;
    w[3] = 0;  // not placed
    Qmd q(qmd_version_);
    q.set_grid(grid.x, grid.y, grid.z);
    q.set_block(block.x, block.y, block.z);
    q.set_program_address(p.program_address());
    q.set_constant_buffer(0, 0, args_bytes);  // the address: where the command lands (fixup)
    q.invalidate_caches();
    if (cubin) {
        // What the SASS was built for (its .nv.info): registers per thread, named barriers, shared memory per CTA (256-byte
        // granules), and the SM's shared-memory carve-out (tinygrad runtime/ops_nv.py: the smallest of 32/64/100 KiB that
        // holds it, as KiB / 4 + 1, max 0x1a).
        q.set_register_count(cubin->registers);
        q.set_barrier_count(cubin->barriers);
        const uint32_t shared = (cubin->shared_bytes + 255) & ~uint32_t{255};
        q.set_shared_memory_size(shared);
        uint32_t carve = 100;
        for (uint32_t kib : {32u, 64u, 100u}) {
            if (kib * 1024 >= shared) {
                carve = kib;
                break;
            }
        }
        q.set_sm_config_shared_mem(carve / 4 + 1, 0x1a, carve / 4 + 1);
        std::memcpy(w + args_at, cubin->constant_bank0.data(), cubin->constant_bank0.size());
        std::memcpy(w + args_at + 6, kDriverWords, sizeof kDriverWords);
    }
    std::copy(q.words().begin(), q.words().end(), w + kQmdAt);
    if (!kernargs.empty()) std::memcpy(reinterpret_cast<std::byte*>(w + args_at) + param_offset, kernargs.data(), kernargs.size());
    PushBuffer pb(std::span(w + launch_at, 4));
    compute_launch(pb, kComputeSubchannel, 0, compute::kPcasActionSchedule);
}

void ChannelQueue::encode_copy(hcq::CommandBuffer& out, GpuVirtualAddress dst, GpuVirtualAddress src, uint64_t size) {
    if (compute()) throw std::logic_error("the NV compute queue records no copies: copies go to the copy queue");
    for (uint64_t done = 0; done < size;) {
        const uint64_t n = std::min(size - done, kCopyChunk);
        uint32_t w[32];
        PushBuffer pb(w);
        ce_copy(pb, kCopySubchannel, src.value() + done, dst.value() + done, n);
        emit(out, pb);
        done += n;
    }
}

void ChannelQueue::patch(std::span<std::byte> command, hcq::Field field, uint64_t value) {
    std::span<uint32_t> w = words_of(command);
    for (size_t i = 0; i < w.size(); i += decode(w[i]).dwords()) {
        const Header h = decode(w[i]);
        if (h.subchannel == kHostSubchannel && h.method == host::SEM_ADDR_LO && h.count == 5 &&
            (field == hcq::Field::signal_address || field == hcq::Field::signal_value)) {
            const size_t at = field == hcq::Field::signal_address ? 1 : 3;
            w[i + at] = lo(value);
            w[i + at + 1] = hi(value);
            return;
        }
        if (h.subchannel == kCopySubchannel && h.method == ce::OFFSET_IN_UPPER && h.count == 4) {
            if (field == hcq::Field::timestamp_address || field == hcq::Field::copy_dst) {
                w[i + 3] = hi(value);
                w[i + 4] = lo(value);
                return;
            }
            if (field == hcq::Field::copy_src) {
                w[i + 1] = hi(value);
                w[i + 2] = lo(value);
                return;
            }
        }
        if (h.subchannel == kCopySubchannel && h.method == ce::LINE_LENGTH_IN && field == hcq::Field::copy_size) {
            if (value == 0 || value > 0xffffffffu) throw std::out_of_range("NV copy: a patched size must be 1 .. 2^32 - 1 bytes");
            w[i + 1] = lo(value);
            return;
        }
    }
    throw std::logic_error(fmt::format("{}: no field {} in this command", name(), static_cast<int>(field)));
}

void ChannelQueue::patch_exec_args(std::span<std::byte> command, uint32_t offset, std::span<const std::byte> bytes) {
    const std::span<const uint32_t> w = words_of(command);
    const size_t at = (qmd_at(w) + qmd_dwords(exec_qmd_version(w))) * 4 + exec_param_offset(w) + offset;
    if (at + bytes.size() > command.size()) throw std::out_of_range("kernel argument patch outside the exec command");
    std::memcpy(command.data() + at, bytes.data(), bytes.size());
}

void ChannelQueue::patch_exec_dims(std::span<std::byte> command, hcq::Dim3 grid, hcq::Dim3 block) {
    std::span<uint32_t> w = words_of(command);
    const size_t at = qmd_at(w);
    const QmdVersion version = exec_qmd_version(w);
    Qmd q(version, w.subspan(at, qmd_dwords(version)));
    q.set_grid(grid.x, grid.y, grid.z);
    q.set_block(block.x, block.y, block.z);
    std::copy(q.words().begin(), q.words().end(), w.begin() + static_cast<ptrdiff_t>(at));
}

void ChannelQueue::relocate(std::span<std::byte> commands, GpuVirtualAddress address) {
    fixup(words_of(commands), address.value());
}

uint32_t ChannelQueue::userd_gp_get() const {
    uint32_t v;
    std::memcpy(&v, channel_mem_.cpu() + userd_offset_ + kUserdGpGet, 4);
    std::atomic_thread_fence(std::memory_order_acquire);
    return v;
}

uint64_t ChannelQueue::completed_ticket() const noexcept {
    return control_ ? hcq::load_acquire(*reinterpret_cast<const uint64_t*>(control_.cpu())) : 0;
}

void ChannelQueue::wait_completed(uint64_t position, uint64_t bytes) {
    if (completed_ticket() >= position) return;
    const uint64_t deadline = hcq::host_now_ns() + static_cast<uint64_t>(hcq::default_timeout().count());
    while (completed_ticket() < position) {
        device_.check_usable();
        device_.check_faults();
        if (hcq::host_now_ns() > deadline)
            throw TimeoutError(device_.name(), fmt::format("{}: the command ring stayed full ({} bytes needed, waiting for ticket {}); {}",
                                                           name(), bytes, position, describe()));
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
}

uint64_t ChannelQueue::reserve(uint64_t bytes) {
    // Caller holds mutex_. kAlign-aligned start; no submission wraps the ring end (the rest of the lap is skipped).
    const uint64_t ring = config_.ring_bytes;
    uint64_t start = (wptr_ + kAlign - 1) & ~(kAlign - 1);
    if (start % ring + bytes > ring) start = (start / ring + 1) * ring;
    // [start, start + bytes) reuses ring bytes last written at positions start - ring ..: those that were
    // written (below wptr_) must have completed.
    if (start + bytes > ring) wait_completed(std::min(start + bytes - ring, wptr_), bytes);
    wptr_ = start;
    return start % ring;
}

void ChannelQueue::push_entry(uint64_t va, uint64_t bytes) {
    const GpEntry e = gp_entry(va, static_cast<uint32_t>(bytes / 4));
    if (gpfifo_->try_push(e, userd_gp_get())) return;  // the common case: no waiting, nothing allocated
    // Full: wait for GPGet (bounded; faults end the wait). One pointer captured: std::function keeps it inline.
    struct Wait {
        ChannelQueue* q;
        uint64_t deadline;
        bool timed_out = false;
    } w{this, hcq::host_now_ns() + static_cast<uint64_t>(hcq::default_timeout().count())};
    Wait* wp = &w;
    const bool ok = gpfifo_->push(e, [wp] { return wp->q->userd_gp_get(); }, [wp] {
        wp->q->device_.check_usable();
        wp->q->device_.check_faults();
        if (hcq::host_now_ns() > wp->deadline) {
            wp->timed_out = true;
            return false;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        return true;
    });
    if (!ok) {
        throw TimeoutError(device_.name(), fmt::format("{}: the GPFIFO stayed full ({} entries, GPGet {} put {}) for {} ms{}; {}", name(),
                                                       gpfifo_->size(), userd_gp_get(), gpfifo_->put(),
                                                       hcq::default_timeout().count() / 1000000, w.timed_out ? "" : " (device failed)",
                                                       describe()));
    }
}

void ChannelQueue::ring_doorbell() {
    // USERD.GPPut, a barrier, then the doorbell (NV_VIRTUAL_FUNCTION_DOORBELL, tu102 dev_vm.h) with the
    // work-submit token, as tinygrad's ops_nv.py _submit_to_gpfifo does.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const uint32_t put = gpfifo_->put();
    std::memcpy(channel_mem_.cpu() + userd_offset_ + kUserdGpPut, &put, 4);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    device_.platform().ring_doorbell(token_);
}

uint64_t ChannelQueue::submit(std::span<const std::byte> commands) {
    if (commands.size() > max_submit_bytes()) {
        throw UnsupportedError(device_.name(), fmt::format("{}: {} bytes of commands do not fit in the {}-byte ring; bind() the queue",
                                                           name(), commands.size(), config_.ring_bytes));
    }
    std::lock_guard lock(mutex_);
    const uint64_t bytes = commands.size() + kFenceDwords * 4;
    const uint64_t at = reserve(bytes);
    std::byte* dst = ring_.cpu() + at;
    std::memcpy(dst, commands.data(), commands.size());
    fixup(std::span(reinterpret_cast<uint32_t*>(dst), commands.size() / 4), ring_.address().value() + at);
    const uint64_t ticket = wptr_ + bytes;
    PushBuffer(std::span(reinterpret_cast<uint32_t*>(dst + commands.size()), kFenceDwords))
        .sem_release(control_.address().value(), ticket, /*timestamp=*/false);
    wptr_ = ticket;
    push_entry(ring_.address().value() + at, bytes);
    ring_doorbell();
    return ticket;
}

uint64_t ChannelQueue::submit_bound(GpuVirtualAddress commands, uint64_t size) {
    std::lock_guard lock(mutex_);
    const uint64_t at = reserve(kFenceDwords * 4);
    const uint64_t ticket = wptr_ + kFenceDwords * 4;
    PushBuffer(std::span(reinterpret_cast<uint32_t*>(ring_.cpu() + at), kFenceDwords))
        .sem_release(control_.address().value(), ticket, /*timestamp=*/false);
    wptr_ = ticket;
    push_entry(commands.value(), size);
    push_entry(ring_.address().value() + at, kFenceDwords * 4);
    ring_doorbell();
    return ticket;
}

void ChannelQueue::wait_ticket(uint64_t ticket, hcq::Duration timeout) {
    const uint64_t deadline = hcq::host_now_ns() + static_cast<uint64_t>(timeout.count());
    for (unsigned spin = 0; completed_ticket() < ticket; ++spin) {
        device_.check_usable();
        if (spin % 64 == 0) device_.check_faults();
        if (hcq::host_now_ns() > deadline) {
            throw TimeoutError(device_.name(), fmt::format("{}: submission {} not done after {} ms; {}", name(), ticket,
                                                           std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count(),
                                                           describe()));
        }
        if (spin > 256) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
}

uint64_t ChannelQueue::max_submit_bytes() const {
    // One submission never wraps: the ring less the fence and the worst placement alignment.
    return config_.ring_bytes - kFenceDwords * 4 - kAlign;
}

std::string ChannelQueue::describe() const {
    const uint32_t get = channel_mem_ ? userd_gp_get() : 0;
    const uint32_t put = gpfifo_ ? gpfifo_->put() : 0;
    const uint32_t pending = (put + config_.gpfifo_entries - get) % config_.gpfifo_entries;
    std::string doing = "idle";
    if (pending != 0 && channel_mem_ && ring_) {
        // What the PBDMA stopped at: the segment of the GP entry at GPGet (ENTRY0 GET 31:2, ENTRY1 GET_HI 7:0,
        // LENGTH 30:10), when it lies in the command ring.
        uint64_t raw;
        std::memcpy(&raw, channel_mem_.cpu() + uint64_t{get} * 8, 8);
        const uint64_t va = (raw & 0xfffffffcu) | ((raw >> 32) & 0xff) << 32;
        const uint64_t dwords = (raw >> 42) & 0x1fffff;
        const uint64_t base = ring_.address().value();
        doing = fmt::format("executing the commands at {:#x}", va);
        if (va >= base && va + dwords * 4 <= base + config_.ring_bytes) {
            const auto* w = reinterpret_cast<const uint32_t*>(ring_.cpu() + (va - base));
            for (uint64_t i = 0; i < dwords; i += decode(w[i]).dwords()) {
                const Header h = decode(w[i]);
                if (h.subchannel == kHostSubchannel && h.method == host::SEM_ADDR_LO && h.count == 5 && (w[i + 5] & 7) != 1) {
                    doing = fmt::format("executing wait for {:#x} >= {}", uint64_t{w[i + 1]} | uint64_t{w[i + 2]} << 32,
                                        uint64_t{w[i + 3]} | uint64_t{w[i + 4]} << 32);
                    break;
                }
                if (h.subchannel == kComputeSubchannel && h.method == kNoOperation && h.sec_op == 3 && i + 1 < dwords &&
                    w[i + 1] == kExecMagic) {  // an exec command
                    doing = "executing a kernel launch";
                    break;
                }
            }
        }
    }
    return fmt::format("{} (channel token {}): GPFIFO {:#x} of {} entries, rptr={} wptr={} (GPGet / GPPut), {} entries pending, {}; "
                       "command ring {:#x}, {} bytes written, completed ticket {}",
                       name(), token_, channel_mem_ ? channel_mem_.address().value() : 0, config_.gpfifo_entries, get, put, pending,
                       doing, ring_ ? ring_.address().value() : 0, hcq::load_acquire(wptr_), completed_ticket());
}

}  // namespace baregpu::nv
