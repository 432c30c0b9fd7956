// One workgroup of wave32 waves executing GC 11 / GC 12 machine code (the decoder is
// rdna_decode.hpp). Operation semantics follow the pseudocode of AMD's RDNA3 ISA guide
// (chapter 16, "Instructions") and RDNA4 ISA guide (chapter 15); register and operand
// conventions its chapters 3 ("Kernel State"), 4 ("Program Flow Control") and 5 ("Scalar ALU").
//
// The model executes each instruction to completion in program order, so a load's data is in its
// registers when the next instruction reads them; s_waitcnt and its GC 12 successors are kept as
// markers. Waves of a workgroup run in turn; s_barrier (GC 12: s_barrier_signal + s_barrier_wait)
// holds a wave until every live wave of its workgroup reached it. Anything outside what the model
// executes — an unknown encoding, an out-of-range register, an LDS access past the allocation, a
// scratch access — stops the dispatch with a message naming the PC and the instruction.
// A memory access the page tables do not map stops it as a page fault (Memory::page says so).
#pragma once

#include "drivers/sim/amdgpu/rdna_decode.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace baregpu::sim::amdgpu::rdna {

// The GPU virtual address space as the shader sees it.
class Memory {
public:
    virtual ~Memory() = default;
    // Host bytes of the 4 KiB page at `page_va`, or nullptr: a page fault (the implementation has
    // latched and posted it) — or, for a write, a read-only page.
    virtual std::byte* page(uint64_t page_va, bool write) = 0;
};

// Instructions by unit and bytes moved: the cost report.
struct Counts {
    // Wave instructions by unit. A VOPD counts once in valu (one issue: RDNA3/RDNA4 ISA reference
    // guides, "Dual Issue VALU") and once in vopd (its second operation).
    uint64_t salu = 0, smem = 0, valu = 0, vmem_load = 0, vmem_store = 0, lds = 0, branch = 0, other = 0;
    uint64_t vopd = 0;
    uint64_t bytes_loaded = 0, bytes_stored = 0, lds_bytes = 0;
    uint64_t waves = 0, workgroups = 0;
    uint64_t instructions() const { return salu + smem + valu + vmem_load + vmem_store + lds + branch + other; }
    void add(const Counts& o);
};

// The decoded program: instructions decoded on first execution and kept per PC.
class Program {
public:
    // `fetch(va, words)` reads code words through the page tables (false: a fault).
    using Fetch = bool (*)(void* ctx, uint64_t va, std::span<uint32_t> words);
    Program(Gen gen, uint64_t entry, Fetch fetch, void* ctx) : gen_(gen), entry_(entry), fetch_(fetch), ctx_(ctx) {}
    Gen gen() const { return gen_; }
    uint64_t entry() const { return entry_; }
    // The instruction at `pc`; nullptr with `why` set when it cannot be fetched or decoded.
    const Inst* at(uint64_t pc, std::string& why);

private:
    Gen gen_;
    uint64_t entry_;
    Fetch fetch_;
    void* ctx_;
    struct Slot {
        Inst inst;
        bool valid = false;
    };
    std::vector<Slot> slots_;  // by (pc - entry) / 4, grown on demand
};

// The dispatch-wide state the hardware loads into every wave (COMPUTE_PGM_RSRC1/2, user data).
struct WaveSetup {
    uint32_t vgprs = 0;                 // VGPRs allocated per lane (RSRC1.VGPRS granules)
    uint32_t user_sgpr_count = 0;       // RSRC2.USER_SGPR
    std::array<uint32_t, 32> user_sgprs{};  // COMPUTE_USER_DATA_*
    bool tgid_en[3] = {false, false, false};  // RSRC2.TGID_X/Y/Z_EN
    bool tg_size_en = false;            // RSRC2.TG_SIZE_EN
    uint32_t tidig_comp_cnt = 0;        // RSRC2.TIDIG_COMP_CNT
    uint32_t lds_bytes = 0;             // RSRC2.LDS_SIZE in bytes
    std::array<uint32_t, 3> block{1, 1, 1};
};

// Why a dispatch stopped early.
struct Stop {
    bool fault = false;  // a page fault (posted by Memory); otherwise a violation
    std::string what;
};

// Runs workgroup `group` of the dispatch to the end of every wave. false: `stop` says why.
bool run_workgroup(Program& program, Memory& memory, const WaveSetup& setup, std::array<uint32_t, 3> group,
                   Counts& counts, Stop& stop);

}  // namespace baregpu::sim::amdgpu::rdna
