#include "drivers/am/compute_queue.hpp"

#include "base/error.hpp"
#include "drivers/am/dwords.hpp"
#include "drivers/am/hcq_device.hpp"
#include "drivers/am/mqd.hpp"
#include "drivers/am/program.hpp"
#include "drivers/am/wait.hpp"
#include "hcq/clock.hpp"
#include "hcq/program.hpp"
#include "hcq/signal.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fmt/format.h>
#include <thread>

namespace baregpu::am {

namespace {

using namespace pm4;

// The kernarg NOP's first payload dword: "BGKA" in little-endian bytes. Ours, not the hardware's:
// the CP skips a NOP's payload whatever it holds.
constexpr uint32_t kKernargMagic = 0x414b4742;
// NOP header, magic, kernarg SGPR index, dispatch packet: 0, or (its user SGPR index + 1) | (its byte
// offset from the kernargs) << 8.
constexpr uint32_t kKernargHeaderDwords = 4;
// hsa.h hsa_kernel_dispatch_packet_t (64 bytes): header u16 @0, setup u16 @2 (dimensions in bits 1:0),
// workgroup_size_x/y/z u16 @4/6/8, grid_size_x/y/z u32 @12/16/20 (work-items), private_segment_size
// u32 @24, group_segment_size u32 @28, kernel_object u64 @32, kernarg_address u64 @40, reserved u64
// @48, completion_signal u64 @56. What a kernel that enables ENABLE_SGPR_DISPATCH_PTR reads its launch
// from (tinygrad ops_amd.py AMDComputeQueue.exec builds one after the kernargs; ROCr's AQL queues
// hand the packet itself).
constexpr uint32_t kDispatchPacketBytes = 64;
void fill_dispatch_packet(uint32_t* p, const std::array<uint32_t, 3>& grid, const std::array<uint32_t, 3>& block,
                          uint32_t group_segment_bytes) {
    std::memset(p, 0, kDispatchPacketBytes);
    p[0] = 3u << 16;  // header 0, setup.dimensions 3
    p[1] = (block[0] & 0xffff) | (block[1] & 0xffff) << 16;
    p[2] = block[2] & 0xffff;
    p[3] = grid[0] * block[0];
    p[4] = grid[1] * block[1];
    p[5] = grid[2] * block[2];
    p[7] = group_segment_bytes;
}
// PACKET3(PACKET3_NOP, 0x3FFF): one dword (Linux gfx_v11_0.c ring funcs .nop).
constexpr uint32_t kNop1 = packet3(kNop, 0x3FFF);
constexpr uint32_t kFenceDwords = 8;  // RELEASE_MEM
// SET_SH_REG's register offset (dword 1) of COMPUTE_USER_DATA_0 and COMPUTE_START_X.
constexpr uint32_t kUserData0 = kGcBaseSeg0 + reg::COMPUTE_USER_DATA_0 - kShRegStart;
constexpr uint32_t kStartX = kGcBaseSeg0 + reg::COMPUTE_START_X - kShRegStart;


// Dwords of the packet whose header is `h` (ours are all type 3).
uint64_t packet_dwords(uint32_t h) {
    const uint32_t count = (h >> 16) & 0x3FFF;
    if (((h >> 8) & 0xFF) == kNop && count == 0x3FFF) return 1;
    return uint64_t{count} + 2;
}
uint32_t opcode(uint32_t h) { return (h >> 8) & 0xFF; }


// Points each dispatch at the arguments its kernarg NOP carries, wherever the two packets landed:
// fed every packet in order with its words (writable) and the GPU address they live at.
struct KernargFixup {
    uint64_t kernargs = 0, dispatch_packet = 0;
    uint32_t sgpr = 0, dispatch_sgpr = 0;
    void packet(uint32_t* w, uint64_t n, uint64_t va) {
        const uint32_t op = opcode(w[0]);
        if (op == kNop && n >= kKernargHeaderDwords && w[1] == kKernargMagic) {
            kernargs = va + kKernargHeaderDwords * 4;
            sgpr = w[2];
            dispatch_packet = 0;
            if (w[3] != 0) {
                // The packet follows the kernargs in the same NOP; its kernarg_address (@40) is where
                // the kernargs landed.
                dispatch_sgpr = (w[3] & 0xff) - 1;
                const uint32_t at = kKernargHeaderDwords + (w[3] >> 8) / 4;
                dispatch_packet = kernargs + (w[3] >> 8);
                w[at + 10] = lo(kernargs);
                w[at + 11] = hi(kernargs);
            }
        } else if (op == kSetShReg && w[1] == kUserData0 && kernargs != 0) {
            w[2 + sgpr] = lo(kernargs);
            w[3 + sgpr] = hi(kernargs);
            if (dispatch_packet != 0) {
                w[2 + dispatch_sgpr] = lo(dispatch_packet);
                w[3 + dispatch_sgpr] = hi(dispatch_packet);
            }
            kernargs = dispatch_packet = 0;
        }
    }
};

// Appends `dwords` dwords, rounded up to a multiple of 2 with a one-dword NOP (commands are 8-byte
// multiples), and returns a writer over the first `dwords`.
Pm4Writer append(hcq::CommandBuffer& out, size_t dwords) {
    const size_t padded = (dwords + 1) & ~size_t{1};
    auto* p = reinterpret_cast<uint32_t*>(out.append(padded * 4));
    if (padded != dwords) p[dwords] = kNop1;
    return Pm4Writer(std::span<uint32_t>(p, dwords));
}

}  // namespace

ComputeQueueEngine::ComputeQueueEngine(AmHcqDevice& device, GcGen gen, uint32_t queue, uint64_t ring_bytes)
    : RingQueue(device, hcq::QueueKind::compute, queue == 0 ? "compute" : fmt::format("compute:{}", queue), ring_bytes / 4, 4),
      gen_(gen), queue_(queue), doorbell_slot_(mqd::kDoorbellMecRing0 + queue),
      skip_dispatch_packet_(device.chip().skip_step() == SkipStep::dispatch_packet) {
    if (queue >= 8) throw Error(device.name(), fmt::format("compute queue {}: MEC 1 pipe 0 has queues 0-7", queue));
}

ComputeQueueEngine::~ComputeQueueEngine() { stop(); }

void ComputeQueueEngine::start() {
    allocate_ring();
    eop_ = device_.allocate_owned(4096, {});
    mqd_ = device_.allocate_owned(sizeof(mqd::ComputeMqd), {});
    activate();
}

void ComputeQueueEngine::activate() {
    AmDevice& chip = device_.chip();
    Registers& regs = chip.regs();
    const RegisterTable& t = regs.table();
    mqd::ComputeQueueConfig c;
    c.gen = gen_;
    c.mqd_mc_address = chip.fb_base() + device_.physical(mqd_.address());
    c.ring_va = ring_.address().value();
    c.ring_bytes = ring_units_ * 4;
    c.rptr_va = rptr_address().value();
    c.wptr_va = wptr_address().value();
    c.eop_va = eop_.address().value();
    c.eop_bytes = 4096;
    c.doorbell_slot = doorbell_slot_;
    const mqd::ComputeMqd image = mqd::build_compute_mqd(c);
    chip.vram().write(device_.physical(mqd_.address()), std::as_bytes(std::span(image)));

    // GRBM_GFX_CNTL: PIPEID bits 0-1, MEID bits 2-3, QUEUEID bits 8-10 (gc_11_0_0_sh_mask.h; the
    // same in gc_12_0_0_sh_mask.h).
    regs.write(t.grbm_gfx_cntl, (1u << 2) | (queue_ << 8));
    if (regs.read(t.cp_hqd_active) & 1) {
        // A queue a previous owner left running (a crash), or recover() taking down a hung one: take it
        // down before reprogramming it. DEQUEUE_REQ 2 resets its waves, which may be mid-dispatch, so
        // it gets a second, not the 100 ms (adev->usec_timeout) Linux gfx_v11_0 gives a queue it finds
        // active at init, which is idle there (the simulated chip's engine thread, descheduled on a
        // loaded host, has taken over 100 ms to end a dispatch).
        regs.write(t.cp_hqd_dequeue_request, 2);
        wait_reg(regs, t.cp_hqd_active, 1, 0, std::chrono::seconds(1), "a stale compute queue to dequeue");
    }
    // The MQD's register block mirrors CP_MQD_BASE_ADDR .. CP_HQD_PQ_WPTR_HI (the same contiguous
    // 0x1fa9..0x1fe0 block on GC 11 and GC 12); written one by one (tinygrad ip.py AM_GFX.setup_ring), then the
    // queue goes active.
    const uint32_t first = regs.address(t.cp_mqd_base_addr);
    const uint32_t active = regs.address(t.cp_hqd_active);
    // A register table whose block does not line up with the MQD's would program the wrong registers.
    if (active - first != mqd::dw::cp_hqd_active - mqd::dw::cp_mqd_base_addr_lo)
        throw std::logic_error("the register table's CP_HQD_* block does not match the MQD register block");
    std::span<const uint32_t> block = mqd::register_block(image);
    for (size_t i = 0; i < block.size(); ++i) {
        if (first + i == active) continue;  // last, below
        regs.mmio().write(static_cast<uint32_t>(first + i), block[i]);
    }
    regs.write(t.cp_hqd_active, 1);
    device_.flush_hdp();
    regs.write(t.grbm_gfx_cntl, 0);
    active_ = true;
}

void ComputeQueueEngine::stop() noexcept {
    if (!active_) return;
    active_ = false;
    try {
        Registers& regs = device_.chip().regs();
        const RegisterTable& t = regs.table();
        regs.write(t.grbm_gfx_cntl, (1u << 2) | (queue_ << 8));
        if (regs.read(t.cp_hqd_active) & 1) {
            regs.write(t.cp_hqd_dequeue_request, 2);  // RESET_WAVES (Linux amdgpu_amdkfd_gfx_v11.c hqd_destroy)
            poll_until(device_.chip().pci(), std::chrono::milliseconds(100), [&] { return (regs.read(t.cp_hqd_active) & 1) == 0; });
        }
        regs.write(t.grbm_gfx_cntl, 0);
    } catch (...) {
        // The chip is gone or hung: nothing more to take down.
    }
}

void ComputeQueueEngine::release() noexcept {
    eop_ = {};
    mqd_ = {};
    RingQueue::release();
}

void ComputeQueueEngine::restart() {
    std::lock_guard lock(mutex_);
    stop();
    reset_pointers();
    activate();
}

void ComputeQueueEngine::encode_wait(hcq::CommandBuffer& out, GpuVirtualAddress signal, uint64_t value) {
    append(out, 9).wait_reg_mem64(signal.value(), pm4::Compare::ge, value);
}

void ComputeQueueEngine::encode_signal(hcq::CommandBuffer& out, GpuVirtualAddress signal, uint64_t value) {
    append(out, 8).release_mem({.gcr = release_mem_flush(gen_), .data_sel = DataSel::data64, .address = signal.value(), .data = value});
}

void ComputeQueueEngine::encode_timestamp(hcq::CommandBuffer& out, GpuVirtualAddress dst) {
    append(out, 8).release_mem({.gcr = release_mem_flush(gen_), .data_sel = DataSel::gpu_clock, .address = dst.value()});
}

void ComputeQueueEngine::encode_memory_barrier(hcq::CommandBuffer& out) { append(out, 8).acquire_mem(kGcrAll); }

void ComputeQueueEngine::encode_exec(hcq::CommandBuffer& out, const hcq::Program& program, std::span<const std::byte> kernargs,
                                     hcq::Dim3 grid, hcq::Dim3 block) {
    const auto& p = static_cast<const AmProgram&>(program);
    KernelDispatch k = p.launch();
    k.grid = {grid.x, grid.y, grid.z};
    k.block = {block.x, block.y, block.z};
    k.kernarg_address = 0;  // filled in where the command lands (place / relocate)
    k.dispatch_packet_address = 0;  // likewise
    const size_t arg_dwords = (kernargs.size() + 3) / 4;
    // A kernel that enables the dispatch pointer gets an hsa_kernel_dispatch_packet_t after its
    // kernargs (8-byte aligned, as the ring's packets are), in the same NOP.
    const size_t packet_at = (arg_dwords + 1) & ~size_t{1};
    const size_t payload_dwords = k.user_sgpr_dispatch_ptr && !skip_dispatch_packet_ ? packet_at + kDispatchPacketBytes / 4 : arg_dwords;
    const size_t nop_dwords = kKernargHeaderDwords + payload_dwords;
    const size_t total = nop_dwords + dispatch_dwords(k);
    const size_t padded = (total + 1) & ~size_t{1};
    auto* w = reinterpret_cast<uint32_t*>(out.append(padded * 4));
    std::memset(w + 1, 0, (nop_dwords - 1) * 4);
    w[0] = packet3(kNop, static_cast<uint32_t>(nop_dwords - 2));
    w[1] = kKernargMagic;
    w[2] = p.kernarg_sgpr();
    w[3] = 0;
    if (!kernargs.empty()) std::memcpy(w + kKernargHeaderDwords, kernargs.data(), kernargs.size());
    if (payload_dwords != arg_dwords) {
        // The dispatch pointer's user SGPRs come right after the private segment buffer's (pm4.cpp).
        const uint32_t dispatch_sgpr = k.user_sgpr_private_segment_buffer ? 4 : 0;
        w[3] = (dispatch_sgpr + 1) | static_cast<uint32_t>(packet_at * 4) << 8;
        fill_dispatch_packet(w + kKernargHeaderDwords + packet_at, k.grid, k.block, k.lds_bytes);
    }
    Pm4Writer(std::span<uint32_t>(w + nop_dwords, total - nop_dwords)).dispatch(k);
    if (padded != total) w[total] = kNop1;
}

void ComputeQueueEngine::encode_copy(hcq::CommandBuffer&, GpuVirtualAddress, GpuVirtualAddress, uint64_t) {
    throw std::logic_error("the AM compute queue records no copies: copies go to the SDMA copy queue");
}

void ComputeQueueEngine::patch(std::span<std::byte> command, hcq::Field field, uint64_t value) {
    std::span<uint32_t> w = words_of(command);
    const uint32_t op = opcode(w[0]);
    // WAIT_REG_MEM64: address dwords 2-3, reference 4-5. RELEASE_MEM: address 3-4, data 5-6 (nvd.h).
    const size_t address_at = op == kWaitRegMem64 ? 2 : 3, value_at = op == kWaitRegMem64 ? 4 : 5;
    switch (field) {
        case hcq::Field::signal_address:
        case hcq::Field::timestamp_address:
            w[address_at] = lo(value);
            w[address_at + 1] = hi(value);
            break;
        case hcq::Field::signal_value:
            w[value_at] = lo(value);
            w[value_at + 1] = hi(value);
            break;
        default: throw std::logic_error("the AM compute queue has no copy commands to patch");
    }
}

void ComputeQueueEngine::patch_exec_args(std::span<std::byte> command, uint32_t offset, std::span<const std::byte> bytes) {
    const size_t at = kKernargHeaderDwords * 4 + offset;
    if (at + bytes.size() > command.size()) throw std::out_of_range("kernel argument patch outside the exec command");
    std::memcpy(command.data() + at, bytes.data(), bytes.size());
}

void ComputeQueueEngine::patch_exec_dims(std::span<std::byte> command, hcq::Dim3 grid, hcq::Dim3 block) {
    std::span<uint32_t> w = words_of(command);
    for (size_t i = 0; i < w.size(); i += packet_dwords(w[i])) {
        const uint32_t op = opcode(w[i]);
        if (op == kNop && w[i + 1] == kKernargMagic && w[i + 3] != 0) {
            uint32_t* packet = &w[i + kKernargHeaderDwords + (w[i + 3] >> 8) / 4];
            const uint32_t group = packet[7], kernarg_lo = packet[10], kernarg_hi = packet[11];
            fill_dispatch_packet(packet, {grid.x, grid.y, grid.z}, {block.x, block.y, block.z}, group);
            packet[10] = kernarg_lo;  // where the kernargs landed, if the command was placed already
            packet[11] = kernarg_hi;
        } else if (op == kSetShReg && w[i + 1] == kStartX) {
            // COMPUTE_START_X/Y/Z, then COMPUTE_NUM_THREAD_X/Y/Z.
            w[i + 5] = block.x;
            w[i + 6] = block.y;
            w[i + 7] = block.z;
        } else if (op == kDispatchDirect) {
            w[i + 1] = grid.x;
            w[i + 2] = grid.y;
            w[i + 3] = grid.z;
        }
    }
}

void ComputeQueueEngine::relocate(std::span<std::byte> commands, GpuVirtualAddress address) {
    std::span<uint32_t> w = words_of(commands);
    KernargFixup fixup;
    for (size_t i = 0; i < w.size(); i += packet_dwords(w[i])) fixup.packet(&w[i], packet_dwords(w[i]), address.value() + i * 4);
}

uint64_t ComputeQueueEngine::placed_dwords(std::span<const uint32_t> words, uint64_t at) const {
    const uint64_t start = at;
    for (size_t i = 0; i < words.size(); i += packet_dwords(words[i])) {
        const uint64_t n = packet_dwords(words[i]);
        if (at % ring_units_ + n > ring_units_) at += ring_units_ - at % ring_units_;
        at += n;
    }
    return at - start;
}

void ComputeQueueEngine::fill_to_ring_end() {
    // NOP-fill to the ring end so that no packet (in particular no kernarg block) wraps.
    const uint64_t fill = ring_units_ - wptr_ % ring_units_;
    write_ring(wptr_, fill == 1 ? kNop1 : packet3(kNop, static_cast<uint32_t>(fill - 2)));
    wptr_ += fill;
}

void ComputeQueueEngine::place(std::span<const uint32_t> words) {
    const uint64_t ring_va = ring_.address().value();
    KernargFixup fixup;
    for (size_t i = 0; i < words.size();) {
        const uint64_t n = packet_dwords(words[i]);
        const uint64_t offset = wptr_ % ring_units_;
        if (offset + n > ring_units_) {
            fill_to_ring_end();
            continue;
        }
        std::memcpy(ring_words_ + offset, words.data() + i, n * 4);
        if (opcode(words[i]) == kAcquireMem && n == 8 && words[i + 7] == kGcrAll) hdp_flush_ = true;  // a memory_barrier()
        fixup.packet(ring_words_ + offset, n, ring_va + offset * 4);
        wptr_ += n;
        i += n;
    }
}

uint64_t ComputeQueueEngine::finish_and_ring() {
    // The fence: once everything before it completed, the ticket (the ring position after it).
    if (wptr_ % ring_units_ + kFenceDwords > ring_units_) fill_to_ring_end();
    const uint64_t ticket = ticket_at(wptr_ + kFenceDwords);
    Pm4Writer(std::span<uint32_t>(ring_words_ + wptr_ % ring_units_, kFenceDwords))
        .release_mem({.gcr = release_mem_flush(gen_), .data_sel = DataSel::data64, .address = fence_address().value(), .data = ticket});
    wptr_ += kFenceDwords;
    publish_wptr();
    // CPU writes to VRAM through the BAR reach the GPU past the HDP: flush it when the submission
    // says host writes must be visible (memory_barrier) or runs commands the CPU wrote to VRAM
    // (bound). The ring itself is in host memory and needs none.
    if (hdp_flush_) device_.flush_hdp();
    hdp_flush_ = false;
    device_.ring_doorbell(doorbell_slot_, wptr_);
    return ticket;
}

void ComputeQueueEngine::invalidate_for_new_code() {
    const uint64_t generation = device_.code_generation();
    if (generation == code_generation_ || device_.chip().skip_step() == SkipStep::code_cache_invalidate) return;
    // Linux starts every IB with gfx_v11_0_emit_mem_sync: ACQUIRE_MEM with GLI_INV, GL2_INV/WB and the
    // near caches (gfx_v12_0 the same). drivers/am does it only when new code may be stale in them.
    uint32_t acquire[8];
    Pm4Writer(acquire).acquire_mem(kGcrAll);
    place(acquire);
    code_generation_ = generation;
}

uint64_t ComputeQueueEngine::submit(std::span<const std::byte> commands) {
    if (commands.size() > max_submit_bytes()) {
        throw UnsupportedError(device_.name(), fmt::format("{}: {} bytes of commands do not fit in the {}-byte ring; bind() the queue",
                                                           name(), commands.size(), ring_units_ * 4));
    }
    std::lock_guard lock(mutex_);
    std::span<const uint32_t> words = words_of(commands);
    // Space for the commands as placed (fill included) and the fence with its worst-case fill.
    wait_for_space(placed_dwords(words, wptr_) + 2 * kFenceDwords + 8);
    invalidate_for_new_code();
    place(words);
    return finish_and_ring();
}

uint64_t ComputeQueueEngine::submit_bound(GpuVirtualAddress commands, uint64_t size) {
    std::lock_guard lock(mutex_);
    uint32_t ib[4];
    Pm4Writer(ib).indirect_buffer(commands.value(), static_cast<uint32_t>(size / 4));
    hdp_flush_ = true;
    wait_for_space(4 + 2 * kFenceDwords + 4 + 8);
    invalidate_for_new_code();
    place(ib);
    return finish_and_ring();
}

uint64_t ComputeQueueEngine::max_submit_bytes() const {
    // Room for the fence, a code invalidation (8 dwords) and one ring-end fill of the largest packet (a
    // kernarg NOP: 1 KiB of arguments and its header).
    return (ring_units_ - 2 * kFenceDwords - 8 -
            (kKernargHeaderDwords + hcq::KernelArgs::kMaxBytes / 4 + 1 + kDispatchPacketBytes / 4)) * 4;
}

std::string ComputeQueueEngine::describe() const {
    const uint64_t rptr = read_pointer();
    const uint64_t wptr = hcq::load_acquire(wptr_);
    // The CP reports its read pointer as a ring offset (it wraps); the write pointer is ours, 64-bit.
    const uint64_t pending = (wptr % ring_units_ + ring_units_ - rptr % ring_units_) % ring_units_;
    std::string doing = "idle";
    if (ring_words_ != nullptr && pending != 0) {
        // What the CP stopped at: the packet at its read pointer.
        const uint32_t* w = ring_words_;
        auto at = [&](uint64_t i) { return w[(rptr + i) % ring_units_]; };
        const uint32_t op = opcode(at(0));
        if (op == kWaitRegMem64) {
            doing = fmt::format("executing wait for {:#x} >= {}", uint64_t{at(2)} | uint64_t{at(3)} << 32,
                                uint64_t{at(4)} | uint64_t{at(5)} << 32);
        } else if (op == kReleaseMem) {
            doing = fmt::format("executing signal of {:#x}", uint64_t{at(3)} | uint64_t{at(4)} << 32);
        } else if (op == kIndirectBuffer) {
            doing = fmt::format("executing the bound commands at {:#x}", uint64_t{at(1)} | uint64_t{at(2) & 0xFFFF} << 32);
        } else if (op == kNop || op == kSetShReg || op == kDispatchDirect || op == kAcquireMem) {
            doing = "executing a dispatch";
        } else {
            doing = fmt::format("at packet {:#010x}", at(0));
        }
    }
    return fmt::format("{} (MEC1 pipe 0 queue {}, doorbell {}): ring {:#x} of {} dwords, wptr={} rptr={}, {} dwords pending, {}; "
                       "completed ticket {}",
                       name(), queue_, doorbell_slot_, ring_.address().value(), ring_units_, wptr, rptr, pending, doing, completed_ticket());
}

}  // namespace baregpu::am
