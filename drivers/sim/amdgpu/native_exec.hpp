// How the simulated MEC runs a dispatch of the chip's own machine code (gfx1100 on Navi31,
// gfx1201 on Navi48): the state SET_SH_REG left in the COMPUTE_* registers is what the waves get,
// as the SPI loads it on silicon.
//  * COMPUTE_PGM_LO/HI: the program's first instruction (address >> 8).
//  * COMPUTE_PGM_RSRC1: VGPRS [5:0], granules of 8 VGPRs per lane in wave32 (AMDGPUUsage
//    "compute_pgm_rsrc1 for GFX6-GFX12", GRANULATED_WORKITEM_VGPR_COUNT: GFX10-GFX12 wave32
//    granule 8); every SGPR s0-s105 is available on GC 10 and later (the SGPRS field is ignored).
//  * COMPUTE_PGM_RSRC2 (same document, "compute_pgm_rsrc2"): SCRATCH_EN [0], USER_SGPR [5:1],
//    TGID_X/Y/Z_EN [7], [8], [9], TG_SIZE_EN [10], TIDIG_COMP_CNT [12:11], LDS_SIZE [23:15] in
//    512-byte granules on GC 11/12 (Mesa src/amd/common/ac_gpu_info.c lds_encode_granularity).
//  * COMPUTE_USER_DATA_0..15: the first USER_SGPR SGPRs; then (GC 11) the enabled workgroup ids
//    and TG_SIZE in the next SGPRs; v0 the packed work-item ids (AMDGPUUsage "Initial Kernel
//    Execution State"; GC 12 always puts the ids in TTMP9 / TTMP7, its architected SGPRs).
//  * COMPUTE_DISPATCH_INITIATOR.CS_W32_EN [15]: wave32; wave64 is refused (not modelled).
// Code, kernargs and buffers are read and written through the VMID 0 page tables (gmc.hpp); an
// unmapped access posts the GC page fault to the IH ring and hangs the queue, as a host-code
// dispatch's does. Workgroups run one after another on the engine thread with the model's lock
// held (register accesses wait for a native kernel); the modelled time is added to the clock.
#pragma once

#include "drivers/sim/amdgpu/chip.hpp"
#include "drivers/sim/amdgpu/gmc.hpp"
#include "drivers/sim/amdgpu/pm4_engine.hpp"
#include "drivers/sim/amdgpu/rdna_wave.hpp"

#include <deque>
#include <functional>
#include <string>

namespace baregpu::sim::amdgpu {

// What the last native dispatch did: the cost report's raw numbers.
struct NativeDispatchReport {
    uint64_t program = 0;
    uint32_t pipe = 0, queue = 0;  // the HQD that ran it (MEC1)
    // The GPU clock RELEASE_MEM's timestamps read (gpu_clock, pm4_engine.hpp) when the dispatch
    // began and when it ended: what a profiler's timestamps around it bracket.
    uint64_t begin_ticks = 0, end_ticks = 0;
    rdna::Counts counts;
    // The distinct 4 KiB pages the dispatch touched, in bytes, and the DRAM traffic the time
    // model charged: the footprint when it fits in the Infinity Cache, else every byte moved.
    uint64_t footprint_bytes = 0, dram_bytes = 0;
    uint64_t modelled_ns = 0;
    double host_seconds = 0;
};

class NativeExecutor {
public:
    NativeExecutor(Chip& chip, Gmc& gmc) : chip_(chip), gmc_(gmc) {}

    enum class Outcome { done, fault, refused };
    Outcome run(const Dispatch& d, std::string& what);

    // The source of the rule a refused dispatch broke (for the violation).
    std::string refused_source;
    // Called after every completed native dispatch (tests, the cost report).
    std::function<void(const NativeDispatchReport&)> on_report;
    const NativeDispatchReport& last_report() const { return last_; }
    // Every native dispatch since the model was made, summed (program 0): what a bench run costs.
    const NativeDispatchReport& totals() const { return totals_; }
    // The dispatches HQD (pipe, queue) ran wholly between GPU clock ticks `begin` and `end`, summed
    // (counts and modelled time; program 0): what a kernel between two timestamps did. From the
    // last kLogged dispatches.
    NativeDispatchReport between(uint32_t pipe, uint32_t queue, uint64_t begin, uint64_t end) const;
    static constexpr size_t kLogged = 1 << 16;

private:
    Chip& chip_;
    Gmc& gmc_;
    NativeDispatchReport last_, totals_;
    std::deque<NativeDispatchReport> log_;  // oldest first, at most kLogged
};

}  // namespace baregpu::sim::amdgpu
