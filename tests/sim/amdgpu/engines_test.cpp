// The simulated Navi31's (and, where noted, Navi48's) compute queue (MEC 1, PM4) and SDMA0 queue 0,
// driven with raw registers, page tables and packets written here, independently of drivers/am.
// Offsets and encodings are transcribed again from the Linux headers: gc_11_0_0_offset.h (CP_HQD_*,
// GRBM_GFX_CNTL, CP_MEC_RS64_CNTL, SDMA0_QUEUE0_*), gc_12_0_0_offset.h (the same CP registers at the
// same offsets; SDMA 7's SDMA0_QUEUE0_* block, SdmaRig below), nvd.h and kfd_pm4_headers_ai.h (PM4),
// sdma_v6_0_0_pkt_open.h (SDMA 6 and, per sdma_v7_0.c, SDMA 7), irqsrcs_gfx_11_0_0.h (CP_EOP 181),
// amdgpu_doorbell.h (MEC_RING0 3, sDMA_ENGINE0 0x100; soc24.c keeps them on GC 12).
#include "drivers/hostcode/host_program.h"
#include "rig.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <thread>

namespace baregpu::sim_test_kernels {
std::span<const std::byte> find_object(std::string_view name);
}

namespace engines_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::test::sim_am;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t kVa = 0x200000000000ull;  // VMID 0 VA of the 2 MiB leaf (VRAM 64 MiB)
constexpr uint64_t kLeafVram = 64u << 20;
constexpr uint64_t kPagesVa = kVa + (2u << 20);  // 32 scattered 4 KiB pages
constexpr uint64_t kPagesVram = 128u << 20;      // page i -> kPagesVram + (31 - i) * 4 KiB
constexpr uint64_t kIhRing = 40u << 20, kIhWb = kIhRing + (256u << 10);

// Layout inside the leaf.
constexpr uint64_t kRing = kVa, kWptr = kVa + 0x10000, kRptr = kVa + 0x10100, kEop = kVa + 0x20000,
                   kSignal = kVa + 0x30000, kIb = kVa + 0x40000, kSdmaRing = kVa + 0x80000, kSdmaWptr = kVa + 0x90000,
                   kSdmaRptr = kVa + 0x90100;
constexpr uint32_t kRingDwords = 1024;

// PACKET3(op, n) with n = payload dwords - 1 (nvd.h).
uint32_t pkt3(uint32_t op, uint32_t payload) { return (3u << 30) | ((payload - 1) << 16) | (op << 8); }
constexpr uint32_t kNop = 0x10, kDispatchDirect = 0x15, kWaitRegMem = 0x3C, kIndirectBuffer = 0x3F, kEventWrite = 0x46,
                   kReleaseMem = 0x49, kAcquireMem = 0x58, kSetShReg = 0x76, kWaitRegMem64 = 0x93;
// PACKET3(PACKET3_NOP, 0x3FFF): the one-dword NOP (Linux gfx_v11_0.c ring funcs .nop).
constexpr uint32_t kNop1 = (3u << 30) | (0x3FFFu << 16) | (kNop << 8);

std::vector<uint32_t> release_mem(uint64_t va, uint32_t data_sel, uint32_t int_sel, uint64_t data, uint32_t ctx = 0) {
    // dw1 CACHE_FLUSH_AND_INV_TS_EVENT 0x14 | EVENT_INDEX 5 << 8; dw2 DATA_SEL << 29 | INT_SEL << 24.
    return {pkt3(kReleaseMem, 7), 0x14u | (5u << 8), (data_sel << 29) | (int_sel << 24),
            static_cast<uint32_t>(va), static_cast<uint32_t>(va >> 32), static_cast<uint32_t>(data),
            static_cast<uint32_t>(data >> 32), ctx};
}
std::vector<uint32_t> wait_ge(uint64_t va, uint32_t ref) {
    // FUNCTION 5 (>=) | MEM_SPACE 1 << 4; mask; poll interval.
    return {pkt3(kWaitRegMem, 6), 5u | (1u << 4), static_cast<uint32_t>(va), static_cast<uint32_t>(va >> 32), ref, 0xffffffffu, 4};
}
std::vector<uint32_t> wait64(uint64_t va, uint32_t function, uint64_t ref, uint64_t mask = ~0ull) {
    // PKT3_WAIT_REG_MEM64 (Mesa amd_cp_packets_gfx11.h): control (FUNCTION | MEM_SPACE 1 << 4),
    // address lo/hi, reference lo/hi, mask lo/hi, poll interval.
    return {pkt3(kWaitRegMem64, 8),       function | (1u << 4),           static_cast<uint32_t>(va),
            static_cast<uint32_t>(va >> 32), static_cast<uint32_t>(ref),  static_cast<uint32_t>(ref >> 32),
            static_cast<uint32_t>(mask),     static_cast<uint32_t>(mask >> 32), 4};
}
// SET_SH_REG offset = gc_11_0_0 COMPUTE_* offset + static GC base 0x1260 - 0x2c00.
constexpr uint32_t sh(uint32_t gc_offset) { return gc_offset + 0x1260 - 0x2c00; }

struct EngineRig {
    explicit EngineRig(const std::filesystem::path& dir, Asic asic = Asic::navi31)
        : rig(asic, dir), gfx12(asic == Asic::navi48) {
        REQUIRE_AMD_FIRMWARE();
        // The MEC runs only the firmware the RLC autoload put in place, from the start address its
        // header gives; doorbells reach engines only through the S2A routes and the MEC's range.
        rig.boot_gc();
        const auto* gc = rig.disc.find(11);
        REQUIRE(gc != nullptr);
        gc0 = static_cast<uint32_t>(gc->base_addresses.at(0));
        gc1 = static_cast<uint32_t>(gc->base_addresses.at(1));
        // IH ring 0 (ih_v6_0.c order), as navi_test does.
        rig.wr(rig.r.ih_base, static_cast<uint32_t>(rig.mc(kIhRing) >> 8));
        rig.wr(rig.r.ih_base_hi, static_cast<uint32_t>(rig.mc(kIhRing) >> 40));
        rig.wr(rig.r.ih_wptr_addr_lo, static_cast<uint32_t>(rig.mc(kIhWb)));
        rig.wr(rig.r.ih_wptr_addr_hi, static_cast<uint32_t>(rig.mc(kIhWb) >> 32));
        // RB_SIZE, WPTR_OVERFLOW_ENABLE, RB_ENABLE, MC_SPACE 4 (an MC address; ih_v6_0_irq_init).
        rig.wr(rig.r.ih_cntl, (16u << 1) | (1u << 16) | 1u | (4u << 28));
        // VMID 0 page table (amdgpu_vm.h): root/PDB1/PDB0 at 48 MiB, a PTB at +12 KiB. PDB0[0] is a
        // 2 MiB leaf (AMDGPU_PDE_PTE bit 54 on GC 11, AMDGPU_PDE_PTE_GFX12 bit 63 on GC 12); PDB0[1]
        // points at the PTB with 32 pages mapped in reverse order, so that consecutive VAs are not
        // consecutive in VRAM.
        const uint64_t root = 48u << 20, pdb1 = root + 0x1000, pdb0 = root + 0x2000, ptb = root + 0x3000;
        const uint64_t rw = 1 | (1 << 5) | (1 << 6);
        put64(root, pdb1 | 1);
        put64(pdb1, pdb0 | 1);
        put64(pdb0, kLeafVram | rw | (gfx12 ? 1ull << 63 : 1ull << 54));
        put64(pdb0 + 8, ptb | 1);
        for (uint64_t i = 0; i < 32; ++i) put64(ptb + i * 8, (kPagesVram + (31 - i) * 0x1000) | rw);
        rig.wr(rig.r.gc_pt_start_lo, static_cast<uint32_t>(kVa >> 12));
        rig.wr(rig.r.gc_pt_start_hi, static_cast<uint32_t>(kVa >> 44));
        rig.wr(rig.r.gc_pt_end_lo, static_cast<uint32_t>(0x7fffffffffffull >> 12));
        rig.wr(rig.r.gc_pt_end_hi, static_cast<uint32_t>(0x7fffffffffffull >> 44));
        rig.wr(rig.r.gc_pt_base_lo, static_cast<uint32_t>(root | 1));
        rig.wr(rig.r.gc_pt_base_hi, 0);
        // ENABLE_CONTEXT, PAGE_TABLE_DEPTH 3 and the seven faults' ENABLE_INTERRUPT/ENABLE_DEFAULT pairs,
        // from bit 9 (gc_11_0_0_sh_mask.h) or bit 10 (gc_12_0_0_sh_mask.h).
        rig.wr(rig.r.gc_ctx0_cntl, 1 | (3u << 1) | (0x3fffu << (gfx12 ? 10 : 9)));
        rig.dev->delay(5ms);  // the clock the timestamps count
    }

    void put64(uint64_t vram, uint64_t v) {
        rig.vram_write32(vram, static_cast<uint32_t>(v));
        rig.vram_write32(vram + 4, static_cast<uint32_t>(v >> 32));
    }
    // A VA in the leaf as a VRAM offset (the test writes the ring through BAR0).
    static uint64_t leaf(uint64_t va) { return kLeafVram + (va - kVa); }
    uint32_t va32(uint64_t va) {
        uint32_t v = 0;
        REQUIRE(rig.model->gpu_read(va, std::as_writable_bytes(std::span(&v, 1))));
        return v;
    }
    uint64_t va64(uint64_t va) {
        uint64_t v = 0;
        REQUIRE(rig.model->gpu_read(va, std::as_writable_bytes(std::span(&v, 1))));
        return v;
    }
    void set_va32(uint64_t va, uint32_t v) { REQUIRE(rig.model->gpu_write(va, std::as_bytes(std::span(&v, 1)))); }
    void set_va64(uint64_t va, uint64_t v) { REQUIRE(rig.model->gpu_write(va, std::as_bytes(std::span(&v, 1)))); }

    // gc_11_0_0_offset.h, BASE_IDX 0 / 1; gc_12_0_0_offset.h has CP_HQD_* (block cpphqddec),
    // GRBM_GFX_CNTL and CP_MEC_RS64_CNTL at the same offsets, and gc_12_0_0_sh_mask.h the same fields.
    uint32_t hqd(uint32_t off) const { return gc0 + off; }
    void enable_mec() { rig.wr(gc1 + 0x2904, 1u << 26); }  // CP_MEC_RS64_CNTL.MEC_PIPE0_ACTIVE, not halted
    // Linux gfx_v11_0 / tinygrad AM_GFX.setup_ring order: select me 1 pipe 0 queue q, the registers, ACTIVE.
    void activate(uint32_t queue = 0, uint64_t ring = kRing, uint64_t eop = kEop, uint32_t slot = 3) {
        rig.wr(gc1 + 0x0900, (1u << 2) | (queue << 8));  // GRBM_GFX_CNTL MEID 1, PIPEID 0, QUEUEID
        rig.wr(hqd(0x1fac), 0);                           // CP_HQD_VMID
        rig.wr(hqd(0x1fb1), static_cast<uint32_t>(ring >> 8));
        rig.wr(hqd(0x1fb2), static_cast<uint32_t>(ring >> 40));
        rig.wr(hqd(0x1fb4), static_cast<uint32_t>(kRptr));
        rig.wr(hqd(0x1fb5), static_cast<uint32_t>(kRptr >> 32));
        rig.wr(hqd(0x1fb6), static_cast<uint32_t>(kWptr));
        rig.wr(hqd(0x1fb7), static_cast<uint32_t>(kWptr >> 32));
        rig.wr(hqd(0x1fb8), ((slot * 2) << 2) | (1u << 30));  // DOORBELL_OFFSET (dwords), DOORBELL_EN
        rig.wr(hqd(0x1fba), 9u | (5u << 8));                   // QUEUE_SIZE = log2(1024) - 1, RPTR_BLOCK_SIZE 5
        rig.wr(hqd(0x1fce), static_cast<uint32_t>(eop >> 8));
        rig.wr(hqd(0x1fcf), static_cast<uint32_t>(eop >> 40));
        rig.wr(hqd(0x1fd0), 9u);  // EOP_SIZE
        rig.wr(hqd(0x1fab), 1);   // CP_HQD_ACTIVE
        rig.wr(gc1 + 0x0900, 0);
    }
    // Copies the words into the ring at the write pointer, publishes the wptr, rings slot 3.
    void submit(const std::vector<uint32_t>& words, bool ring_doorbell = true) {
        for (uint32_t w : words) {
            rig.vram_write32(leaf(kRing) + (wptr % kRingDwords) * 4, w);
            ++wptr;
        }
        set_va64(kWptr, wptr);
        if (ring_doorbell) kick();
    }
    void kick() { doorbell(3, wptr); }
    // The engines run on the model's thread: the doorbell write returns at once, and the test
    // waits for the engines to go idle before it looks.
    void doorbell(uint64_t slot, uint64_t value) {
        rig.dev->bar(2).write64(BarOffset(slot * 8), value);
        REQUIRE(rig.model->wait_engines_idle());
    }
    uint32_t ih_wptr() { return rig.rd(rig.r.ih_wptr) & 0x3fffc; }

    Rig rig;
    bool gfx12 = false;
    uint32_t gc0 = 0, gc1 = 0;
    uint64_t wptr = 0;
};

}  // namespace

TEST_CASE("sim-am engines: a compute queue runs RELEASE_MEM, WAIT_REG_MEM, DISPATCH_DIRECT and an IB", "[sim-am][engines]") {
    TempDir dir;
    EngineRig e(dir.path);
    std::vector<baregpu::sim::amdgpu::Dispatch> dispatches;
    e.rig.model->set_dispatch_hook([&](const baregpu::sim::amdgpu::Dispatch& d) { dispatches.push_back(d); });
    e.enable_mec();
    e.activate();
    REQUIRE(e.rig.violations() == 0);
    REQUIRE(e.rig.model->compute_queue(0, 0).active);

    SECTION("RELEASE_MEM writes 32-bit, 64-bit data and the 100 MHz clock, and raises the EOP interrupt") {
        std::vector<uint32_t> words = release_mem(kSignal, 1, 0, 0x11223344);
        auto more = release_mem(kSignal + 8, 2, 0, 0xaabbccdd00112233ull);
        words.insert(words.end(), more.begin(), more.end());
        more = release_mem(kSignal + 16, 3, 2, 0, 0x5a5a);
        words.insert(words.end(), more.begin(), more.end());
        e.submit(words);
        CHECK(e.rig.violation_text().empty());
        CHECK(e.va32(kSignal) == 0x11223344);
        CHECK(e.va64(kSignal + 8) == 0xaabbccdd00112233ull);
        CHECK(e.va64(kSignal + 16) >= 500000);  // >= 5 ms of 10 ns ticks
        CHECK(e.va32(kRptr) == e.wptr);          // the read pointer report
        CHECK(e.rig.model->compute_queue(0, 0).rptr == e.wptr);
        // One IH entry: client GFX 10, source CP_EOP 181, ring_id ME 1 pipe 0 queue 0, ctx id.
        REQUIRE(e.ih_wptr() == 32);
        const uint32_t dw0 = e.rig.vram32(kIhRing);
        CHECK((dw0 & 0xff) == 10);
        CHECK(((dw0 >> 8) & 0xff) == 181);
        CHECK(((dw0 >> 16) & 0xff) == (1u << 2));
        CHECK(e.rig.vram32(kIhRing + 16) == 0x5a5a);
    }

    SECTION("WAIT_REG_MEM blocks until the memory is set, then the queue resumes on the next doorbell") {
        e.set_va32(kSignal + 0x100, 3);
        std::vector<uint32_t> words = wait_ge(kSignal + 0x100, 5);
        auto rel = release_mem(kSignal, 1, 0, 0x77);
        words.insert(words.end(), rel.begin(), rel.end());
        e.submit(words);
        CHECK(e.rig.model->compute_queue(0, 0).waiting);
        CHECK(e.va32(kSignal) == 0);
        e.kick();  // still 3 < 5
        CHECK(e.va32(kSignal) == 0);
        e.set_va32(kSignal + 0x100, 5);
        e.kick();
        CHECK(e.va32(kSignal) == 0x77);
        CHECK_FALSE(e.rig.model->compute_queue(0, 0).waiting);
        CHECK(e.rig.model->compute_queue(0, 0).rptr == e.wptr);
        CHECK(e.rig.violations() == 0);
    }

    SECTION("WAIT_REG_MEM64 >= on a 64-bit value whose high dword decides: blocks, then resumes") {
        // Low dword already above the reference's, high dword below: a 32-bit wait would pass.
        e.set_va64(kSignal + 0x100, 0x00000001ffffffffull);
        std::vector<uint32_t> words = wait64(kSignal + 0x100, 5, 0x00000002'00000000ull);
        auto rel = release_mem(kSignal, 1, 0, 0x64);
        words.insert(words.end(), rel.begin(), rel.end());
        e.submit(words);
        CHECK(e.rig.model->compute_queue(0, 0).waiting);
        CHECK(e.va32(kSignal) == 0);
        e.set_va64(kSignal + 0x100, 0x0000000200000000ull);
        e.kick();
        CHECK(e.va32(kSignal) == 0x64);
        CHECK_FALSE(e.rig.model->compute_queue(0, 0).waiting);
        CHECK(e.rig.model->compute_queue(0, 0).rptr == e.wptr);
        CHECK(e.rig.violations() == 0);
    }

    SECTION("one-dword NOPs (count 0x3FFF) between packets, in the ring and in an IB") {
        std::vector<uint32_t> ib = {kNop1};
        auto r2 = release_mem(kSignal + 8, 1, 0, 0x22);
        ib.insert(ib.end(), r2.begin(), r2.end());
        ib.push_back(kNop1);
        for (size_t i = 0; i < ib.size(); ++i) e.rig.vram_write32(EngineRig::leaf(kIb) + i * 4, ib[i]);
        std::vector<uint32_t> w = {kNop1, kNop1};
        auto r1 = release_mem(kSignal, 1, 0, 0x11);
        w.insert(w.end(), r1.begin(), r1.end());
        w.push_back(kNop1);
        w.insert(w.end(), {pkt3(kIndirectBuffer, 3), static_cast<uint32_t>(kIb), static_cast<uint32_t>(kIb >> 32),
                           static_cast<uint32_t>(ib.size()) | (1u << 23)});
        w.push_back(kNop1);
        e.submit(w);
        CHECK(e.rig.violation_text().empty());
        CHECK(e.va32(kSignal) == 0x11);
        CHECK(e.va32(kSignal + 8) == 0x22);
        CHECK(e.rig.model->compute_queue(0, 0).rptr == e.wptr);
        CHECK(e.va32(kRptr) == e.wptr);
    }

    SECTION("DISPATCH_DIRECT hands the program, grid, block and kernarg pointer to the hook") {
        const uint64_t code = kVa + 0x50000, kernarg = kVa + 0x60000;
        std::vector<uint32_t> w = {pkt3(kAcquireMem, 7), 0, 0xffffffff, 0xffffffff, 0, 0, 0, 0x3ff};
        auto add = [&](std::initializer_list<uint32_t> l) { w.insert(w.end(), l); };
        add({pkt3(kSetShReg, 3), sh(0x1bac), static_cast<uint32_t>(code >> 8), static_cast<uint32_t>(code >> 40)});
        add({pkt3(kSetShReg, 4), sh(0x1ba7), 64, 2, 1});  // COMPUTE_NUM_THREAD_X/Y/Z
        add({pkt3(kSetShReg, 3), sh(0x1be0), static_cast<uint32_t>(kernarg), static_cast<uint32_t>(kernarg >> 32)});
        add({pkt3(kDispatchDirect, 4), 8, 4, 2, 1u | (1u << 2)});
        add({pkt3(kEventWrite, 1), 7u | (4u << 8)});  // CS_PARTIAL_FLUSH, EVENT_INDEX 4
        e.submit(w);
        CHECK(e.rig.violation_text().empty());
        REQUIRE(dispatches.size() == 1);
        const auto& d = dispatches[0];
        CHECK(d.program == code);
        CHECK(d.grid == std::array<uint32_t, 3>{8, 4, 2});
        CHECK(d.block == std::array<uint32_t, 3>{64, 2, 1});
        CHECK(d.sgpr_pair(0) == kernarg);
        CHECK(e.rig.model->compute_queue(0, 0).dispatches == 1);
    }

    SECTION("INDIRECT_BUFFER runs the IB's packets, and a wait inside it resumes in the IB") {
        std::vector<uint32_t> ib = wait_ge(kSignal + 0x100, 1);
        auto rel = release_mem(kSignal, 1, 0, 0x99);
        ib.insert(ib.end(), rel.begin(), rel.end());
        for (size_t i = 0; i < ib.size(); ++i) e.rig.vram_write32(EngineRig::leaf(kIb) + i * 4, ib[i]);
        e.submit({pkt3(kIndirectBuffer, 3), static_cast<uint32_t>(kIb), static_cast<uint32_t>(kIb >> 32),
                  static_cast<uint32_t>(ib.size()) | (1u << 23)});
        CHECK(e.rig.model->compute_queue(0, 0).waiting);
        e.set_va32(kSignal + 0x100, 1);
        e.kick();
        CHECK(e.va32(kSignal) == 0x99);
        CHECK(e.rig.model->compute_queue(0, 0).rptr == e.wptr);
        CHECK(e.rig.violations() == 0);
    }

    SECTION("WAIT_REG_MEM write-wait-write on registers: the HDP flush") {
        // nbio_4_3_0_offset.h BIF_BX_PF0_GPU_HDP_FLUSH_REQ/DONE 0x106/0x107, BASE_IDX 2 (static
        // sienna_cichlid bases = the discovery bases here); gfx_v11_0_ring_emit_hdp_flush's packet.
        const auto* nbio = e.rig.disc.find(108);
        REQUIRE(nbio != nullptr);
        const auto req = static_cast<uint32_t>(nbio->base_addresses.at(2) + 0x106), done = req + 1;
        const uint32_t flushes = e.rig.model->hdp_flushes();
        e.submit({pkt3(kWaitRegMem, 6), 3u | (1u << 6), req, done, 1u << 2, 1u << 2, 0x20});
        CHECK(e.rig.violation_text().empty());
        CHECK(e.rig.model->hdp_flushes() == flushes + 1);
        CHECK(e.rig.model->compute_queue(0, 0).rptr == e.wptr);
    }

    SECTION("packets wrap around the ring end") {
        std::vector<uint32_t> pad(kRingDwords - 3, 0);
        pad[0] = pkt3(kNop, kRingDwords - 4);  // one NOP of kRingDwords - 3 dwords
        e.submit(pad);
        e.submit(release_mem(kSignal, 1, 0, 0x1234));
        CHECK(e.va32(kSignal) == 0x1234);
        CHECK(e.va32(kRptr) == e.wptr % kRingDwords);
        CHECK(e.rig.violations() == 0);
    }
}

TEST_CASE("sim-am engines: malformed PM4, bad activation and page faults hang the queue", "[sim-am][engines]") {
    TempDir dir;
    EngineRig e(dir.path);
    e.enable_mec();

    SECTION("an unknown opcode") {
        e.activate();
        e.submit({pkt3(0x99, 1), 0});
        CHECK(e.rig.has_violation("unknown PM4 opcode 0x99"));
        CHECK(e.rig.model->compute_queue(0, 0).hung);
        e.submit(release_mem(kSignal, 1, 0, 1));  // a hung queue executes nothing
        CHECK(e.va32(kSignal) == 0);
    }
    SECTION("a count that does not match the opcode's size") {
        e.activate();
        std::vector<uint32_t> w = release_mem(kSignal, 1, 0, 1);
        w[0] = pkt3(kReleaseMem, 6);
        w.pop_back();
        e.submit(w);
        CHECK(e.rig.has_violation("it takes 7"));
        CHECK(e.rig.model->compute_queue(0, 0).hung);
        CHECK(e.va32(kSignal) == 0);
    }
    SECTION("a type-2 packet; a misaligned RELEASE_MEM address on a second queue") {
        e.activate();
        e.submit({0x80000000u});
        CHECK(e.rig.has_violation("type-2 packet"));
        e.rig.bus->clear_violations();
        e.activate(1, kRing + 0x1000, kEop, 4);  // a second queue; the first is hung
        // (its ring is at +4 KiB; the test's submit() writes queue 0's ring, so write directly)
        auto w = release_mem(kSignal + 2, 1, 0, 1);
        for (size_t i = 0; i < w.size(); ++i) e.rig.vram_write32(EngineRig::leaf(kRing + 0x1000) + i * 4, w[i]);
        e.set_va64(kWptr, w.size());
        e.doorbell(4, w.size());
        CHECK(e.rig.has_violation("is not 4-byte aligned"));
        CHECK(e.rig.model->compute_queue(0, 1).hung);
    }
    SECTION("WAIT_REG_MEM64 on an address that is not 8-byte aligned; a wrong count") {
        e.activate();
        e.submit(wait64(kSignal + 4, 5, 1));
        CHECK(e.rig.has_violation("WAIT_REG_MEM64 address"));
        CHECK(e.rig.has_violation("is not 8-byte aligned"));
        CHECK(e.rig.model->compute_queue(0, 0).hung);
        e.rig.bus->clear_violations();
        e.activate(1, kRing + 0x1000, kEop, 4);
        auto w = wait64(kSignal, 5, 0);
        w[0] = pkt3(kWaitRegMem64, 7);  // count 6: one payload dword short
        w.pop_back();
        for (size_t i = 0; i < w.size(); ++i) e.rig.vram_write32(EngineRig::leaf(kRing + 0x1000) + i * 4, w[i]);
        e.set_va64(kWptr, w.size());
        e.doorbell(4, w.size());
        CHECK(e.rig.has_violation("it takes 8"));
        CHECK(e.rig.model->compute_queue(0, 1).hung);
    }
    SECTION("a packet crossing the write pointer") {
        e.activate();
        auto w = release_mem(kSignal, 1, 0, 1);
        w.resize(3);
        e.submit(w);
        CHECK(e.rig.has_violation("crosses the write pointer"));
        CHECK(e.rig.model->compute_queue(0, 0).hung);
    }
    SECTION("a doorbell that disagrees with WPTR_POLL") {
        e.activate();
        e.submit(release_mem(kSignal, 1, 0, 1), /*ring_doorbell=*/false);
        e.doorbell(3, e.wptr + 1);
        CHECK(e.rig.has_violation("must be written before the doorbell"));
        CHECK(e.va32(kSignal) == 0);
    }
    SECTION("an unmapped ring: a GC page fault through the IH, the queue hangs") {
        const uint64_t unmapped = kVa + (1ull << 30);
        e.activate(0, unmapped);
        REQUIRE(e.rig.violations() == 0);
        e.set_va64(kWptr, 2);
        e.doorbell(3, 2);
        CHECK(e.rig.model->compute_queue(0, 0).hung);
        REQUIRE(e.ih_wptr() == 32);
        const uint32_t dw0 = e.rig.vram32(kIhRing);
        CHECK((dw0 & 0xff) == 10);         // SOC21_IH_CLIENTID_GFX
        CHECK(((dw0 >> 8) & 0xff) == 0);  // UTCL2 fault
        CHECK(e.rig.rd(e.rig.r.gc_fault_addr_lo) == static_cast<uint32_t>(unmapped >> 12));
    }
    SECTION("activation without an EOP buffer, with the MEC halted, twice") {
        e.activate(0, kRing, /*eop=*/0);
        CHECK(e.rig.has_violation("no EOP buffer"));
        CHECK_FALSE(e.rig.model->compute_queue(0, 0).active);
        e.rig.bus->clear_violations();
        e.rig.wr(e.gc1 + 0x2904, (1u << 26) | (1u << 30));  // MEC_HALT
        e.activate();
        CHECK(e.rig.has_violation("the MEC is halted"));
        e.rig.bus->clear_violations();
        e.enable_mec();
        e.activate();
        CHECK(e.rig.violations() == 0);
        e.activate();
        CHECK(e.rig.has_violation("already active"));
        // CP_HQD_DEQUEUE_REQUEST removes it; it can then be activated again.
        e.rig.bus->clear_violations();
        e.rig.wr(e.gc1 + 0x0900, 1u << 2);
        e.rig.wr(e.hqd(0x1fc1), 2);
        CHECK_FALSE(e.rig.model->compute_queue(0, 0).active);
        CHECK(e.rig.rd(e.hqd(0x1fab)) == 0);
        e.activate();
        CHECK(e.rig.violations() == 0);
        CHECK(e.rig.model->compute_queue(0, 0).active);
    }
}

namespace {

// SDMA0 queue 0's registers (BASE_IDX 0 of GC) that differ between SDMA 6 and SDMA 7:
// gc_11_0_0_offset.h and gc_12_0_0_offset.h (block gc_gfx_cpwd_sdma0_sdmadec) regSDMA0_QUEUE0_*.
// RB_CNTL 0x80, RB_BASE/_HI 0x81/0x82, RB_RPTR/_HI 0x83/0x84, RB_WPTR/_HI 0x85/0x86 are common.
struct SdmaQueueRegs {
    uint32_t rptr_addr_lo, rptr_addr_hi, ib_cntl, doorbell, doorbell_offset, wptr_poll_lo, wptr_poll_hi, minor_ptr_update;
};
constexpr SdmaQueueRegs kSdma6{0x89, 0x88, 0x8a, 0x92, 0xab, 0xb3, 0xb2, 0xb5};
constexpr SdmaQueueRegs kSdma7{0x87, 0x88, 0x89, 0x8f, 0x91, 0x98, 0x99, 0x9b};

// SDMA0 queue 0 (sdma_v6_0.c / sdma_v7_0.c / tinygrad AM_SDMA order), doorbell slot 0x100. The fields are
// the same in both sh_mask headers: RB_CNTL RB_ENABLE 0 / RB_SIZE 5:1 / RPTR_WRITEBACK_ENABLE 12,
// DOORBELL.ENABLE 28, DOORBELL_OFFSET.OFFSET 27:2.
struct SdmaRig : EngineRig {
    explicit SdmaRig(const std::filesystem::path& dir, Asic asic = Asic::navi31) : EngineRig(dir, asic) {
        const SdmaQueueRegs& o = gfx12 ? kSdma7 : kSdma6;
        auto q = [&](uint32_t off) { return gc0 + off; };
        rig.wr(q(o.minor_ptr_update), 1);
        rig.wr(q(0x83), 0), rig.wr(q(0x84), 0), rig.wr(q(0x85), 0), rig.wr(q(0x86), 0);
        rig.wr(q(0x81), static_cast<uint32_t>(kSdmaRing >> 8));
        rig.wr(q(0x82), static_cast<uint32_t>(kSdmaRing >> 40));
        rig.wr(q(o.rptr_addr_lo), static_cast<uint32_t>(kSdmaRptr));
        rig.wr(q(o.rptr_addr_hi), static_cast<uint32_t>(kSdmaRptr >> 32));
        rig.wr(q(o.wptr_poll_lo), static_cast<uint32_t>(kSdmaWptr));
        rig.wr(q(o.wptr_poll_hi), static_cast<uint32_t>(kSdmaWptr >> 32));
        rig.wr(q(o.doorbell_offset), (0x100u * 2) << 2);  // DOORBELL_OFFSET.OFFSET (dwords)
        rig.wr(q(o.doorbell), 1u << 28);                  // DOORBELL.ENABLE
        rig.wr(q(o.minor_ptr_update), 0);
        // RB_ENABLE, RB_SIZE log2(1024 dwords), F32/MCU_WPTR_POLL_ENABLE, RPTR_WRITEBACK_ENABLE, RB_PRIV.
        rig.wr(q(0x80), 1u | (10u << 1) | (1u << 11) | (1u << 12) | (1u << 23));
        rig.wr(q(o.ib_cntl), 1);                         // IB_CNTL.IB_ENABLE
    }
    void sdma_submit(const std::vector<uint32_t>& words) {
        for (uint32_t w : words) {
            rig.vram_write32(leaf(kSdmaRing) + (swptr % 4096), w);
            swptr += 4;
        }
        set_va64(kSdmaWptr, swptr);
        doorbell(0x100, swptr);
    }
    uint64_t swptr = 0;  // bytes
};

std::vector<uint32_t> sdma_copy(uint64_t src, uint64_t dst, uint32_t bytes) {
    return {1u, bytes - 1, 0, static_cast<uint32_t>(src), static_cast<uint32_t>(src >> 32), static_cast<uint32_t>(dst),
            static_cast<uint32_t>(dst >> 32)};
}
std::vector<uint32_t> sdma_fence(uint64_t va, uint32_t v) {
    return {5u | (3u << 16), static_cast<uint32_t>(va), static_cast<uint32_t>(va >> 32), v};
}

}  // namespace

TEST_CASE("sim-am engines: SDMA copies, fences, polls and refuses a packet straddling the ring end", "[sim-am][engines]") {
    TempDir dir;
    SdmaRig s(dir.path);
    REQUIRE(s.rig.violations() == 0);
    REQUIRE(s.rig.model->sdma_queue().active);

    SECTION("COPY_LINEAR across the 2 MiB leaf's end and scattered 4 KiB pages, then FENCE and TIMESTAMP") {
        const uint64_t src = kPagesVa - 0x1800, dst = kPagesVa + 0x8123;
        const uint32_t bytes = 0x4000 + 7;
        std::vector<std::byte> pattern(bytes);
        for (size_t i = 0; i < bytes; ++i) pattern[i] = static_cast<std::byte>((i * 131 + 7) & 0xff);
        REQUIRE(s.rig.model->gpu_write(src, pattern));
        auto w = sdma_copy(src, dst, bytes);
        auto f = sdma_fence(kSignal, 0xfeed);
        w.insert(w.end(), f.begin(), f.end());
        w.insert(w.end(), {13u | (2u << 8), static_cast<uint32_t>(kSignal + 8), static_cast<uint32_t>((kSignal + 8) >> 32)});
        s.sdma_submit(w);
        CHECK(s.rig.violation_text().empty());
        std::vector<std::byte> out(bytes);
        REQUIRE(s.rig.model->gpu_read(dst, out));
        CHECK(out == pattern);
        CHECK(s.rig.vram32(kPagesVram + 31 * 0x1000) == s.va32(kPagesVa));  // page 0 is the last VRAM page
        CHECK(s.va32(kSignal) == 0xfeed);
        CHECK(s.va64(kSignal + 8) >= 500000);
        CHECK(s.va64(kSdmaRptr) == s.swptr);
        CHECK(s.rig.model->sdma_queue().bytes_copied == bytes);
    }

    SECTION("WRITE, POLL_REGMEM blocking then resuming, INDIRECT") {
        std::vector<uint32_t> w = {2u, static_cast<uint32_t>(kSignal + 0x20), static_cast<uint32_t>((kSignal + 0x20) >> 32), 1,
                                   0x1111, 0x2222};
        // POLL_REGMEM FUNC 3 (==) MEM_POLL, value 9, mask, interval 4 | retry 0xfff << 16.
        w.insert(w.end(), {8u | (3u << 28) | (1u << 31), static_cast<uint32_t>(kSignal + 0x40),
                           static_cast<uint32_t>((kSignal + 0x40) >> 32), 9, 0xffffffffu, 4u | (0xfffu << 16)});
        auto f = sdma_fence(kSignal, 0xabc);
        w.insert(w.end(), f.begin(), f.end());
        s.sdma_submit(w);
        CHECK(s.va32(kSignal + 0x20) == 0x1111);
        CHECK(s.va32(kSignal + 0x24) == 0x2222);
        CHECK(s.rig.model->sdma_queue().waiting);
        CHECK(s.va32(kSignal) == 0);
        s.set_va32(kSignal + 0x40, 9);
        s.doorbell(0x100, s.swptr);
        CHECK(s.va32(kSignal) == 0xabc);
        // An IB with a fence (32-byte aligned base, VMID 0).
        auto ib = sdma_fence(kSignal + 0x60, 0x600d);
        for (size_t i = 0; i < ib.size(); ++i) s.rig.vram_write32(EngineRig::leaf(kIb) + i * 4, ib[i]);
        s.sdma_submit({4u, static_cast<uint32_t>(kIb), static_cast<uint32_t>(kIb >> 32), static_cast<uint32_t>(ib.size()), 0, 0});
        CHECK(s.va32(kSignal + 0x60) == 0x600d);
        CHECK(s.va64(kSdmaRptr) == s.swptr);
        CHECK(s.rig.violations() == 0);
    }

    SECTION("a packet straddling the ring end") {
        std::vector<uint32_t> pad(1022, 0);
        pad[0] = 0u | ((1022u - 1) << 16);  // NOP with count = dwords that follow
        s.sdma_submit(pad);
        REQUIRE(s.rig.violations() == 0);
        s.sdma_submit(sdma_fence(kSignal, 1));  // dwords 1022, 1023, 0, 1
        CHECK(s.rig.has_violation("does not fit"));
        CHECK(s.rig.model->sdma_queue().hung);
        CHECK(s.va32(kSignal) == 0);
    }

    SECTION("an unknown SDMA opcode") {
        s.sdma_submit({0x3f});
        CHECK(s.rig.has_violation("unknown SDMA opcode"));
        CHECK(s.rig.model->sdma_queue().hung);
    }
    SECTION("a copy from an unmapped VA faults through the IH and hangs the queue") {
        s.sdma_submit(sdma_copy(kVa + (1ull << 30), kSignal, 64));
        CHECK(s.rig.model->sdma_queue().hung);
        CHECK(s.ih_wptr() == 32);
    }
}

TEST_CASE("sim-am engines: SDMA ring enable is refused without a doorbell or a wptr poll address", "[sim-am][engines]") {
    TempDir dir;
    EngineRig e(dir.path);
    const uint32_t q = e.gc0;
    e.rig.wr(q + 0x81, static_cast<uint32_t>(kSdmaRing >> 8));
    e.rig.wr(q + 0x82, static_cast<uint32_t>(kSdmaRing >> 40));
    e.rig.wr(q + 0x89, static_cast<uint32_t>(kSdmaRptr));
    e.rig.wr(q + 0x88, static_cast<uint32_t>(kSdmaRptr >> 32));
    e.rig.wr(q + 0xab, (0x100u * 2) << 2);
    e.rig.wr(q + 0x80, 1u | (10u << 1) | (1u << 23));  // DOORBELL.ENABLE still clear
    CHECK(e.rig.has_violation("SDMA0_QUEUE0_DOORBELL.ENABLE is clear"));
    CHECK_FALSE(e.rig.model->sdma_queue().active);
    e.rig.bus->clear_violations();
    e.rig.wr(q + 0x80, 0);
    e.rig.wr(q + 0x92, 1u << 28);
    e.rig.wr(q + 0x80, 1u | (10u << 1) | (1u << 23));  // no RB_WPTR_POLL_ADDR
    CHECK(e.rig.has_violation("RB_WPTR_POLL_ADDR"));
    CHECK_FALSE(e.rig.model->sdma_queue().active);
    // A BAR2 write at the slot of no queue is accepted and ignored.
    e.rig.bus->clear_violations();
    e.doorbell(0x100, 8);
    CHECK(e.rig.violations() == 0);
}

// ---- dispatches executed as host code (drivers/hostcode/host_program.h) ----

namespace {

// Inside the leaf: the host-program descriptor (256-byte aligned), the code object, the kernargs.
constexpr uint64_t kProgram = kVa + 0xA0000, kImage = kVa + 0xB0000, kKernarg = kVa + 0xF0000;
// The buffers live in the 32 scattered 4 KiB pages, so each spans pages that are not consecutive
// in VRAM: the host mirror must map every page where the page table says.
constexpr uint64_t kA = kPagesVa, kB = kPagesVa + 0x4000, kC = kPagesVa + 0x8100;
constexpr uint32_t kN = 3000, kK = 7;
constexpr std::array<uint32_t, 3> kGrid{8, 3, 2}, kBlock{16, 4, 1};  // 48 groups x 64 = 3072 >= kN

struct ExecRig : EngineRig {
    explicit ExecRig(const std::filesystem::path& dir, Asic asic = Asic::navi31) : EngineRig(dir, asic) {
        auto object = baregpu::sim_test_kernels::find_object("vadd.o");
        REQUIRE(!object.empty());
        image.assign(object.begin(), object.end());
        rig.vram_write(leaf(kImage), image);
        write_program();
        std::vector<uint32_t> a(kN), b(kN);
        for (uint32_t i = 0; i < kN; ++i) {
            a[i] = i * 3 + 1;
            b[i] = 0x10000 * (i % 7) + i;
        }
        REQUIRE(rig.model->gpu_write(kA, std::as_bytes(std::span(a))));
        REQUIRE(rig.model->gpu_write(kB, std::as_bytes(std::span(b))));
        // c, and the word after it, start as a sentinel the kernel must not leave.
        std::vector<uint32_t> c(kN + 1, 0xdeadbeef);
        REQUIRE(rig.model->gpu_write(kC, std::as_bytes(std::span(c))));
        write_kernargs(kA, kB, kC, kK);
        enable_mec();
        activate();
        REQUIRE(rig.violations() == 0);
    }
    void write_program(uint32_t magic = BAREGPU_HOST_PROGRAM_MAGIC, uint32_t kernarg_size = 32) {
        baregpu_host_program p{};
        p.magic = magic;
        p.version = BAREGPU_HOST_PROGRAM_VERSION;
        p.image_va = kImage;
        p.image_size = image.size();
        p.image_hash = baregpu_host_program_hash(image.data(), image.size());
        std::strcpy(p.kernel, "vadd");
        p.kernarg_size = kernarg_size;
        REQUIRE(rig.model->gpu_write(kProgram, std::as_bytes(std::span(&p, 1))));
    }
    void write_kernargs(uint64_t a, uint64_t b, uint64_t c, uint32_t k) {
        struct {
            uint64_t a, b, c;
            uint32_t n, k;
        } args{a, b, c, kN, k};
        static_assert(sizeof args == 32);
        REQUIRE(rig.model->gpu_write(kKernarg, std::as_bytes(std::span(&args, 1))));
    }
    // SET_SH_REG COMPUTE_PGM_LO/HI, NUM_THREAD_X/Y/Z, USER_DATA_0/1 (the kernarg VA), then
    // DISPATCH_DIRECT (gc_11_0_0_offset.h COMPUTE_* as in the hook test above).
    static std::vector<uint32_t> dispatch(std::array<uint32_t, 3> block = kBlock) {
        return {pkt3(kSetShReg, 3),       sh(0x1bac), static_cast<uint32_t>(kProgram >> 8), static_cast<uint32_t>(kProgram >> 40),
                pkt3(kSetShReg, 4),       sh(0x1ba7), block[0],  block[1], block[2],
                pkt3(kSetShReg, 3),       sh(0x1be0), static_cast<uint32_t>(kKernarg), static_cast<uint32_t>(kKernarg >> 32),
                pkt3(kDispatchDirect, 4), kGrid[0],   kGrid[1],  kGrid[2], 1u};
    }
    std::vector<uint32_t> c() {
        std::vector<uint32_t> out(kN + 1);
        REQUIRE(rig.model->gpu_read(kC, std::as_writable_bytes(std::span(out))));
        return out;
    }
    static std::vector<uint32_t> expected(uint32_t k) {
        std::vector<uint32_t> e(kN + 1);
        for (uint32_t i = 0; i < kN; ++i) e[i] = (i * 3 + 1) + (0x10000 * (i % 7) + i) + k;
        e[kN] = 0xdeadbeef;
        return e;
    }
    static std::vector<uint32_t> untouched() { return std::vector<uint32_t>(kN + 1, 0xdeadbeef); }

    // The spin kernel (a second program), dispatched with a RELEASE_MEM of 0x5e to kSignal after
    // it; returns once the kernel runs (it wrote kFlag + 8), spinning on kFlag.
    static constexpr uint64_t kSpinProgram = kProgram + 0x100, kSpinImage = kVa + 0xD0000, kSpinArgs = kKernarg + 0x100,
                              kFlag = kSignal + 0x400;
    void start_spin() {
        auto object = baregpu::sim_test_kernels::find_object("spin.o");
        REQUIRE(!object.empty());
        rig.vram_write(leaf(kSpinImage), object);
        baregpu_host_program p{};
        p.magic = BAREGPU_HOST_PROGRAM_MAGIC;
        p.version = BAREGPU_HOST_PROGRAM_VERSION;
        p.image_va = kSpinImage;
        p.image_size = object.size();
        p.image_hash = baregpu_host_program_hash(object.data(), object.size());
        std::strcpy(p.kernel, "spin");
        p.kernarg_size = 8;
        REQUIRE(rig.model->gpu_write(kSpinProgram, std::as_bytes(std::span(&p, 1))));
        set_va64(kSpinArgs, kFlag);
        std::vector<uint32_t> w = {pkt3(kSetShReg, 3), sh(0x1bac), static_cast<uint32_t>(kSpinProgram >> 8),
                                   static_cast<uint32_t>(kSpinProgram >> 40), pkt3(kSetShReg, 4), sh(0x1ba7), 1, 1, 1,
                                   pkt3(kSetShReg, 3), sh(0x1be0), static_cast<uint32_t>(kSpinArgs),
                                   static_cast<uint32_t>(kSpinArgs >> 32), pkt3(kDispatchDirect, 4), 1, 1, 1, 1u};
        auto rel = release_mem(kSignal, 1, 0, 0x5e);
        w.insert(w.end(), rel.begin(), rel.end());
        submit(w, false);
        rig.dev->bar(2).write64(BarOffset(3 * 8), wptr);
        // Until the kernel says it runs (flag[2]), read through BAR0: a fixed 50 ms was not always
        // enough for the engine thread to reach the dispatch on a loaded machine (a CI run under ASan).
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (rig.vram32(leaf(kFlag + 8)) != 1 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(100us);
        REQUIRE(rig.vram32(leaf(kFlag + 8)) == 1);
    }
    // Polls kSignal through BAR0 in real time (no doorbell, no idle wait) for up to 10 s.
    bool poll_signal(uint32_t value) {
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (rig.vram32(leaf(kSignal)) != value && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(100us);
        return rig.vram32(leaf(kSignal)) == value;
    }

    std::vector<std::byte> image;
};

std::vector<uint32_t> operator+(std::vector<uint32_t> a, const std::vector<uint32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

}  // namespace

TEST_CASE("sim-am engines: DISPATCH_DIRECT runs a host-code kernel over every workgroup", "[sim-am][engines][exec]") {
    TempDir dir;
    ExecRig e(dir.path);

    SECTION("vector add over 3 buffers on scattered pages; EOP signal and timestamps after it") {
        e.submit(release_mem(kSignal + 0x200, 3, 0, 0) + ExecRig::dispatch() + release_mem(kSignal + 0x208, 3, 0, 0) +
                 release_mem(kSignal, 1, 2, 0x5151, 0x77));
        CHECK(e.rig.violation_text().empty());
        CHECK(e.c() == ExecRig::expected(kK));
        CHECK(e.va32(kSignal) == 0x5151);
        const uint64_t before = e.va64(kSignal + 0x200), after = e.va64(kSignal + 0x208);
        CHECK(before >= 500000);
        CHECK(after > before);  // the kernel's host time is charged to the modelled clock
        CHECK(e.rig.model->compute_queue(0, 0).dispatches == 1);
        CHECK(e.rig.model->compute_queue(0, 0).rptr == e.wptr);
        CHECK(e.ih_wptr() == 32);  // the EOP interrupt, nothing else

        // Again with other kernargs (the cached image): the new sum replaces the old one.
        e.write_kernargs(kA, kB, kC, 1000);
        e.submit(ExecRig::dispatch() + release_mem(kSignal, 1, 0, 0x5252));
        CHECK(e.c() == ExecRig::expected(1000));
        CHECK(e.va32(kSignal) == 0x5252);
        CHECK(e.rig.model->compute_queue(0, 0).dispatches == 2);
        CHECK(e.rig.violations() == 0);
    }

    SECTION("a WAIT_REG_MEM on a word the host sets later resolves on the engine thread, without a doorbell") {
        e.submit(wait_ge(kSignal + 0x100, 1) + ExecRig::dispatch() + release_mem(kSignal, 1, 0, 0x600d), false);
        const auto t0 = std::chrono::steady_clock::now();
        e.rig.dev->bar(2).write64(BarOffset(3 * 8), e.wptr);  // returns at once: the engines are asynchronous
        CHECK(std::chrono::steady_clock::now() - t0 < 1s);
        std::this_thread::sleep_for(20ms);
        CHECK(e.rig.vram32(EngineRig::leaf(kSignal)) == 0);
        CHECK(e.c() == ExecRig::untouched());
        CHECK(e.rig.model->compute_queue(0, 0).waiting);
        // The host CPU writes the word through BAR0; no doorbell follows.
        e.rig.vram_write32(EngineRig::leaf(kSignal + 0x100), 1);
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (e.rig.vram32(EngineRig::leaf(kSignal)) != 0x600d && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(100us);
        CHECK(e.rig.vram32(EngineRig::leaf(kSignal)) == 0x600d);
        CHECK(e.c() == ExecRig::expected(kK));
        REQUIRE(e.rig.model->wait_engines_idle());
        CHECK(e.rig.model->compute_queue(0, 0).rptr == e.wptr);
        CHECK(e.rig.violations() == 0);
    }

    SECTION("a doorbell does not wait behind a running kernel; the host releases the kernel through BAR0") {
        e.start_spin();
        CHECK(e.rig.vram32(EngineRig::leaf(kSignal)) == 0);
        const auto t0 = std::chrono::steady_clock::now();
        e.rig.dev->bar(2).write64(BarOffset(3 * 8), e.wptr);  // again, while the kernel runs
        CHECK(std::chrono::steady_clock::now() - t0 < 1s);     // blocked, it would wait for the kernel (seconds)
        // Nor do register reads and status calls: the model's lock is not held while kernels run.
        const auto t1 = std::chrono::steady_clock::now();
        CHECK(e.rig.rd(e.hqd(0x1fab)) == 1);  // CP_HQD_ACTIVE
        const auto status = e.rig.model->compute_queue(0, 0);
        CHECK(std::chrono::steady_clock::now() - t1 < 1s);
        CHECK(status.active);
        CHECK(status.rptr == 13);  // on the DISPATCH_DIRECT, after the three SET_SH_REG
        CHECK(e.rig.vram32(EngineRig::leaf(kSignal)) == 0);
        e.rig.vram_write32(EngineRig::leaf(ExecRig::kFlag), 5);  // the host releases the kernel
        CHECK(e.poll_signal(0x5e));
        CHECK(e.rig.vram32(EngineRig::leaf(ExecRig::kFlag + 4)) == 6);
        REQUIRE(e.rig.model->wait_engines_idle());
        CHECK(e.rig.model->compute_queue(0, 0).rptr == e.wptr);
        CHECK(e.rig.violations() == 0);
    }

    SECTION("a dequeue while a kernel runs: CP_HQD_ACTIVE stays 1 until the kernel ends, then the queue goes") {
        e.start_spin();
        e.rig.wr(e.gc1 + 0x0900, 1u << 2);  // GRBM_GFX_CNTL: ME 1 pipe 0 queue 0
        e.rig.wr(e.hqd(0x1fc1), 1);         // CP_HQD_DEQUEUE_REQUEST: drain
        CHECK(e.rig.rd(e.hqd(0x1fab)) == 1);
        CHECK(e.rig.model->compute_queue(0, 0).active);
        e.rig.vram_write32(EngineRig::leaf(ExecRig::kFlag), 5);
        REQUIRE(e.rig.model->wait_engines_idle());
        CHECK(e.rig.vram32(EngineRig::leaf(ExecRig::kFlag + 4)) == 6);  // the kernel finished
        CHECK(e.rig.rd(e.hqd(0x1fab)) == 0);
        CHECK_FALSE(e.rig.model->compute_queue(0, 0).active);
        CHECK(e.va32(kSignal) == 0);  // the RELEASE_MEM after it never ran
        CHECK(e.rig.violations() == 0);
        e.activate();  // the slot can be used again
        CHECK(e.rig.violations() == 0);
        CHECK(e.rig.model->compute_queue(0, 0).active);
    }

    SECTION("inject_dispatch_hang holds the queue on the dispatch until cleared; the doorbell does not wait") {
        const std::vector<uint32_t> before = release_mem(kSignal + 8, 1, 0, 0x11);
        e.rig.model->inject_dispatch_hang(true);
        e.submit(before + ExecRig::dispatch() + release_mem(kSignal, 1, 0, 0x22));
        // The three SET_SH_REG packets (4 + 5 + 4 dwords) ran; the DISPATCH_DIRECT did not retire.
        const uint64_t dispatch_at = before.size() + 13;
        auto q = e.rig.model->compute_queue(0, 0);
        CHECK(e.va32(kSignal + 8) == 0x11);
        CHECK(q.rptr == dispatch_at);
        CHECK(e.va32(kRptr) == dispatch_at);  // the rptr report too
        CHECK(q.waiting);
        CHECK_FALSE(q.hung);
        CHECK(q.dispatches == 0);
        CHECK(e.va32(kSignal) == 0);
        CHECK(e.c() == ExecRig::untouched());
        // A doorbell while the dispatch is held returns at once.
        const auto t0 = std::chrono::steady_clock::now();
        e.kick();
        CHECK(std::chrono::steady_clock::now() - t0 < 1s);
        CHECK(e.rig.model->compute_queue(0, 0).rptr == q.rptr);
        e.rig.model->inject_dispatch_hang(false);
        REQUIRE(e.rig.model->wait_engines_idle());
        CHECK(e.va32(kSignal) == 0x22);
        CHECK(e.c() == ExecRig::expected(kK));
        CHECK(e.rig.model->compute_queue(0, 0).rptr == e.wptr);
        CHECK(e.rig.violations() == 0);
    }
}

TEST_CASE("sim-am engines: host-code dispatch faults and refusals hang the queue and run nothing", "[sim-am][engines][exec]") {
    TempDir dir;
    ExecRig e(dir.path);
    auto no_run = [&] {
        CHECK(e.rig.model->compute_queue(0, 0).hung);
        CHECK(e.rig.model->compute_queue(0, 0).dispatches == 0);
        CHECK(e.va32(kSignal) == 0);  // nothing after the dispatch ran
        CHECK(e.c() == ExecRig::untouched());
    };

    SECTION("an unmapped buffer pointer is a GC page fault: IH entry with the address, latched status") {
        const uint64_t unmapped = kVa + (1ull << 30) + 0x3000;
        e.write_kernargs(kA, unmapped, kC, kK);
        e.submit(ExecRig::dispatch() + release_mem(kSignal, 1, 0, 1));
        no_run();
        CHECK(e.rig.violations() == 0);  // a fault, not a protocol violation
        REQUIRE(e.ih_wptr() == 32);
        const uint32_t dw0 = e.rig.vram32(kIhRing);
        CHECK((dw0 & 0xff) == 10);         // SOC21_IH_CLIENTID_GFX
        CHECK(((dw0 >> 8) & 0xff) == 0);  // UTCL2 fault
        // src_data[0..1] = address >> 12, bits 44-47 (gmc_v11_0_process_interrupt).
        CHECK(e.rig.vram32(kIhRing + 16) == static_cast<uint32_t>(unmapped >> 12));
        CHECK(e.rig.vram32(kIhRing + 20) == static_cast<uint32_t>((unmapped >> 44) & 0xf));
        CHECK(e.rig.rd(e.rig.r.gc_fault_addr_lo) == static_cast<uint32_t>(unmapped >> 12));
        CHECK(e.rig.rd(e.rig.r.gc_fault_status) != 0);
    }
    SECTION("a buffer in system memory is a page fault too: the host mirror covers VRAM only") {
        // PTB entry 32 (right after the 32 VRAM pages): a valid, readable, writeable page with
        // AMDGPU_PTE_SYSTEM (bit 1, amdgpu_vm.h) at bus address 0x100000.
        const uint64_t ptb = (48u << 20) + 0x3000, system_va = kPagesVa + 32 * 0x1000;
        e.put64(ptb + 32 * 8, 0x100000 | 1 | 2 | (1 << 5) | (1 << 6));
        e.write_kernargs(kA, kB, system_va, kK);
        e.submit(ExecRig::dispatch() + release_mem(kSignal, 1, 0, 1));
        no_run();
        REQUIRE(e.ih_wptr() == 32);
        CHECK(e.rig.vram32(kIhRing + 16) == static_cast<uint32_t>(system_va >> 12));
        CHECK(e.rig.rd(e.rig.r.gc_fault_addr_lo) == static_cast<uint32_t>(system_va >> 12));
    }
    SECTION("a program without the host-program magic is the chip's machine code: not launched as wave64") {
        e.write_program(0x12345678);
        e.submit(ExecRig::dispatch() + release_mem(kSignal, 1, 0, 1));
        CHECK(e.rig.has_violation("CS_W32_EN"));
        no_run();
    }
    SECTION("an unmapped program is a page fault") {
        const uint64_t unmapped = kVa + (1ull << 30);
        auto w = ExecRig::dispatch();
        w[2] = static_cast<uint32_t>(unmapped >> 8);
        w[3] = static_cast<uint32_t>(unmapped >> 40);
        e.submit(w + release_mem(kSignal, 1, 0, 1));
        CHECK(e.ih_wptr() == 32);
        CHECK(e.rig.rd(e.rig.r.gc_fault_addr_lo) == static_cast<uint32_t>(unmapped >> 12));
        no_run();
    }
    SECTION("a kernarg_size that differs from the kernel's") {
        e.write_program(BAREGPU_HOST_PROGRAM_MAGIC, 24);
        e.submit(ExecRig::dispatch() + release_mem(kSignal, 1, 0, 1));
        CHECK(e.rig.has_violation("kernarg_size 24"));
        no_run();
    }
    SECTION("more threads per workgroup than the kernel's max_threads") {
        e.submit(ExecRig::dispatch({32, 16, 1}) + release_mem(kSignal, 1, 0, 1));
        CHECK(e.rig.has_violation("exceeds kernel 'vadd''s max_threads 256"));
        no_run();
    }
    SECTION("an image whose hash does not match") {
        e.image[e.image.size() / 2] ^= std::byte{1};  // the descriptor's hash, the VRAM bytes unchanged
        e.write_program();
        e.submit(ExecRig::dispatch() + release_mem(kSignal, 1, 0, 1));
        CHECK(e.rig.has_violation("does not match the FNV-1a 64"));
        no_run();
    }
}

// ---- Navi48: GC 12's MEC and SDMA 7, with the offsets of gc_12_0_0_offset.h ----

TEST_CASE("sim-am engines (navi48): a GC 12 compute queue runs RELEASE_MEM and a host-code dispatch", "[sim-am][engines][navi48]") {
    TempDir dir;
    ExecRig e(dir.path, Asic::navi48);  // CP_MEC_RS64_CNTL, GRBM_GFX_CNTL, CP_HQD_*, ACTIVE: no violation
    REQUIRE(e.rig.model->compute_queue(0, 0).active);

    e.submit(release_mem(kSignal + 8, 2, 0, 0xaabbccdd00112233ull) + release_mem(kSignal + 0x200, 3, 0, 0) +
             ExecRig::dispatch() + release_mem(kSignal, 1, 2, 0x4848, 0x12));
    CHECK(e.rig.violation_text().empty());
    CHECK(e.va64(kSignal + 8) == 0xaabbccdd00112233ull);
    CHECK(e.va64(kSignal + 0x200) >= 500000);  // the 100 MHz clock after >= 5 ms
    CHECK(e.c() == ExecRig::expected(kK));     // vadd over the scattered pages (GFX12 leaf bit)
    CHECK(e.va32(kSignal) == 0x4848);
    CHECK(e.va32(kRptr) == e.wptr);
    CHECK(e.rig.model->compute_queue(0, 0).dispatches == 1);
    CHECK(e.rig.model->compute_queue(0, 0).rptr == e.wptr);
    // The EOP interrupt: client GFX 10, source CP_EOP 181, ring_id ME 1, ctx id.
    REQUIRE(e.ih_wptr() == 32);
    const uint32_t dw0 = e.rig.vram32(kIhRing);
    CHECK((dw0 & 0xff) == 10);
    CHECK(((dw0 >> 8) & 0xff) == 181);
    CHECK(e.rig.vram32(kIhRing + 16) == 0x12);

    // CP_HQD_DEQUEUE_REQUEST (GC 12 0x1fc1) takes it down again.
    e.rig.wr(e.gc1 + 0x0900, 1u << 2);
    e.rig.wr(e.hqd(0x1fc1), 2);
    e.rig.wr(e.gc1 + 0x0900, 0);
    CHECK_FALSE(e.rig.model->compute_queue(0, 0).active);
    CHECK(e.rig.violations() == 0);
}

TEST_CASE("sim-am engines (navi48): SDMA 7 queue 0 copies and fences from its own register block", "[sim-am][engines][navi48]") {
    TempDir dir;
    SECTION("copy across scattered pages, FENCE, TIMESTAMP, rptr write-back") {
        SdmaRig s(dir.path, Asic::navi48);
        REQUIRE(s.rig.violations() == 0);
        REQUIRE(s.rig.model->sdma_queue().active);
        const uint64_t src = kPagesVa + 0x0200, dst = kPagesVa + 0x9321;
        const uint32_t bytes = 0x3000 + 5;
        std::vector<std::byte> pattern(bytes);
        for (size_t i = 0; i < bytes; ++i) pattern[i] = static_cast<std::byte>((i * 37 + 11) & 0xff);
        REQUIRE(s.rig.model->gpu_write(src, pattern));
        auto w = sdma_copy(src, dst, bytes);
        auto f = sdma_fence(kSignal, 0x7e7e);
        w.insert(w.end(), f.begin(), f.end());
        w.insert(w.end(), {13u | (2u << 8), static_cast<uint32_t>(kSignal + 8), static_cast<uint32_t>((kSignal + 8) >> 32)});
        s.sdma_submit(w);
        CHECK(s.rig.violation_text().empty());
        std::vector<std::byte> out(bytes);
        REQUIRE(s.rig.model->gpu_read(dst, out));
        CHECK(out == pattern);
        CHECK(s.va32(kSignal) == 0x7e7e);
        CHECK(s.va64(kSignal + 8) >= 500000);
        CHECK(s.va64(kSdmaRptr) == s.swptr);  // RB_RPTR_ADDR_LO/HI at 0x87/0x88
        CHECK(s.rig.model->sdma_queue().bytes_copied == bytes);
    }
    SECTION("SDMA 6's register offsets do not program SDMA 7: the doorbell stays disabled") {
        EngineRig e(dir.path, Asic::navi48);
        const uint32_t q = e.gc0;
        e.rig.wr(q + 0x81, static_cast<uint32_t>(kSdmaRing >> 8));
        e.rig.wr(q + 0x82, static_cast<uint32_t>(kSdmaRing >> 40));
        e.rig.wr(q + kSdma6.rptr_addr_lo, static_cast<uint32_t>(kSdmaRptr));
        e.rig.wr(q + kSdma6.rptr_addr_hi, static_cast<uint32_t>(kSdmaRptr >> 32));
        e.rig.wr(q + kSdma6.wptr_poll_lo, static_cast<uint32_t>(kSdmaWptr));
        e.rig.wr(q + kSdma6.wptr_poll_hi, static_cast<uint32_t>(kSdmaWptr >> 32));
        e.rig.wr(q + kSdma6.doorbell_offset, (0x100u * 2) << 2);
        e.rig.wr(q + kSdma6.doorbell, 1u << 28);
        e.rig.wr(q + 0x80, 1u | (10u << 1) | (1u << 23));
        CHECK(e.rig.has_violation("SDMA0_QUEUE0_DOORBELL.ENABLE is clear"));
        CHECK_FALSE(e.rig.model->sdma_queue().active);
    }
}

}  // namespace engines_test
