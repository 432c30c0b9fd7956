#include "drivers/sim/amdgpu/native_exec.hpp"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <unordered_map>

namespace baregpu::sim::amdgpu {

namespace {

constexpr const char* kRsrc = "LLVM AMDGPUUsage.rst, \"compute_pgm_rsrc1/2 for GFX6-GFX12\" and \"Initial Kernel Execution State\"";
constexpr uint64_t kGpuPage = 4096;

// The shader's view of memory: VMID 0 through the GC hub, one translation per 4 KiB page per
// dispatch (the page tables cannot change while the model's lock is held).
class GpuMemory final : public rdna::Memory {
public:
    GpuMemory(Chip& chip, Gmc& gmc) : chip_(chip), gmc_(gmc) {}

    std::byte* page(uint64_t page_va, bool write) override {
        auto it = pages_.find(page_va);
        if (it == pages_.end()) it = pages_.emplace(page_va, lookup(page_va)).first;
        const Entry& e = it->second;
        if (e.host == nullptr || (write && !e.writeable)) {
            gmc_.fault(page_va, write, VmClient::gfx);  // latches the status and posts the IH entry
            return nullptr;
        }
        return e.host;
    }

    // The distinct pages the dispatch touched (code, kernel arguments, data), in bytes.
    uint64_t footprint_bytes() const { return pages_.size() * kGpuPage; }

private:
    struct Entry {
        std::byte* host = nullptr;
        bool writeable = false;
    };
    Entry lookup(uint64_t page_va) {
        auto t = gmc_.translate(page_va, VmClient::gfx);
        if (!t) return {};
        if (t->system) {
            std::byte* h = chip_.port != nullptr ? chip_.port->dma_host_memory(BusAddress(t->address), kGpuPage) : nullptr;
            return {h, t->writeable};
        }
        if (t->address + kGpuPage > chip_.vram().size()) return {};
        return {chip_.vram().data() + t->address, t->writeable};
    }
    Chip& chip_;
    Gmc& gmc_;
    std::unordered_map<uint64_t, Entry> pages_;
};

bool fetch_code(void* ctx, uint64_t va, std::span<uint32_t> words) {
    auto* memory = static_cast<GpuMemory*>(ctx);
    for (size_t i = 0; i < words.size(); ++i) {
        const uint64_t a = va + 4 * i;
        std::byte* p = memory->page(a & ~(kGpuPage - 1), false);
        if (p == nullptr) return false;
        std::memcpy(&words[i], p + (a & (kGpuPage - 1)), 4);
    }
    return true;
}

// The time model of the cost report (a documented estimate, not a measurement): a wave32 VALU or
// SALU instruction issues once per clock per SIMD, two SIMD32 per CU (RDNA3 ISA guide §1
// "Terminology", RDNA whitepaper: a WGP = 2 CUs = 4 SIMD32); a VOPD is one issue of two
// operations ("Dual Issue VALU"). DRAM traffic at the board's bandwidth: when the pages the
// dispatch touches fit in the chip's Infinity Cache, each is read or written once (the rest of
// the loads and stores hit the caches, whose bandwidth is not modelled); otherwise every byte
// loaded or stored. The kernel takes the longer of the two, plus a fixed 2 µs launch.
struct Board {
    unsigned cus;
    double clock_ghz;
    double bandwidth_gbs;
    uint64_t infinity_cache_bytes;
};
// Radeon RX 7900 XTX (Navi31): 96 CUs, 2.5 GHz boost, 960 GB/s, 96 MB Infinity Cache; Radeon RX
// 9070 XT (Navi48): 64 CUs, 2.97 GHz boost, 640 GB/s, 64 MB (AMD product specifications).
Board board(const AsicInfo& asic) {
    return asic.gc_major() >= 12 ? Board{64, 2.97, 640, uint64_t(64) << 20} : Board{96, 2.5, 960, uint64_t(96) << 20};
}

}  // namespace

NativeExecutor::Outcome NativeExecutor::run(const Dispatch& d, std::string& what) {
    refused_source = kRsrc;
    const rdna::Gen gen = chip_.asic.gc_major() >= 12 ? rdna::Gen::gfx12 : rdna::Gen::gfx11;
    GpuMemory memory(chip_, gmc_);
    // The first instruction fetch: an unmapped program is a page fault before anything else.
    uint32_t first = 0;
    if (!fetch_code(&memory, d.program, std::span(&first, 1))) return Outcome::fault;
    // COMPUTE_DISPATCH_INITIATOR.CS_W32_EN (bit 15, gc_11_0_0_sh_mask.h).
    if (!(d.initiator & (1u << 15))) {
        what = "DISPATCH_DIRECT without COMPUTE_DISPATCH_INITIATOR.CS_W32_EN: wave64 is not modelled";
        return Outcome::refused;
    }
    if (d.program % 256 != 0) {
        what = fmt::format("COMPUTE_PGM {:#x} is not 256-byte aligned", d.program);
        return Outcome::refused;
    }
    rdna::WaveSetup s;
    s.vgprs = ((d.pgm_rsrc1 & 0x3f) + 1) * 8;
    if (d.pgm_rsrc2 & 1) {
        what = "COMPUTE_PGM_RSRC2.SCRATCH_EN is set: scratch memory is not modelled";
        return Outcome::refused;
    }
    s.user_sgpr_count = (d.pgm_rsrc2 >> 1) & 0x1f;
    if (s.user_sgpr_count > d.user_sgprs.size()) {
        what = fmt::format("COMPUTE_PGM_RSRC2.USER_SGPR {} exceeds the {} COMPUTE_USER_DATA registers", s.user_sgpr_count,
                           d.user_sgprs.size());
        return Outcome::refused;
    }
    std::copy(d.user_sgprs.begin(), d.user_sgprs.end(), s.user_sgprs.begin());
    for (int i = 0; i < 3; ++i) s.tgid_en[i] = (d.pgm_rsrc2 >> (7 + i)) & 1;
    s.tg_size_en = (d.pgm_rsrc2 >> 10) & 1;
    s.tidig_comp_cnt = (d.pgm_rsrc2 >> 11) & 3;
    s.lds_bytes = ((d.pgm_rsrc2 >> 15) & 0x1ff) * 512;
    s.block = d.block;
    const uint32_t threads = d.block[0] * d.block[1] * d.block[2];
    if (threads > 1024) {
        what = fmt::format("COMPUTE_NUM_THREAD_X*Y*Z = {} is above the 1024 work-items of a workgroup", threads);
        return Outcome::refused;
    }

    rdna::Program program(gen, d.program, fetch_code, &memory);
    rdna::Counts counts;
    rdna::Stop stop;
    const auto begin = std::chrono::steady_clock::now();
    const uint64_t begin_ticks = gpu_clock(chip_);
    for (uint32_t z = 0; z < d.grid[2]; ++z)
        for (uint32_t y = 0; y < d.grid[1]; ++y)
            for (uint32_t x = 0; x < d.grid[0]; ++x)
                if (!rdna::run_workgroup(program, memory, s, {x, y, z}, counts, stop)) {
                    what = fmt::format("workgroup ({}, {}, {}): {}", x, y, z, stop.what);
                    refused_source = gen == rdna::Gen::gfx11 ? "AMD RDNA3 ISA reference guide" : "AMD RDNA4 ISA reference guide";
                    return stop.fault ? Outcome::fault : Outcome::refused;
                }
    const Board b = board(chip_.asic);
    const double issue = double(counts.instructions() - counts.vmem_load - counts.vmem_store - counts.lds - counts.smem) /
                         (b.cus * 2.0 * b.clock_ghz);  // ns
    const uint64_t footprint = memory.footprint_bytes();
    const uint64_t dram = footprint <= b.infinity_cache_bytes ? footprint : counts.bytes_loaded + counts.bytes_stored;
    const double memory_ns = double(dram) / b.bandwidth_gbs;
    last_.program = d.program;
    last_.pipe = d.pipe;
    last_.queue = d.queue;
    last_.counts = counts;
    last_.footprint_bytes = footprint;
    last_.dram_bytes = dram;
    last_.modelled_ns = uint64_t(std::max(issue, memory_ns)) + 2000;
    last_.host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    totals_.counts.add(counts);
    totals_.footprint_bytes += footprint;
    totals_.dram_bytes += dram;
    totals_.modelled_ns += last_.modelled_ns;
    totals_.host_seconds += last_.host_seconds;
    chip_.spend(last_.modelled_ns);
    last_.begin_ticks = begin_ticks;
    last_.end_ticks = gpu_clock(chip_);
    if (log_.size() == kLogged) log_.pop_front();
    log_.push_back(last_);
    if (on_report) on_report(last_);
    return Outcome::done;
}

NativeDispatchReport NativeExecutor::between(uint32_t pipe, uint32_t queue, uint64_t begin, uint64_t end) const {
    NativeDispatchReport sum;
    for (const NativeDispatchReport& r : log_) {
        if (r.pipe != pipe || r.queue != queue || r.begin_ticks < begin || r.end_ticks > end) continue;
        sum.counts.add(r.counts);
        sum.footprint_bytes += r.footprint_bytes;
        sum.dram_bytes += r.dram_bytes;
        sum.modelled_ns += r.modelled_ns;
        sum.host_seconds += r.host_seconds;
    }
    return sum;
}

}  // namespace baregpu::sim::amdgpu
