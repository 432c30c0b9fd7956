#include "drivers/sim/amdgpu/pm4_engine.hpp"

#include "drivers/sim/amdgpu/gc.hpp"
#include "drivers/sim/amdgpu/host_exec.hpp"
#include "drivers/sim/amdgpu/native_exec.hpp"
#include "drivers/hostcode/host_program.h"

#include <cstring>
#include <exception>
#include <fmt/format.h>

namespace baregpu::sim::amdgpu {

namespace {
constexpr const char* kNvd = "Linux amdgpu/nvd.h (PACKET3 opcodes and sizes)";
constexpr const char* kPm4Ai = "Linux amdkfd/kfd_pm4_headers_ai.h";
constexpr const char* kHostProgram = "drivers/hostcode/host_program.h (the simulated GPU's host-program contract)";
constexpr const char* kIcache =
    "Linux gfx_v11_0.c gfx_v11_0_emit_mem_sync / gfx_v12_0.c gfx_v12_0_emit_mem_sync (ACQUIRE_MEM GCR_CNTL GLI_INV, "
    "GL2_INV; soc15d.h)";
constexpr const char* kHqd = "Linux gfx_v11_0.c gfx_v11_0_compute_mqd_init, v11_structs.h; tinygrad ip.py AM_GFX.setup_ring";

// Fixed payload dword counts (the header's count field is payload - 1) on GC 10+ (nvd.h users in
// gfx_v11_0.c, kfd_pm4_headers_ai.h structs): DISPATCH_DIRECT 3 dims + initiator, WAIT_REG_MEM 6,
// INDIRECT_BUFFER 3, RELEASE_MEM 7, ACQUIRE_MEM 7; WAIT_REG_MEM64 8, count 7 (Mesa amd_cp_packets_gfx11.h
// PKT3_WAIT_REG_MEM64, lines 1764-1826). 0: variable.
uint32_t fixed_payload(uint32_t op) {
    switch (op) {
        case pm4::kDispatchDirect: return 4;
        case pm4::kWaitRegMem: return 6;
        case pm4::kIndirectBuffer: return 3;
        case pm4::kReleaseMem: return 7;
        case pm4::kAcquireMem: return 7;
        case pm4::kWaitRegMem64: return 8;
        default: return 0;
    }
}

// COMPUTE_* registers (gc_11_0_0_offset.h, BASE_IDX 0) as SET_SH_REG offsets: static GC segment 0
// base 0x1260 (sienna_cichlid_ip_offset.h) + offset - PACKET3_SET_SH_REG_START (Linux nvd.h).
constexpr uint32_t sh(uint32_t gc_offset) { return gc_offset + 0x1260 - pm4::kSetShRegStart; }
constexpr uint32_t kShNumThreadX = sh(0x1ba7), kShPgmLo = sh(0x1bac), kShPgmHi = sh(0x1bad),
                   kShPgmRsrc1 = sh(0x1bb2), kShPgmRsrc2 = sh(0x1bb3), kShPgmRsrc3 = sh(0x1bc8),
                   kShUserData0 = sh(0x1be0);

// The dwords a packet with this header occupies: type 3 is count + 2, except the one-dword NOP
// (count 0x3FFF, pm4_engine.hpp); other types are one dword (and refused by execute()).
uint32_t packet_dwords(uint32_t header) {
    if ((header >> 30) != 3) return 1;
    const uint32_t count = (header >> 16) & 0x3fff;
    if (((header >> 8) & 0xff) == pm4::kNop && count == pm4::kNopOneDwordCount) return 1;
    return count + 2;
}

bool compare(uint32_t function, uint64_t value, uint64_t ref) {
    switch (function) {  // WAIT_REG_MEM_FUNCTION (nvd.h): 0 always, 1 <, 2 <=, 3 ==, 4 !=, 5 >=, 6 >
        case 0: return true;
        case 1: return value < ref;
        case 2: return value <= ref;
        case 3: return value == ref;
        case 4: return value != ref;
        case 5: return value >= ref;
        case 6: return value > ref;
        default: return false;
    }
}
}  // namespace

ComputeEngine::ComputeEngine(Chip& chip, Gmc& gmc, Ih& ih) : chip_(chip), gmc_(gmc), ih_(ih) {
    // gc_11_0_0_offset.h and gc_12_0_0_offset.h give every register below the same BASE_IDX and
    // offset (GC 12 kept the cpphqddec block at 0x1fa9.., GRBM_GFX_CNTL at 0x0900 and
    // CP_MEC_RS64_CNTL at 0x2904), and their sh_mask.h files the same fields; other generations
    // are not modelled and leave the engine disabled.
    const unsigned gen = chip.asic.gc_major();
    if (gen != 11 && gen != 12) return;
    auto gc = [&](unsigned idx, uint32_t off) { return chip.asic.base(hwid::kGc, idx) + off; };
    regs_.hqd_active = gc(0, 0x1fab);
    regs_.hqd_vmid = gc(0, 0x1fac);
    regs_.pq_base = gc(0, 0x1fb1);
    regs_.pq_base_hi = gc(0, 0x1fb2);
    regs_.rptr_report = gc(0, 0x1fb4);
    regs_.rptr_report_hi = gc(0, 0x1fb5);
    regs_.wptr_poll = gc(0, 0x1fb6);
    regs_.wptr_poll_hi = gc(0, 0x1fb7);
    regs_.doorbell_control = gc(0, 0x1fb8);
    regs_.pq_control = gc(0, 0x1fba);
    regs_.dequeue_request = gc(0, 0x1fc1);
    regs_.eop_base = gc(0, 0x1fce);
    regs_.eop_base_hi = gc(0, 0x1fcf);
    regs_.eop_control = gc(0, 0x1fd0);
    regs_.grbm_gfx_cntl = gc(1, 0x0900);
    regs_.mec_rs64_cntl = gc(1, 0x2904);
}

std::string ComputeEngine::name(const Queue& q) const { return fmt::format("MEC1 pipe {} queue {}", q.pipe, q.queue); }

ComputeEngine::QueueStatus ComputeEngine::status(uint32_t pipe, uint32_t queue) const {
    auto it = queues_.find(pipe * 8 + queue);
    if (it == queues_.end()) return {};
    const Queue& q = it->second;
    return {true, q.hung, q.waiting, q.rptr, q.dispatches};
}

void ComputeEngine::register_written(uint32_t address, uint32_t value) {
    if (!enabled()) return;
    if (address != regs_.hqd_active && address != regs_.dequeue_request) return;
    // GRBM_GFX_CNTL: PIPEID 0-1, MEID 2-3, VMID 4-7, QUEUEID 8-10 (gc_11_0_0_sh_mask.h, gc_12_0_0_sh_mask.h).
    const uint32_t sel = chip_.load(regs_.grbm_gfx_cntl);
    const uint32_t pipe = sel & 3, me = (sel >> 2) & 3, queue = (sel >> 8) & 7;
    if (me != 1) {
        // Deactivating or dequeuing another ME's queue is harmless here; activating one is not
        // modelled (ME 0 has its own CP_GFX_HQD_* registers, ME 2 / MES queues are not modelled).
        if (address == regs_.hqd_active && (value & 1))
            chip_.violation(fmt::format("CP_HQD_ACTIVE=1 with GRBM_GFX_CNTL selecting ME {}: only MEC1 (ME 1) compute "
                                        "queues are modelled",
                                        me),
                            reg_name(address), "Linux gfx_v11_0.c (soc21_grbm_select(adev, 1, pipe, queue, 0))");
        return;
    }
    const uint32_t key = pipe * 8 + queue;
    if (address == regs_.dequeue_request) {
        // DEQUEUE_REQ (bits 0-3): 1 drain, 2 reset waves; the queue goes inactive at once, or,
        // while its kernel runs, when the kernel ends (CP_HQD_ACTIVE reads 1 until then: Linux
        // gfx_v11_0 / amdgpu_amdkfd_gfx_v11 hqd_destroy poll it for 0).
        if ((value & 0xf) != 0) {
            if (running_ == key && queues_.count(key)) {
                queues_[key].remove_pending = true;
                chip_.store(regs_.hqd_active, 1);
            } else {
                queues_.erase(key);
                chip_.store(regs_.hqd_active, 0);
            }
        }
        return;
    }
    if ((value & 1) == 0) {
        remove(key);
        return;
    }
    activate();
}

void ComputeEngine::remove(uint32_t key) {
    auto it = queues_.find(key);
    if (it == queues_.end()) return;
    if (running_ == key)
        it->second.remove_pending = true;
    else
        queues_.erase(it);
}

void ComputeEngine::reset() {
    icache_.clear();
    for (auto it = queues_.begin(); it != queues_.end();) {
        if (running_ == it->first) {
            it->second.remove_pending = true;
            ++it;
        } else {
            it = queues_.erase(it);
        }
    }
}

void ComputeEngine::finish_pending() {
    if (running_) return;
    for (auto it = queues_.begin(); it != queues_.end();) {
        if (it->second.remove_pending) {
            it = queues_.erase(it);
            chip_.store(regs_.hqd_active, 0);
        } else {
            ++it;
        }
    }
}

void ComputeEngine::activate() {
    const uint32_t sel = chip_.load(regs_.grbm_gfx_cntl);
    const uint32_t pipe = sel & 3, queue = (sel >> 8) & 7;
    auto refuse = [&](const std::string& what, const std::string& source = kHqd) {
        chip_.violation(fmt::format("CP_HQD_ACTIVE=1 for MEC1 pipe {} queue {}: {}", pipe, queue, what),
                        reg_name(regs_.hqd_active), source);
        chip_.store(regs_.hqd_active, 0);
    };
    // CP_MEC_RS64_CNTL: MEC_PIPE0_RESET bits 16-19, MEC_PIPE0_ACTIVE bits 26-29, MEC_HALT bit 30.
    const uint32_t mec = chip_.load(regs_.mec_rs64_cntl);
    if (mec & (1u << 30))
        return refuse(fmt::format("the MEC is halted (CP_MEC_RS64_CNTL {} has MEC_HALT set; the reset value 0x40000000 is "
                                  "halted)",
                                  hex(mec)),
                      "Linux gfx_v11_0.c gfx_v11_0_cp_compute_enable; gc_11_0_0_default.h regCP_MEC_RS64_CNTL_DEFAULT");
    if (mec & (1u << (16 + pipe))) return refuse("the pipe is held in reset (CP_MEC_RS64_CNTL.MEC_PIPEn_RESET)");
    if (!(mec & (1u << (26 + pipe)))) return refuse("the pipe is not active (CP_MEC_RS64_CNTL.MEC_PIPEn_ACTIVE)");
    if (gc_regs != nullptr) {
        // The MEC runs the firmware the RLC autoload put in place (the PSP's AUTOLOAD_RLC, then
        // RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE: gfx_v11_0_wait_for_rlc_autoload_complete) ...
        if (!chip_.state().psp.autoload_done || !(chip_.load(chip_.reg.rlc_bootload_status) & field::kRlcBootloadComplete))
            return refuse("the MEC has no firmware: the PSP's RLC autoload (AUTOLOAD_RLC, RLC_RLCS_BOOTLOAD_STATUS."
                          "BOOTLOAD_COMPLETE) has not completed",
                          "Linux gfx_v11_0.c gfx_v11_0_wait_for_rlc_autoload_complete");
        // ... from the program counter the image's header gives, which the pipe takes from
        // CP_MEC_RS64_PRGRM_CNTR_START/_HI when it leaves reset (gc.hpp). Whether the autoload leaves
        // the right PC behind is not public; Linux and tinygrad both program it, and the model does not.
        const std::optional<uint64_t> want = gc_regs->firmware_mec_pc();
        const uint64_t pc = gc_regs->mec_pc(pipe);
        if (want && pc != *want)
            return refuse(fmt::format("MEC1 pipe {} would run from PC {} (CP_MEC_RS64_PRGRM_CNTR_START {}, _HI {} as the pipe "
                                      "took them when it last left reset; 0x800 / 0x0 are their reset values) but the MEC "
                                      "firmware starts at PC {} (CP_MEC_RS64_PRGRM_CNTR_START {}, _HI {}: {} ucode_start_addr "
                                      ">> 2): CP_MEC_RS64_PRGRM_CNTR_START/_HI were not programmed, or the pipe was not reset "
                                      "afterwards",
                                      pipe, hex(pc), hex(pc & 0xffffffffu), hex(pc >> 32), hex(*want), hex(*want & 0xffffffffu),
                                      hex(*want >> 32), chip_.asic.cp.back()),
                          "Linux gfx_v11_0.c gfx_v11_0_config_gfx_rs64 (gfx_v12_0.c the same); gc_11_0_0_default.h "
                          "regCP_MEC_RS64_PRGRM_CNTR_START_DEFAULT");
    }
    if (queues_.count(pipe * 8 + queue)) return refuse("the queue is already active (dequeue it first)");
    if (chip_.load(regs_.hqd_vmid) != 0) return refuse("CP_HQD_VMID is not 0 (only VMID 0 is modelled)");
    Queue q;
    q.pipe = pipe;
    q.queue = queue;
    q.ring_va = ((uint64_t{chip_.load(regs_.pq_base_hi)} << 32) | chip_.load(regs_.pq_base)) << 8;
    // CP_HQD_PQ_CONTROL.QUEUE_SIZE bits 0-5: ring dwords = 2^(QUEUE_SIZE + 1).
    const uint32_t qs = chip_.load(regs_.pq_control) & 0x3f;
    if (qs + 1 > 28) return refuse(fmt::format("CP_HQD_PQ_CONTROL.QUEUE_SIZE {} is out of range", qs));
    q.ring_dwords = uint64_t{1} << (qs + 1);
    q.rptr_report = (uint64_t{chip_.load(regs_.rptr_report_hi) & 0xffff} << 32) | chip_.load(regs_.rptr_report);
    q.wptr_poll = (uint64_t{chip_.load(regs_.wptr_poll_hi) & 0xffff} << 32) | chip_.load(regs_.wptr_poll);
    q.eop_va = ((uint64_t{chip_.load(regs_.eop_base_hi)} << 32) | chip_.load(regs_.eop_base)) << 8;
    // CP_HQD_PQ_DOORBELL_CONTROL: DOORBELL_OFFSET bits 2-27 (dwords), DOORBELL_EN bit 30.
    const uint32_t db = chip_.load(regs_.doorbell_control);
    q.doorbell_dword = (db >> 2) & 0x3ffffff;
    if (!(db & (1u << 30))) return refuse("CP_HQD_PQ_DOORBELL_CONTROL.DOORBELL_EN is clear");
    if (q.doorbell_dword % 2 != 0) return refuse("the doorbell offset is not a 64-bit doorbell (slot * 2 dwords)");
    if (q.eop_va == 0) return refuse("no EOP buffer (CP_HQD_EOP_BASE_ADDR is 0): RELEASE_MEM would write through null");
    if (q.wptr_poll == 0 || q.wptr_poll % 8 != 0) return refuse("CP_HQD_PQ_WPTR_POLL_ADDR is 0 or not 8-byte aligned");
    if (q.rptr_report == 0 || q.rptr_report % 4 != 0) return refuse("CP_HQD_PQ_RPTR_REPORT_ADDR is 0 or not 4-byte aligned");
    for (const auto& [key, other] : queues_)
        if (other.doorbell_dword == q.doorbell_dword) return refuse("another active queue has the same doorbell");
    queues_[pipe * 8 + queue] = q;
}

bool ComputeEngine::doorbell(uint64_t offset, unsigned width, uint64_t value) {
    for (auto& [key, q] : queues_) {
        if (uint64_t{q.doorbell_dword} * 4 != offset) continue;
        if (width != 8) {
            chip_.violation(fmt::format("{}-byte doorbell write for {}: compute doorbells are 64-bit", width, name(q)),
                            fmt::format("BAR2+0x{:x}", offset), "tinygrad ops_amd.py AMDQueueDesc.signal_doorbell (doorbell64)");
            return true;
        }
        if (q.hung || q.remove_pending) return true;
        uint64_t wptr = 0;
        if (!read(q, q.wptr_poll, std::as_writable_bytes(std::span(&wptr, 1)))) return true;
        // The engine thread may see the kick after later submissions moved the polled wptr on;
        // only a doorbell AHEAD of what memory says breaks the protocol (wptr written first).
        if (wptr < value) {
            hang(q,
                 fmt::format("doorbell value {} is ahead of the write pointer {} at WPTR_POLL_ADDR: the wptr must be "
                             "written before the doorbell rings",
                             value, wptr),
                 fmt::format("BAR2+0x{:x}", offset),
                 "tinygrad ops_amd.py AMDComputeQueue._submit (gart.wptr = put, then doorbell64 = put)");
            return true;
        }
        run(q);
        finish_pending();
        return true;
    }
    return false;
}

void ComputeEngine::poll() {
    for (auto& [key, q] : queues_)
        if (q.waiting && !q.hung && !q.remove_pending) run(q);
    finish_pending();
}

bool ComputeEngine::any_waiting() const {
    for (const auto& [key, q] : queues_)
        if (q.waiting && !q.hung) return true;
    return false;
}

void ComputeEngine::hang(Queue& q, const std::string& what, const std::string& where, const std::string& source) {
    q.hung = true;
    chip_.violation(fmt::format("{}: {} (the queue hangs)", name(q), what), where, source);
}

bool ComputeEngine::read(Queue& q, uint64_t va, std::span<std::byte> out) {
    if (gmc_.access(va, out, false, VmClient::gfx)) return true;
    q.hung = true;  // the fault is latched and in the IH ring; the CP stops
    return false;
}

bool ComputeEngine::write(Queue& q, uint64_t va, std::span<const std::byte> data) {
    std::vector<std::byte> copy(data.begin(), data.end());
    if (gmc_.access(va, copy, true, VmClient::gfx)) return true;
    q.hung = true;
    return false;
}

bool ComputeEngine::read32(Queue& q, uint64_t va, uint32_t& v) {
    return read(q, va, std::as_writable_bytes(std::span(&v, 1)));
}

void ComputeEngine::run(Queue& q) {
    uint64_t wptr = 0;
    if (!read(q, q.wptr_poll, std::as_writable_bytes(std::span(&wptr, 1)))) return;
    q.waiting = false;
    auto report = [&] {
        const uint32_t r = static_cast<uint32_t>(q.rptr % q.ring_dwords);
        write(q, q.rptr_report, std::as_bytes(std::span(&r, 1)));
    };
    if (wptr < q.rptr) {
        hang(q, fmt::format("write pointer {} went backwards (read pointer {})", wptr, q.rptr), "WPTR_POLL_ADDR",
             "tinygrad ops_amd.py AMDComputeQueue._submit (put only grows)");
        return;
    }
    if (wptr - q.rptr > q.ring_dwords) {
        hang(q, fmt::format("write pointer {} is more than a ring ({} dwords) ahead of the read pointer {}", wptr,
                            q.ring_dwords, q.rptr),
             "WPTR_POLL_ADDR", kHqd);
        return;
    }
    while (!q.hung) {
        if (q.in_ib) {
            // Resume (or continue) the indirect buffer.
            while (q.ib_pos < q.ib_dwords && !q.hung) {
                const uint64_t at = q.ib_va + q.ib_pos * 4;
                uint32_t header = 0;
                if (!read32(q, at, header)) return;
                const std::string where = fmt::format("IB {} dword {}", hex(q.ib_va), q.ib_pos);
                const uint32_t n = packet_dwords(header);
                if (q.ib_pos + n > q.ib_dwords)
                    return hang(q, fmt::format("packet of {} dwords crosses the end of the {}-dword IB", n, q.ib_dwords),
                                where, kNvd);
                std::vector<uint32_t> words(n);
                if (!read(q, at, std::as_writable_bytes(std::span(words)))) return;
                const Step s = execute(q, words, where, true);
                if (s == Step::wait) {
                    q.waiting = true;
                    return;
                }
                if (s == Step::stop) return;
                q.ib_pos += n;
            }
            q.in_ib = false;
            q.rptr += 4;  // the INDIRECT_BUFFER packet itself
            report();
            continue;
        }
        if (q.rptr == wptr) break;
        const uint64_t at = q.ring_va + (q.rptr % q.ring_dwords) * 4;
        const std::string where = fmt::format("ring {} dword {}", hex(q.ring_va), q.rptr % q.ring_dwords);
        uint32_t header = 0;
        if (!read32(q, at, header)) return;
        const uint32_t n = packet_dwords(header);
        if (q.rptr + n > wptr)
            return hang(q, fmt::format("packet of {} dwords crosses the write pointer {} (read pointer {})", n, wptr, q.rptr),
                        where, "tinygrad ops_amd.py AMDComputeQueue._submit (a submission is whole packets)");
        std::vector<uint32_t> words(n);
        for (uint32_t i = 0; i < n; ++i)  // PM4 packets may wrap around the ring end
            if (!read32(q, q.ring_va + ((q.rptr + i) % q.ring_dwords) * 4, words[i])) return;
        const Step s = execute(q, words, where, false);
        if (s == Step::wait) {
            q.waiting = true;
            return;
        }
        if (s == Step::stop) return;
        if (q.in_ib) continue;  // the IB runs; its packet is retired when it ends
        q.rptr += n;
        report();
    }
}

ComputeEngine::Step ComputeEngine::execute(Queue& q, const std::vector<uint32_t>& w, const std::string& where, bool in_ib) {
    const uint32_t header = w[0];
    auto bad = [&](const std::string& what, const std::string& source = kNvd) {
        hang(q, what, where, source);
        return Step::stop;
    };
    if ((header >> 30) != 3)
        return bad(fmt::format("header {} is a type-{} packet: compute queues take type-3 only", hex(header), header >> 30));
    const uint32_t op = (header >> 8) & 0xff;
    const uint32_t payload = static_cast<uint32_t>(w.size()) - 1;
    if (op == pm4::kNop && w.size() == 1) return Step::next;  // the one-dword NOP (count 0x3FFF)
    const uint32_t fixed = fixed_payload(op);
    if (fixed != 0 && payload != fixed)
        return bad(fmt::format("opcode {} with count {} ({} payload dwords): it takes {}", hex(op), payload - 1, payload, fixed));
    auto addr64 = [&](size_t lo, size_t hi) { return (uint64_t{w[hi] & 0xffff} << 32) | w[lo]; };
    switch (op) {
        case pm4::kNop: return Step::next;
        case pm4::kSetShReg:
        case pm4::kSetUconfigReg: {
            if (payload < 2) return bad(fmt::format("SET_*_REG with {} payload dwords: needs an offset and a value", payload));
            const uint32_t reg = w[1] & 0xffff;
            const uint32_t count = payload - 1;
            if (op == pm4::kSetShReg) {
                if (reg + count > q.sh.size())
                    return bad(fmt::format("SET_SH_REG offset {} + {} values runs past SET_SH_REG_END", hex(reg), count));
                for (uint32_t i = 0; i < count; ++i) q.sh[reg + i] = w[2 + i];
            } else {
                if (reg + count > pm4::kSetUconfigRegEnd - pm4::kSetUconfigRegStart)
                    return bad(fmt::format("SET_UCONFIG_REG offset {} + {} values runs past the range", hex(reg), count));
                for (uint32_t i = 0; i < count; ++i) q.uconfig[reg + i] = w[2 + i];
            }
            return Step::next;
        }
        case pm4::kDispatchDirect: {
            Dispatch d;
            d.pipe = q.pipe;
            d.queue = q.queue;
            d.program = ((uint64_t{q.sh[kShPgmHi]} << 32) | q.sh[kShPgmLo]) << 8;
            d.grid = {w[1], w[2], w[3]};
            d.initiator = w[4];
            for (int i = 0; i < 3; ++i) d.block[i] = q.sh[kShNumThreadX + i] & 0x3ff;  // NUM_THREAD_FULL bits 0-9
            for (int i = 0; i < 16; ++i) d.user_sgprs[i] = q.sh[kShUserData0 + i];
            d.pgm_rsrc1 = q.sh[kShPgmRsrc1];
            d.pgm_rsrc2 = q.sh[kShPgmRsrc2];
            d.pgm_rsrc3 = q.sh[kShPgmRsrc3];
            if (!(d.initiator & 1)) return bad("DISPATCH_DIRECT without COMPUTE_DISPATCH_INITIATOR.COMPUTE_SHADER_EN");
            if (d.program == 0) return bad("DISPATCH_DIRECT with COMPUTE_PGM_LO/HI unset (program address 0)");
            for (int i = 0; i < 3; ++i)
                if (d.block[i] == 0) return bad("DISPATCH_DIRECT with a COMPUTE_NUM_THREAD_X/Y/Z of 0");
            // Held by inject_dispatch_hang: the packet is not retired and nothing after it runs; the
            // engine thread retries it while the queue waits.
            if (hang_dispatches.load(std::memory_order_acquire)) return Step::wait;
            if (on_dispatch) {
                ++q.dispatches;
                on_dispatch(d);
                return Step::next;
            }
            if (executor == nullptr && native == nullptr) return bad("DISPATCH_DIRECT with no way to run kernels", kHostProgram);
            if (d.program % 64 == 0 && gmc_.translate(d.program, VmClient::gfx)) {
                // The instruction cache keeps what a dispatch fetched until GLI_INV | GL2_INV: new code
                // the CPU wrote at an address it holds is not what would run. (An unmapped or misaligned
                // program is the executor's to report.)
                std::array<std::byte, 64> head{};
                if (!read(q, d.program, head)) return Step::stop;
                auto [cached, fresh] = icache_.try_emplace(d.program, head);
                if (!fresh && cached->second != head)
                    return bad(fmt::format("the code at {} changed since a dispatch fetched it into the instruction cache, and "
                                           "no ACQUIRE_MEM with GCR_CNTL GLI_INV and GL2_INV ran in between: the dispatch "
                                           "would run the stale code",
                                           hex(d.program)),
                               kIcache);
            }
            // A host-code descriptor (drivers/hostcode/host_program.h, the model's own contract) runs on
            // the host executor; anything else is the chip's machine code.
            uint32_t magic = 0;
            if (gmc_.translate(d.program, VmClient::gfx) && !read(q, d.program, std::as_writable_bytes(std::span(&magic, 1))))
                return Step::stop;
            const bool host_program = magic == BAREGPU_HOST_PROGRAM_MAGIC || native == nullptr;
            if (host_program && executor == nullptr) return bad("DISPATCH_DIRECT of a host program with no host executor", kHostProgram);
            std::string what;
            HostExecutor::Outcome outcome = HostExecutor::Outcome::refused;
            std::string refused_source;
            running_ = q.pipe * 8 + q.queue;
            try {
                if (host_program) {
                    outcome = executor->run(d, what);
                    refused_source = executor->refused_source.empty() ? std::string(kHostProgram) : executor->refused_source;
                } else {
                    const NativeExecutor::Outcome o = native->run(d, what);
                    outcome = o == NativeExecutor::Outcome::done    ? HostExecutor::Outcome::done
                              : o == NativeExecutor::Outcome::fault ? HostExecutor::Outcome::fault
                                                                    : HostExecutor::Outcome::refused;
                    refused_source = native->refused_source;
                }
            } catch (const std::exception& e) {
                // The host ran out of something (mappings, memory): the dispatch cannot run.
                what = fmt::format("the model could not run the dispatch: {}", e.what());
            }
            running_.reset();
            // Dequeued or reset while the kernel ran (the model's lock was released): stop here;
            // the caller removes the queue.
            if (q.remove_pending) return Step::stop;
            switch (outcome) {
                case HostExecutor::Outcome::done: ++q.dispatches; return Step::next;
                case HostExecutor::Outcome::fault: q.hung = true; return Step::stop;  // latched and in the IH ring
                case HostExecutor::Outcome::refused: return bad(what, refused_source.empty() ? std::string(kHostProgram) : refused_source);
            }
            return Step::stop;
        }
        case pm4::kReleaseMem: {
            // dw1 EVENT_TYPE bits 0-5, EVENT_INDEX bits 8-11 (5 = end of pipe); dw2 DST_SEL 16-17,
            // INT_SEL 24-26, DATA_SEL 29-31; dw3/4 address; dw5/6 data (kfd_pm4_headers_ai.h
            // pm4_mec_release_mem).
            const uint32_t event_index = (w[1] >> 8) & 0xf;
            const uint32_t dst_sel = (w[2] >> 16) & 3, int_sel = (w[2] >> 24) & 7, data_sel = (w[2] >> 29) & 7;
            if (event_index != 5 && event_index != 6)
                return bad(fmt::format("RELEASE_MEM event_index {}: end-of-pipe (5) or shader (6) only", event_index), kPm4Ai);
            if (dst_sel != 0) return bad(fmt::format("RELEASE_MEM dst_sel {}: only memory (0) is modelled", dst_sel), kPm4Ai);
            if (int_sel > 3) return bad(fmt::format("RELEASE_MEM int_sel {} is reserved", int_sel), kPm4Ai);
            const uint64_t va = (uint64_t{w[4]} << 32) | w[3];
            uint64_t data = 0;
            unsigned bytes = 0;
            switch (data_sel) {
                case 0: break;
                case 1: bytes = 4; data = w[5]; break;
                case 2: bytes = 8; data = (uint64_t{w[6]} << 32) | w[5]; break;
                case 3: bytes = 8; data = gpu_clock(chip_); break;
                default: return bad(fmt::format("RELEASE_MEM data_sel {}: not modelled (0-3 only)", data_sel), kPm4Ai);
            }
            if (bytes != 0) {
                if (va % bytes != 0)
                    return bad(fmt::format("RELEASE_MEM destination {} is not {}-byte aligned", hex(va), bytes), kPm4Ai);
                if (!write(q, va, std::as_bytes(std::span(&data, 1)).first(bytes))) return Step::stop;
            }
            if (int_sel != 0) {
                IhEntry e;
                e.client_id = gmc::kIhClientGfx;
                e.source_id = pm4::kSrcIdCpEop;
                // ring_id as gfx_v11_0_eop_irq decodes it: ME bits 2-3, PIPE bits 0-1, QUEUE bits 4-6.
                e.ring_id = static_cast<uint8_t>((1u << 2) | q.pipe | (q.queue << 4));
                e.src_data[0] = w[7];  // the context id
                ih_.push(e);
            }
            return Step::next;
        }
        case pm4::kWaitRegMem: {
            // dw1 FUNCTION bits 0-2, MEM_SPACE bit 4, OPERATION bits 6-7, ENGINE bit 8; dw2/3
            // address (dword aligned); dw4 reference; dw5 mask; dw6 poll interval.
            const uint32_t function = w[1] & 7, mem_space = (w[1] >> 4) & 1, operation = (w[1] >> 6) & 3;
            if (function == 7) return bad("WAIT_REG_MEM function 7 is reserved");
            if (operation > 1 || (mem_space == 1 && operation != 0))
                return bad(fmt::format("WAIT_REG_MEM mem_space {} operation {}: only a wait (0) on memory or a register, "
                                       "or write-wait-write (1) on registers, is modelled",
                                       mem_space, operation));
            if (mem_space == 0) {
                // Registers (dword addresses, as gfx_v11_0_wait_reg_mem passes them): operation 1
                // writes the reference to the first and waits on the second (the HDP flush).
                const uint32_t reg0 = w[2] & 0x3ffff, reg1 = w[3] & 0x3ffff;
                if (!reg_read || !reg_write) return bad("WAIT_REG_MEM on a register: no register file");
                if (operation == 1) reg_write(reg0, w[4]);
                const uint32_t value = reg_read(operation == 1 ? reg1 : reg0);
                return compare(function, value & w[5], w[4]) ? Step::next : Step::wait;
            }
            const uint64_t va = addr64(2, 3);
            if (va % 4 != 0) return bad(fmt::format("WAIT_REG_MEM address {} is not dword aligned", hex(va)));
            uint32_t value = 0;
            if (!read32(q, va, value)) return Step::stop;
            return compare(function, value & w[5], w[4]) ? Step::next : Step::wait;
        }
        case pm4::kWaitRegMem64: {
            // Mesa amd_cp_packets_gfx11.h PKT3_WAIT_REG_MEM64 (1764-1826): dw1 as WAIT_REG_MEM
            // (FUNCTION bits 0-2, MEM_SPACE bit 4, OPERATION bits 6-7); dw2/3 address (8-byte
            // aligned); dw4/5 reference lo/hi; dw6/7 mask lo/hi; dw8 poll interval. Memory only.
            const uint32_t function = w[1] & 7, mem_space = (w[1] >> 4) & 1, operation = (w[1] >> 6) & 3;
            if (function == 7) return bad("WAIT_REG_MEM64 function 7 is reserved");
            if (mem_space != 1 || operation != 0)
                return bad(fmt::format("WAIT_REG_MEM64 mem_space {} operation {}: only a wait (0) on memory (1) is "
                                       "modelled",
                                       mem_space, operation));
            const uint64_t va = addr64(2, 3);
            if (va % 8 != 0) return bad(fmt::format("WAIT_REG_MEM64 address {} is not 8-byte aligned", hex(va)));
            const uint64_t ref = (uint64_t{w[5]} << 32) | w[4], mask = (uint64_t{w[7]} << 32) | w[6];
            uint64_t value = 0;
            if (!read(q, va, std::as_writable_bytes(std::span(&value, 1)))) return Step::stop;
            return compare(function, value & mask, ref) ? Step::next : Step::wait;
        }
        case pm4::kAcquireMem:
            // GC 10+ layout: dw7 GCR_CNTL, GLI_INV bits 1:0, GL2_INV bit 14 (soc15d.h
            // PACKET3_ACQUIRE_MEM_GCR_CNTL_*). Only the instruction cache is modelled.
            if ((w[7] & 3u) != 0 && (w[7] & (1u << 14)) != 0) icache_.clear();
            return Step::next;
        case pm4::kEventWrite: {
            // dw1 EVENT_TYPE bits 0-5, EVENT_INDEX bits 8-11; index 0-4 events carry no address.
            if (payload != 1 && payload != 3)
                return bad(fmt::format("EVENT_WRITE with {} payload dwords (1, or 3 with an address)", payload));
            return Step::next;
        }
        case pm4::kIndirectBuffer: {
            if (in_ib) return bad("INDIRECT_BUFFER inside an IB: chained IBs are not modelled yet");
            // dw1 IB_BASE_LO (bits 2-31), dw2 IB_BASE_HI (16 bits), dw3 IB_SIZE bits 0-19,
            // VALID bit 23 (nvd.h INDIRECT_BUFFER_VALID).
            const uint64_t va = addr64(1, 2);
            const uint32_t size = w[3] & 0xfffff;
            if (va % 4 != 0) return bad(fmt::format("INDIRECT_BUFFER base {} is not dword aligned", hex(va)));
            if (!(w[3] & (1u << 23))) return bad("INDIRECT_BUFFER without INDIRECT_BUFFER_VALID (bit 23)");
            if (size == 0) return bad("INDIRECT_BUFFER of 0 dwords");
            if (!gmc_.probe(va, uint64_t{size} * 4, false, VmClient::gfx)) {
                q.hung = true;
                return Step::stop;
            }
            q.in_ib = true;
            q.ib_va = va;
            q.ib_dwords = size;
            q.ib_pos = 0;
            return Step::next;
        }
        default: return bad(fmt::format("unknown PM4 opcode {}", hex(op)));
    }
}

}  // namespace baregpu::sim::amdgpu
