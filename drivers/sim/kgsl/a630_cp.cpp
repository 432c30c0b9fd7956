// The simulated A630 command processor of one KGSL context: a thread that takes submitted IBs in
// timestamp order, decodes every PM4 packet (header parity, reserved bits, packet type), checks
// it (known opcode, payload size, memory it touches mapped, no protected register written) and
// executes it. Anything invalid is a GPU fault: the context is invalidated and stops where it is.
#include "drivers/sim/kgsl/host_kernels.hpp"
#include "drivers/sim/kgsl/pm4_decode.hpp"
#include "drivers/sim/kgsl/sim_kgsl.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <span>

namespace baregpu::sim::kgsl {

using namespace pm4;

namespace {
constexpr size_t kRegisters = 0x40000;        // type-4 register index space (18 bits)
constexpr size_t kConstantBytes = 1024 * 16;  // the CS constant file: 1024 vec4

uint32_t load32(uint64_t va) { return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(va)).load(std::memory_order_acquire); }
void store32(uint64_t va, uint32_t v) { std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(va)).store(v, std::memory_order_release); }

bool compare(uint32_t function, bool is_signed, uint32_t value, uint32_t ref) {
    int64_t a = is_signed ? int64_t(int32_t(value)) : int64_t(value), b = is_signed ? int64_t(int32_t(ref)) : int64_t(ref);
    switch (function) {
        case 0: return true;     // WRITE_ALWAYS
        case 1: return a < b;    // WRITE_LT
        case 2: return a <= b;   // WRITE_LE
        case 3: return a == b;   // WRITE_EQ
        case 4: return a != b;   // WRITE_NE
        case 5: return a >= b;   // WRITE_GE
        case 6: return a > b;    // WRITE_GT
    }
    return false;
}
}  // namespace

SimKgsl::Context::Context(SimKgsl& d, uint32_t context_id)
    : device(d), id(context_id), jobs(kMaxQueued), regs(kRegisters, 0), written(kRegisters, false), constants(kConstantBytes, 0) {
    worker = std::thread([this] { run(); });
}

SimKgsl::Context::~Context() { stop(); }

void SimKgsl::Context::stop() {
    {
        std::lock_guard lock(mutex);
        stopping = true;
    }
    changed.notify_all();
    if (worker.joinable()) worker.join();
}

int SimKgsl::Context::submit(Job job, uint32_t& timestamp) {
    {
        std::unique_lock lock(mutex);
        // adreno_dispatch.c _wait_for_room_in_context_queue: room while queued + 1 <= size - 1;
        // else sleep until there is room or the context is invalidated, at most
        // _context_queue_wait ms, then -ETIMEDOUT.
        const SimKgsl::Options& o = device.options();
        const uint64_t room = std::min<uint64_t>(o.drawqueue_size - 1, kMaxQueued);
        auto has_room = [&] { return jobs_tail - jobs_head < room || stopping || faulted.load(std::memory_order_acquire); };
        if (!has_room()) {
            device.drawqueue_waits_.fetch_add(1, std::memory_order_relaxed);
            if (!changed.wait_for(lock, std::chrono::milliseconds(o.queue_wait_ms), has_room)) return ETIMEDOUT;
        }
        if (faulted.load(std::memory_order_acquire)) return EDEADLK;
        // Timestamps in queue order, one per submission (adreno_dispatch.c get_timestamp).
        job.timestamp = ++queued;
        timestamp = job.timestamp;
        jobs[jobs_tail++ % kMaxQueued] = job;
    }
    changed.notify_all();
    return 0;
}

void SimKgsl::Context::set_hang(bool h) {
    {
        std::lock_guard lock(mutex);
        hang = h;
    }
    changed.notify_all();
}

void SimKgsl::Context::fault(const std::string& why) {
    {
        std::lock_guard lock(mutex);
        if (faulted.load(std::memory_order_relaxed)) return;
        log += fmt::format("kgsl-3d0: GPU fault on context {}: {}; context invalidated (KGSL_CONTEXT_NO_FAULT_TOLERANCE)", id, why);
        // Counted before the context shows as faulted: a waiter that sees EDEADLK sees the fault too.
        device.faults_.fetch_add(1, std::memory_order_acq_rel);
        faulted.store(true, std::memory_order_release);
        jobs_head = jobs_tail;
    }
    changed.notify_all();
}

int SimKgsl::Context::wait(uint32_t timestamp, uint32_t timeout_ms) {
    std::unique_lock lock(mutex);
    // adreno_drawctxt.c adreno_drawctxt_wait: an invalidated context fails with EDEADLK; a
    // timestamp that was never queued is refused (kgsl_events.c kgsl_add_event: -EINVAL past
    // KGSL_TIMESTAMP_QUEUED); a timeout of 0 means forever.
    if (faulted.load(std::memory_order_acquire)) return EDEADLK;
    if (int32_t(timestamp - queued) > 0) return EINVAL;
    const bool forever = timeout_ms == 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        if (faulted.load(std::memory_order_acquire)) return EDEADLK;
        if (int32_t(retired.load(std::memory_order_acquire) - timestamp) >= 0) return 0;
        if (stopping) return EINVAL;
        if (forever) {
            changed.wait(lock);
            continue;
        }
        if (changed.wait_until(lock, deadline) == std::cv_status::timeout) {
            if (faulted.load(std::memory_order_acquire)) return EDEADLK;
            return int32_t(retired.load(std::memory_order_acquire) - timestamp) >= 0 ? 0 : ETIMEDOUT;
        }
    }
}

std::string SimKgsl::Context::missing_program_state(uint64_t program) const {
    const bool a7 = device.a7xx();
    const std::span<const NeededRegister> needed = a7 ? std::span<const NeededRegister>(kA7xxNeeded) : std::span<const NeededRegister>(kA6xxNeeded);
    for (const NeededRegister& r : needed) {
        if (!written[r.reg]) {
            return fmt::format("{} (0x{:04x}) was never written in this context: the SP would run the dispatch with whatever it holds (mesa "
                               "computerator a6xx.cc cs_program_emit programs it for every dispatch)",
                               r.name, r.reg);
        }
    }
    // Fields the dispatch depends on (a6xx.xml): ENABLED bits, CONSTLEN (units of 4 vec4), the size.
    const uint32_t const_config = regs[a7 ? A7XX_SP_CS_CONST_CONFIG : A6XX_SP_CS_CONST_CONFIG];
    if (!(const_config & 0x100)) return fmt::format("SP_CS_CONST_CONFIG 0x{:08x} leaves the CS constants disabled (ENABLED, bit 8)", const_config);
    if ((const_config & 0xff) * 4 < constants_vec4) {
        return fmt::format("SP_CS_CONST_CONFIG.CONSTLEN = {} vec4 hides kernel arguments loaded up to vec4 {}", (const_config & 0xff) * 4,
                           constants_vec4);
    }
    if (!(regs[SP_CS_CONFIG] & 0x100)) return fmt::format("SP_CS_CONFIG 0x{:08x} leaves the compute stage disabled (ENABLED, bit 8)", regs[SP_CS_CONFIG]);
    if (regs[SP_CS_INSTR_SIZE] == 0) return "SP_CS_INSTR_SIZE is 0: the program has no instructions";
    if (shader_loaded != program) {
        return shader_loaded == 0 ? fmt::format("no CP_LOAD_STATE6_FRAG(ST6_SHADER, SS6_INDIRECT) loaded the program at 0x{:x} (SP_CS_BASE)", program)
                                  : fmt::format("the last CP_LOAD_STATE6_FRAG(ST6_SHADER) loaded 0x{:x}, but SP_CS_BASE is 0x{:x}", shader_loaded, program);
    }
    if (a7 && regs[A7XX_SP_CS_NDRANGE_7] != (regs[kA7xxCompute.ndrange0] & ~3u)) {
        return fmt::format("SP_CS_NDRANGE_7 0x{:08x} disagrees with SP_CS_NDRANGE_0's local size (0x{:08x})", regs[A7XX_SP_CS_NDRANGE_7],
                           regs[kA7xxCompute.ndrange0] & ~3u);
    }
    return {};
}

void SimKgsl::Context::run() {
    for (;;) {
        Job job;
        {
            std::unique_lock lock(mutex);
            changed.wait(lock, [&] { return stopping || (!hang && jobs_tail != jobs_head && !faulted.load()); });
            if (stopping) return;
            job = jobs[jobs_head++ % kMaxQueued];
            consumed.store(job.timestamp, std::memory_order_release);
        }
        changed.notify_all();  // room in the queue
        bool ok = true;
        for (uint32_t k = 0; k < job.count && ok; ++k) ok = execute_ib(job.ibs[k].first, job.ibs[k].second);
        if (!ok) continue;  // faulted (the job never retires) or stopping
        {
            std::lock_guard lock(mutex);
            retired.store(job.timestamp, std::memory_order_release);
        }
        changed.notify_all();
    }
}

bool SimKgsl::Context::execute_ib(uint64_t va, uint64_t bytes) {
    if (!device.mapped(va, bytes)) {
        fault(fmt::format("page fault: IB 0x{:x}+0x{:x} is not inside a mapped GPU object", va, bytes));
        return false;
    }
    const uint64_t n = bytes / 4;
    auto word = [&](uint64_t i) { return load32(va + 4 * i); };
    uint64_t i = 0;
    auto bad = [&](const std::string& what) {
        fault(fmt::format("IB 0x{:x} dword {}: {}", va, i, what));
        return false;
    };
    auto stopping_now = [&] {
        std::lock_guard lock(mutex);
        return stopping;
    };
    auto readable = [&](uint64_t a, uint64_t size, const char* what) {
        if (a % 4 == 0 && device.mapped(a, size)) return true;
        fault(fmt::format("IB 0x{:x} dword {}: page fault: {} at 0x{:x}+{} is not mapped (or not 4-byte aligned)", va, i, what, a, size));
        return false;
    };
    while (i < n) {
        Header h = decode(word(i));
        if (h.type == Header::invalid) return bad(h.error);
        if (h.count > n - i - 1) return bad(fmt::format("packet of {} payload dwords runs past the IB's end ({} dwords)", h.count, n));
        const uint64_t p = i + 1;  // first payload dword
        auto arg = [&](uint64_t k) { return word(p + k); };
        auto addr = [&](uint64_t k) { return uint64_t(arg(k)) | uint64_t(arg(k + 1)) << 32; };
        if (h.type == Header::type4) {
            for (uint32_t k = 0; k < h.count; ++k) {
                uint32_t reg = h.reg + k;
                if (const ProtectedRange* r = protected_range(reg)) {
                    return bad(fmt::format("CP protected mode error: write to protected register 0x{:05x} ({} range 0x{:05x}-0x{:05x})", reg,
                                           r->block, r->first, r->last));
                }
                if (reg < kRegisters) {
                    regs[reg] = arg(k);
                    written[reg] = true;
                }
            }
            i = p + h.count;
            continue;
        }
        auto expect = [&](bool ok) {
            if (!ok) bad(fmt::format("{} with {} payload dwords is malformed", opcode_name(h.opcode), h.count));
            return ok;
        };
        switch (h.opcode) {
            case CP_NOP: break;
            case CP_WAIT_FOR_IDLE:
            case CP_WAIT_FOR_ME:
            case CP_WAIT_MEM_WRITES:
                if (!expect(h.count == 0)) return false;
                break;
            case CP_SET_MARKER:
                if (!expect(h.count == 1)) return false;
                break;
            case CP_EVENT_WRITE: {
                if (!expect(h.count == 1 || h.count == 4)) return false;
                uint32_t d0 = arg(0), event = d0 & 0xff;
                bool write = h.count == 4;
                if (!device.a7xx()) {
                    // A6XX: EVENT bits 0-7, TIMESTAMP bit 30, IRQ bit 31; nothing else defined.
                    if (d0 & ~0xc00000ffu) return bad(fmt::format("CP_EVENT_WRITE dword 0 0x{:08x} sets bits A6XX does not define", d0));
                    if (event != CACHE_FLUSH_TS && event != CACHE_INVALIDATE) {
                        return bad(fmt::format("CP_EVENT_WRITE of event 0x{:x} is not modelled (A6XX: CACHE_FLUSH_TS, CACHE_INVALIDATE)", event));
                    }
                } else {
                    // A7XX CP_EVENT_WRITE7: WRITE_SRC 20-22, WRITE_DST 24, WRITE_ENABLED 27.
                    bool enabled = (d0 >> 27) & 1;
                    uint32_t src = (d0 >> 20) & 7, dst = (d0 >> 24) & 1;
                    if (enabled != write) {
                        return bad(fmt::format("CP_EVENT_WRITE7 dword 0 0x{:08x}: WRITE_ENABLED is {} but the packet has {} payload dwords", d0,
                                               int(enabled), h.count));
                    }
                    // What KGSL gen7 (adreno_gen7_ringbuffer.c: CACHE_CLEAN | BIT(27) for every
                    // timestamp) and mesa (freedreno_gpu_event.h: CACHE_CLEAN, CACHE_FLUSH7,
                    // CACHE_INVALIDATE7 on A7XX) use. Neither uses CACHE_FLUSH_TS on A7XX, so what it
                    // does there is unknown: refused rather than guessed.
                    if (event == CACHE_FLUSH_TS) {
                        return bad("CP_EVENT_WRITE7 of CACHE_FLUSH_TS: A7XX cleans with CACHE_CLEAN (0x31) as KGSL gen7 and mesa do; "
                                   "CACHE_FLUSH_TS is not modelled there");
                    }
                    if (event != CACHE_CLEAN && event != CACHE_FLUSH7 && event != CACHE_INVALIDATE7) {
                        return bad(fmt::format("CP_EVENT_WRITE7 of event 0x{:x} is not modelled (CACHE_CLEAN, CACHE_FLUSH7, CACHE_INVALIDATE7)", event));
                    }
                    if (enabled && (src != 0 || dst != 0)) {
                        return bad(fmt::format("CP_EVENT_WRITE7 WRITE_SRC={} WRITE_DST={} is not modelled (EV_WRITE_USER_32B to RAM only)", src, dst));
                    }
                }
                if (write) {
                    if (!readable(addr(1), 4, "CP_EVENT_WRITE address")) return false;
                    store32(addr(1), arg(3));
                }
                break;
            }
            case CP_MEM_WRITE: {
                if (!expect(h.count >= 3)) return false;
                uint64_t a = addr(0);
                if (!readable(a, 4ull * (h.count - 2), "CP_MEM_WRITE")) return false;
                for (uint32_t k = 2; k < h.count; ++k) store32(a + 4ull * (k - 2), arg(k));  // in order, one dword at a time
                break;
            }
            case CP_REG_TO_MEM: {
                if (!expect(h.count == 3)) return false;
                uint32_t reg = arg(0) & 0x3ffff, count = std::max<uint32_t>((arg(0) >> 18) & 0xfff, 1);
                uint64_t a = addr(1);
                if (!readable(a, 4ull * count, "CP_REG_TO_MEM destination")) return false;
                if (reg == CP_ALWAYS_ON_COUNTER && count == 2) {
                    if (a % 8 != 0) return bad("CP_REG_TO_MEM of the 64-bit always-on counter to an address that is not 8-byte aligned");
                    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(a)).store(always_on_counter(), std::memory_order_release);
                } else {
                    for (uint32_t k = 0; k < count; ++k) store32(a + 4ull * k, reg + k < kRegisters ? regs[reg + k] : 0);
                }
                break;
            }
            case CP_WAIT_REG_MEM: {
                if (!expect(h.count == 6)) return false;
                uint32_t function = arg(0) & 7, poll = (arg(0) >> 4) & 3;
                bool is_signed = (arg(0) >> 3) & 1;
                if (poll != 1) return bad(fmt::format("CP_WAIT_REG_MEM POLL={} is not modelled (POLL_MEMORY only)", poll));
                if (function > 6) return bad(fmt::format("CP_WAIT_REG_MEM FUNCTION={} is not a cp_cond_function", function));
                uint64_t a = addr(1);
                uint32_t ref = arg(3), mask = arg(4);
                if (!readable(a, 4, "CP_WAIT_REG_MEM poll address")) return false;
                // Poll like the CP (DELAY_LOOP_CYCLES between reads), sleeping a little between polls.
                auto set_blocked = [&](bool b) {
                    {
                        std::lock_guard lock(mutex);
                        blocked = b;
                    }
                    changed.notify_all();
                };
                for (uint32_t spins = 0;; ++spins) {
                    uint32_t value = 0;
                    if (!device.load_mapped(a, value)) return bad(fmt::format("page fault: CP_WAIT_REG_MEM poll address 0x{:x} was unmapped", a));
                    if (compare(function, is_signed, value & mask, ref)) break;
                    if (stopping_now() || faulted.load(std::memory_order_acquire)) return false;
                    if (spins == 256) set_blocked(true);  // what a detach would find the CP doing
                    if (spins > 256) std::this_thread::sleep_for(std::chrono::microseconds(20));
                }
                set_blocked(false);
                break;
            }
            case CP_COND_EXEC: {
                if (!expect(h.count == 6)) return false;
                uint64_t bool_addr = addr(0), ts_addr = addr(2);
                uint32_t active = arg(4), dwords = arg(5);
                if (!readable(bool_addr, 4, "CP_COND_EXEC BOOL_ADDR") || !readable(ts_addr, 4, "CP_COND_EXEC TIMESTAMP_ADDR")) return false;
                if (dwords > n - (p + h.count)) return bad(fmt::format("CP_COND_EXEC skips {} dwords past the IB's end", dwords));
                bool run = load32(bool_addr) != 0 && uint32_t(active - load32(ts_addr)) < 0x80000000u;
                i = p + h.count + (run ? 0 : dwords);
                continue;
            }
            case CP_LOAD_STATE6_FRAG: {
                if (!expect(h.count >= 3)) return false;
                uint32_t d0 = arg(0);
                uint32_t dst = d0 & 0x3fff, type = (d0 >> 14) & 3, src = (d0 >> 16) & 3, block = (d0 >> 18) & 0xf, units = d0 >> 22;
                if (type == 0 && src == 2 && block == 0xd) {
                    // ST6_SHADER, SS6_INDIRECT: NUM_UNIT 128-byte units of instructions from EXT_SRC_ADDR.
                    if (!expect(h.count == 3)) return false;
                    if (units == 0) return bad("CP_LOAD_STATE6_FRAG(ST6_SHADER) of 0 units");
                    if (addr(1) % 4 != 0 || !device.mapped(addr(1), 128ull * units)) {
                        return bad(fmt::format("page fault: CP_LOAD_STATE6_FRAG(ST6_SHADER): no program is loaded at 0x{:x} ({} bytes of "
                                               "instructions are not mapped)",
                                               addr(1), 128ull * units));
                    }
                    shader_loaded = addr(1);
                    break;
                }
                if (type != 1 || src != 0 || block != 0xd) {
                    return bad(fmt::format("CP_LOAD_STATE6_FRAG STATE_TYPE={} STATE_SRC={} STATE_BLOCK=0x{:x} is not modelled (constants with "
                                           "SS6_DIRECT, the shader with SS6_INDIRECT; SB6_CS_SHADER only)",
                                           type, src, block));
                }
                if (h.count != 3 + 4 * units || (uint64_t(dst) + units) * 16 > constants.size()) {
                    return bad(fmt::format("CP_LOAD_STATE6_FRAG of {} vec4 at {} carries {} payload dwords", units, dst, h.count));
                }
                for (uint32_t k = 0; k < 4 * units; ++k) {
                    uint32_t v = arg(3 + k);
                    std::memcpy(constants.data() + size_t(dst) * 16 + 4 * k, &v, 4);
                }
                constants_vec4 = std::max(constants_vec4, dst + units);
                break;
            }
            case CP_EXEC_CS: {
                if (!expect(h.count == 4)) return false;
                uint32_t grid[3] = {arg(1), arg(2), arg(3)};
                const ComputeRegisters cs = device.a7xx() ? kA7xxCompute : kA6xxCompute;
                uint64_t program = uint64_t(regs[SP_CS_BASE]) | uint64_t(regs[SP_CS_BASE + 1]) << 32;
                if (std::string missing = missing_program_state(program); !missing.empty()) return bad("CP_EXEC_CS: " + missing);
                uint32_t nd = regs[cs.ndrange0];
                uint32_t block[3] = {((nd >> 2) & 0x3ff) + 1, ((nd >> 12) & 0x3ff) + 1, ((nd >> 22) & 0x3ff) + 1};
                if ((nd & 3) != 3) return bad(fmt::format("SP_CS_NDRANGE_0 (0x{:x}) KERNELDIM={} (3 expected)", cs.ndrange0, nd & 3));
                for (int k = 0; k < 3; ++k) {
                    if (regs[cs.kernel_group_x + k] != grid[k]) {
                        return bad(fmt::format("CP_EXEC_CS NGROUPS {} = {} disagrees with SP_CS_KERNEL_GROUP_{} (0x{:x}) = {}", "XYZ"[k], grid[k], "XYZ"[k],
                                               cs.kernel_group_x + k, regs[cs.kernel_group_x + k]));
                    }
                }
                std::string what = device.kernels().run(device, program, constants, grid, block);
                if (!what.empty()) return bad("CP_EXEC_CS: " + what);
                break;
            }
            default: return bad(fmt::format("unknown opcode 0x{:02x} (type-7 header 0x{:08x})", h.opcode, word(i)));
        }
        i = p + h.count;
    }
    return true;
}

}  // namespace baregpu::sim::kgsl
