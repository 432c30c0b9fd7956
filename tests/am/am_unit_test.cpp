// drivers/am pieces that need no device: page-table math, IH decoding, PSP encodings, the ASIC
// table, boot-memory layout and register address math (direct and through the RSMU pair).
#include "base/error.hpp"
#include "drivers/am/asic.hpp"
#include "drivers/am/boot_memory.hpp"
#include "drivers/am/ih.hpp"
#include "drivers/am/mqd.hpp"
#include "drivers/am/page_table.hpp"
#include "drivers/am/psp.hpp"
#include "drivers/am/registers.hpp"
#include "firmware-loader/manifest.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <set>

namespace am_unit_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::am;

namespace {
struct FakeMemory final : PtMemory {
    std::map<uint64_t, uint64_t> words;
    std::set<uint64_t> tables;
    uint64_t next = 0x100000;
    uint64_t read64(uint64_t p) override { auto it = words.find(p); return it == words.end() ? 0 : it->second; }
    void write64(uint64_t p, uint64_t v) override { words[p] = v; }
    uint64_t alloc_table() override {
        uint64_t t = next;
        next += 0x1000;
        tables.insert(t);
        for (unsigned i = 0; i < 512; ++i) words.erase(t + 8 * i);
        return t;
    }
    void free_table(uint64_t p) override { REQUIRE(tables.erase(p) == 1); }
};

uint32_t u32_at(const std::array<std::byte, 1024>& b, size_t at) { uint32_t v; std::memcpy(&v, b.data() + at, 4); return v; }
uint32_t u32_at(const std::array<std::byte, 64>& b, size_t at) { uint32_t v; std::memcpy(&v, b.data() + at, 4); return v; }
}  // namespace

TEST_CASE("asic table: lookup by device id, GC version and name") {
    REQUIRE(find_asic_by_device_id(0x744c)->name == "navi31");
    REQUIRE(find_asic_by_device_id(0x7550)->name == "navi48");
    REQUIRE(find_asic_by_device_id(0x1234) == nullptr);
    REQUIRE(find_asic_by_gc({12, 0, 1})->name == "navi48");
    REQUIRE(find_asic_by_gc({11, 0, 3}) == nullptr);
    REQUIRE(find_asic("NAVI31")->gc_generation == 11);
    // MP0 14.0.3 sets up its TMR at boot: no SETUP_TMR (amdgpu_psp.c).
    REQUIRE(find_asic("navi31")->psp_setup_tmr);
    REQUIRE_FALSE(find_asic("navi48")->psp_setup_tmr);
    REQUIRE(find_asic("navi48")->cp.size() == 3);
}

TEST_CASE("asic table: every firmware file drivers/am loads is in firmware-loader's manifest for that ASIC") {
    for (const AsicInfo& a : asics()) {
        const fw::AsicManifest* m = fw::find_asic(a.name);
        REQUIRE(m != nullptr);
        std::vector<std::string_view> names = {a.psp_sos, a.smu, a.sdma_fw, a.imu, a.rlc};
        names.insert(names.end(), a.cp.begin(), a.cp.end());
        for (std::string_view n : names) {
            INFO(a.name << ": " << n);
            bool listed = false;
            for (const fw::FirmwareNeed& need : m->files) listed = listed || need.name == n;
            REQUIRE(listed);
        }
    }
}

TEST_CASE("page table: GC11 2 MiB leaf encoding matches the amdgpu_vm.h example") {
    // tinygrad amdev.py AMPageTableEntry: GC 11 VRAM 2 MiB leaf at PDB0 = 0x0040_0000_0020_0071 (frag 0).
    REQUIRE(encode_entry(11, 2, true, 0x200000, {}, 0) == 0x0040'0000'0020'0071ull);
    // GC12: the leaf marker is bit 63 instead of 54; PTB leaves get PTE_IS_PTE (bit 63) too.
    REQUIRE(encode_entry(12, 2, true, 0x200000, {}, 0) == 0x8000'0000'0020'0071ull);
    REQUIRE(encode_entry(12, 3, true, 0x3000, {}, 0) == 0x8000'0000'0000'3071ull);
    REQUIRE(encode_entry(11, 3, true, 0x3000, {}, 0) == 0x0000'0000'0000'3071ull);
    // Directories carry only VALID.
    REQUIRE(encode_entry(11, 1, false, 0x5000, {}, 0) == 0x5001);
    // System pages: SYSTEM | SNOOPED and MTYPE_UC at bits 48-50 (GC11) / 54-55 (GC12).
    MapFlags sys{.system = true};
    REQUIRE(encode_entry(11, 3, true, 0x1000, sys, 0) == (0x1000 | 0x77 | (3ull << 48)));
    REQUIRE(encode_entry(12, 3, true, 0x1000, sys, 0) == (0x1000 | 0x77 | (3ull << 54) | (1ull << 63)));
}

TEST_CASE("page table: leaf sizes follow alignment, index is VA - start, unmap frees tables") {
    for (unsigned gen : {11u, 12u}) {
        FakeMemory mem;
        PageTable pt(mem, 0x0, gen);
        // 1 GiB aligned in VA (relative to kVmStart) and paddr: one PDB1 leaf.
        pt.map(kVmStart + (1ull << 30), 1ull << 30, 1ull << 30);
        auto t = pt.translate(kVmStart + (1ull << 30) + 0x1234);
        REQUIRE(t);
        REQUIRE(t->page_size == (1ull << 30));
        REQUIRE(t->paddr == (1ull << 30) + 0x1234);
        // Index uses VA - start: the root slot 0, PDB1 slot 1.
        uint64_t root0 = mem.read64(0);
        REQUIRE((root0 & pte::kValid));
        uint64_t pdb1 = root0 & pte::kAddressMask;
        REQUIRE(mem.read64(pdb1 + 8) == encode_entry(gen, 1, true, 1ull << 30, {}, 18));
        // 2 MiB + 4 KiB: one 2 MiB leaf and one 4 KiB page.
        uint64_t va = kVmStart + (4ull << 20);
        pt.map(va, 0x400000, 0x201000);
        REQUIRE(pt.translate(va)->page_size == (2u << 20));
        REQUIRE(pt.translate(va + 0x200000)->page_size == 0x1000);
        REQUIRE(pt.translate(va + 0x200000)->paddr == 0x600000);
        REQUIRE_FALSE(pt.translate(va + 0x201000));
        // Overlap refused.
        REQUIRE_THROWS_WITH(pt.map(va + 0x200000, 0, 0x1000), Catch::Contains("already mapped"));
        unsigned before = pt.tables_in_use();
        pt.unmap(va, 0x201000);
        REQUIRE_FALSE(pt.translate(va));
        REQUIRE(pt.tables_in_use() < before);
        REQUIRE_THROWS_WITH(pt.unmap(va, 0x1000), Catch::Contains("not mapped"));
        pt.unmap(kVmStart + (1ull << 30), 1ull << 30);
        REQUIRE(pt.tables_in_use() == 1);  // only the root is left
        REQUIRE(mem.tables.empty());
    }
}

TEST_CASE("page table: 4 KiB pages of a contiguous, aligned run carry the fragment size (AMDGPU_PTE_FRAG)") {
    // A 64 KiB-aligned 64 KiB run: frag 4 on every page (16 pages of 4 KiB).
    for (uint64_t i = 0; i < 16; ++i) CHECK(fragment_of(0x10000 + i * 0x1000, 0x50000 + i * 0x1000, 0x10000, 0x10000) == 4);
    // 1 MiB aligned both ways: frag 8 (256 pages).
    CHECK(fragment_of(0x100000 + 0x3000, 0x700000 + 0x3000, 0x100000, 0x100000) == 8);
    // VA and PA not congruent modulo 8 KiB: no fragment.
    CHECK(fragment_of(0x2000, 0x3000, 0x2000, 0x10000) == 0);
    // The block must lie inside the range: the last page of a 12 KiB range starting 8 KiB-aligned.
    CHECK(fragment_of(0x4000, 0x4000, 0x4000, 0x3000) == 1);  // [0x4000, 0x6000) is inside
    CHECK(fragment_of(0x6000, 0x6000, 0x4000, 0x3000) == 0);  // [0x6000, 0x8000) is not
    // And the table writes it.
    FakeMemory mem;
    PageTable pt(mem, 0x0, 11);
    pt.map(kVmStart + 0x10000, 0x50000, 0x10000);
    CHECK(((pt.translate(kVmStart + 0x13000)->entry >> 7) & 0x1f) == 4);
}

TEST_CASE("IH: decode a page fault and an end-of-pipe entry (soc15_int.h)") {
    // client GFX (0x0a), src 0 (UTCL2 fault), vmid 0; fault VA 0x7_1234_5000 written
    std::array<uint32_t, 8> fault{0x0000000a, 0x11223344, 0x00000055, 0x00020007, 0x12345, 0x20 | 0x7, 0, 0};
    IhEntry e = decode_ih_entry(fault);
    REQUIRE(e.kind() == IhEntry::Kind::page_fault);
    REQUIRE(e.fault_address() == ((0x12345ull << 12) | (7ull << 44)));
    REQUIRE(e.hub() == "GC");
    REQUIRE(e.pasid == 7);
    REQUIRE(e.node_id == 2);
    REQUIRE(e.timestamp == 0x5511223344ull);
    REQUIRE_THAT(e.describe(), Catch::Contains("GC hub at GPU VA 0x700012345000"));
    PageFault pf{"GC", e.fault_address(), e.client_id, fault_status::kMappingError | fault_status::kRw | (3u << 9)};
    REQUIRE(pf.write());
    REQUIRE(pf.cid() == 3);
    REQUIRE_THAT(pf.describe(), Catch::Contains("write at GPU VA 0x700012345000"));
    REQUIRE_FALSE(PageFault{"GC", 0, 0, fault_status::kMappingError}.write());
    std::array<uint32_t, 8> eop{0x14 | (181u << 8) | (3u << 16), 0, 0, 0, 0, 0, 0, 0};
    IhEntry p = decode_ih_entry(eop);
    REQUIRE(p.kind() == IhEntry::Kind::end_of_pipe);
    REQUIRE(p.ring_id == 3);
    std::array<uint32_t, 8> vmc{0x12, 0, 0, 0, 1, 0, 0, 0};
    REQUIRE(decode_ih_entry(vmc).hub() == "MM");
}

TEST_CASE("PSP: command buffer and ring frame layouts (psp_gfx_if.h)") {
    auto c = encode_load_ip_fw(0x80'0010'0000ull, 0x1234, PspFwType::smu);
    REQUIRE(u32_at(c, 8) == 6);            // cmd_id GFX_CMD_ID_LOAD_IP_FW
    REQUIRE(u32_at(c, 28) == 0x00100000);  // fw_phy_addr_lo
    REQUIRE(u32_at(c, 32) == 0x80);        // fw_phy_addr_hi
    REQUIRE(u32_at(c, 36) == 0x1234);      // fw_size
    REQUIRE(u32_at(c, 40) == 18);          // GFX_FW_TYPE_SMU
    REQUIRE(u32_at(c, 864) == 0);          // resp.status
    auto t = encode_setup_tmr(0x80'0040'0000ull, 0x400000, 0x1300000);
    REQUIRE(u32_at(t, 8) == 5);
    REQUIRE(u32_at(t, 36) == 0x1300000);
    REQUIRE(u32_at(t, 40) == 2);  // bitfield.virt_phy_addr
    REQUIRE(u32_at(t, 44) == 0x400000);
    REQUIRE(u32_at(encode_autoload_rlc(), 8) == 33);
    REQUIRE(u32_at(encode_load_toc(0x1000, 0x200), 8) == 0x20);
    auto f = encode_frame(0x80'0020'0000ull, 0x80'0020'1000ull, 7);
    REQUIRE(u32_at(f, 0) == 0x00200000);
    REQUIRE(u32_at(f, 4) == 0x80);
    REQUIRE(u32_at(f, 8) == 1024);
    REQUIRE(u32_at(f, 12) == 0x00201000);
    REQUIRE(u32_at(f, 16) == 0x80);
    REQUIRE(u32_at(f, 20) == 7);
}

TEST_CASE("boot memory: deterministic, aligned, inside 32 MiB, TMR only where SETUP_TMR is sent") {
    BootLayout a = make_boot_layout(*find_asic("navi31"));
    BootLayout b = make_boot_layout(*find_asic("navi31"));
    REQUIRE(a.psp_ring == b.psp_ring);
    REQUIRE(a.root_pt == 0);
    REQUIRE(a.psp_msg1 % (1 << 20) == 0);
    REQUIRE(a.psp_tmr % (1 << 20) == 0);
    REQUIRE(a.has_tmr);
    for (const BootAllocation& x : a.allocations) REQUIRE(x.offset + x.size <= kBootMemorySize);
    for (size_t i = 1; i < a.allocations.size(); ++i) {
        REQUIRE(a.allocations[i].offset >= a.allocations[i - 1].offset + a.allocations[i - 1].size);
    }
    BootLayout n = make_boot_layout(*find_asic("navi48"));
    REQUIRE_FALSE(n.has_tmr);
    REQUIRE(n.smu_table < a.smu_table);
}

TEST_CASE("registers: absolute address = discovery base[BASE_IDX] + offset") {
    const RegisterTable& t = register_table(*find_asic("navi31"));
    IpBases bases;
    bases.set(HwIp::gc, {0x1260, 0xa000, 0x1c000, 0x2402c00}, 4);
    bases.set(HwIp::mp0, {0x16000, 0x243fc00}, 2);
    bases.set(HwIp::nbio, {0x0, 0x14, 0xd20, 0x10400}, 4);
    REQUIRE(bases.address(t.scratch_reg7, "x") == 0xa000 + 0x2047);
    REQUIRE(bases.address(t.cp_stat, "x") == 0x1260 + 0x0f40);
    REQUIRE(bases.address(t.psp_c2pmsg_81, "x") == 0x16000 + 0x91);
    REQUIRE(bases.address(t.rsmu_index, "x") == 0x14);
    REQUIRE(bases.address(t.rsmu_data, "x") == 0x15);
    REQUIRE_THROWS_AS(bases.address(t.smu_msg_66, "x"), ProtocolError);  // no MP1 in this table
    IpBases short_gc;
    short_gc.set(HwIp::gc, {0x1260}, 1);
    REQUIRE_THROWS_WITH(short_gc.address(t.scratch_reg7, "dev"), Catch::Contains("base 1"));
    // GC12 renames the fault status register (Linux gc_12_0_0_offset.h regGCVM_L2_PROTECTION_FAULT_STATUS_LO32).
    REQUIRE(register_table(*find_asic("navi48")).gc_hub.l2_protection_fault_status.name ==
            "GCVM_L2_PROTECTION_FAULT_STATUS_LO32");
}

TEST_CASE("registers: queue registers on both generations (gc_11_0_0_offset.h, gc_12_0_0_offset.h)") {
    // Transcribed here again from the headers: GC 12 keeps the CP registers at GC 11's offsets;
    // SDMA 7 repacked SDMA0_QUEUE0_* (all BASE_IDX 0 of GC, sdma_v7_0.c sdma_v7_0_get_reg_offset).
    struct Expect {
        const char* asic;
        uint32_t rptr_addr_lo, rptr_addr_hi, ib_cntl, doorbell, doorbell_offset, wptr_poll_lo, wptr_poll_hi, minor;
    };
    for (const Expect& e : {Expect{"navi31", 0x89, 0x88, 0x8a, 0x92, 0xab, 0xb3, 0xb2, 0xb5},
                            Expect{"navi48", 0x87, 0x88, 0x89, 0x8f, 0x91, 0x98, 0x99, 0x9b}}) {
        INFO(e.asic);
        const RegisterTable& t = register_table(*find_asic(e.asic));
        CHECK((t.grbm_gfx_cntl.base_idx == 1 && t.grbm_gfx_cntl.offset == 0x0900));
        CHECK((t.cp_mec_rs64_cntl.base_idx == 1 && t.cp_mec_rs64_cntl.offset == 0x2904));
        CHECK((t.cp_mqd_base_addr.base_idx == 0 && t.cp_mqd_base_addr.offset == 0x1fa9));
        CHECK((t.cp_hqd_active.base_idx == 0 && t.cp_hqd_active.offset == 0x1fab));
        CHECK((t.cp_hqd_dequeue_request.base_idx == 0 && t.cp_hqd_dequeue_request.offset == 0x1fc1));
        // The MQD's register block lands on the table's registers.
        CHECK(t.cp_hqd_active.offset - t.cp_mqd_base_addr.offset == mqd::dw::cp_hqd_active - mqd::dw::cp_mqd_base_addr_lo);
        CHECK(t.cp_hqd_dequeue_request.offset - t.cp_mqd_base_addr.offset ==
              mqd::dw::cp_hqd_dequeue_request - mqd::dw::cp_mqd_base_addr_lo);
        for (const RegDef* r : {&t.sdma0_queue0_rb_cntl, &t.sdma0_queue0_rb_base, &t.sdma0_queue0_rb_base_hi,
                                &t.sdma0_queue0_rb_rptr, &t.sdma0_queue0_rb_rptr_hi, &t.sdma0_queue0_rb_wptr,
                                &t.sdma0_queue0_rb_wptr_hi}) {
            CHECK((r->ip == HwIp::gc && r->base_idx == 0));
        }
        CHECK(t.sdma0_queue0_rb_cntl.offset == 0x80);
        CHECK(t.sdma0_queue0_rb_wptr_hi.offset == 0x86);
        CHECK(t.sdma0_queue0_rb_rptr_addr_lo.offset == e.rptr_addr_lo);
        CHECK(t.sdma0_queue0_rb_rptr_addr_hi.offset == e.rptr_addr_hi);
        CHECK(t.sdma0_queue0_ib_cntl.offset == e.ib_cntl);
        CHECK(t.sdma0_queue0_doorbell.offset == e.doorbell);
        CHECK(t.sdma0_queue0_doorbell_offset.offset == e.doorbell_offset);
        CHECK(t.sdma0_queue0_rb_wptr_poll_addr_lo.offset == e.wptr_poll_lo);
        CHECK(t.sdma0_queue0_rb_wptr_poll_addr_hi.offset == e.wptr_poll_hi);
        CHECK(t.sdma0_queue0_minor_ptr_update.offset == e.minor);
    }
}

}  // namespace am_unit_test
