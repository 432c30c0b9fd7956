// drivers/nv VRAM allocator and page tables. PTE/PDE words are composed here from the
// field positions of open-gpu-kernel-modules kernel-open/nvidia-uvm/hwref/turing/tu102/dev_mmu.h
// (MMU v2) and hopper/gh100/dev_mmu.h (MMU v3), re-typed below — not from the encoder's code.
#include "base/error.hpp"
#include "drivers/nv/mmu_format.hpp"
#include "drivers/nv/page_table.hpp"
#include "drivers/nv/vram_allocator.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <vector>

namespace memory_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::nv;

namespace {
constexpr uint64_t MiB = uint64_t{1} << 20, GiB = uint64_t{1} << 30;
constexpr uint64_t bits(uint64_t v, unsigned lo) { return v << lo; }

// tu102/dev_mmu.h NV_MMU_VER2_PTE: VALID 0:0, APERTURE 2:1 (VIDEO 0, SYS_COH 2, SYS_NONCOH 3), VOL 3:3,
// READ_ONLY 6:6, ADDRESS_VID (35-3):8 / ADDRESS_SYS 53:8 (>> 12), KIND 63:56.
// NV_MMU_VER2_PDE: APERTURE 2:1 (VIDEO 1, SYS_COH 2, SYS_NONCOH 3), VOL 3:3, NO_ATS 5:5, ADDRESS 53:8 (>> 12).
// NV_MMU_VER2_DUAL_PDE: APERTURE_BIG 2:1, NO_ATS 5:5, APERTURE_SMALL 66:65, VOL_SMALL 67:67,
// ADDRESS_SMALL_SYS 117:72 (>> 12).
// gh100/dev_mmu.h NV_MMU_VER3_PTE: VALID 0:0, APERTURE 2:1, PCF 7:3, KIND 11:8, ADDRESS 51:12 (in place).
// NV_MMU_VER3_PDE: APERTURE 2:1, PCF 5:3, ADDRESS 51:12. NV_MMU_VER3_DUAL_PDE: APERTURE_SMALL 66:65,
// PCF_SMALL 69:67, ADDRESS_SMALL 115:76.

struct FakeVram {
    std::map<uint64_t, uint64_t> qwords;
    std::vector<std::pair<uint32_t, uint32_t>> registers;
    PageTable::WriteVram64 writer() {
        return [this](uint64_t at, uint64_t v) {
            REQUIRE(at % 8 == 0);
            qwords[at] = v;
        };
    }
    PageTable::WriteRegister reg() {
        return [this](uint32_t at, uint32_t v) { registers.emplace_back(at, v); };
    }
    uint64_t at(uint64_t a) const {
        auto it = qwords.find(a);
        return it == qwords.end() ? 0 : it->second;
    }
};
}  // namespace

TEST_CASE("MMU v2 PTE and PDE words match tu102 dev_mmu.h", "[nv][mmu]") {
    CHECK(encode_pte(MmuVersion::v2, 0x12345000, {}) == (bits(1, 0) | bits(0x12345, 8)));
    CHECK(encode_pte(MmuVersion::v2, 0xabc000, {Aperture::sys_coherent, true, false, 0}) ==
          (bits(1, 0) | bits(2, 1) | bits(1, 3) | bits(0xabc, 8)));
    CHECK(encode_pte(MmuVersion::v2, uint64_t{1} << 50, {Aperture::sys_noncoherent, false, true, 0x06}) ==
          (bits(1, 0) | bits(3, 1) | bits(1, 6) | bits(uint64_t{1} << 38, 8) | bits(6, 56)));
    // VRAM addresses have 25 bits (35-3):8 -> 128 GiB.
    CHECK_THROWS_AS(encode_pte(MmuVersion::v2, uint64_t{1} << 37, {}), Error);
    CHECK_THROWS_AS(encode_pte(MmuVersion::v2, 0x1800, {}), Error);
    CHECK(encode_pde(MmuVersion::v2, 0x7000, Aperture::vram) == (bits(1, 1) | bits(1, 5) | bits(7, 8)));
    CHECK(encode_pde(MmuVersion::v2, 0x7000, Aperture::sys_coherent) == (bits(2, 1) | bits(1, 3) | bits(1, 5) | bits(7, 8)));
    auto dual = encode_dual_pde_small(MmuVersion::v2, 0x9000, Aperture::vram);
    CHECK(dual[0] == bits(1, 5));                          // big half invalid, NO_ATS
    CHECK(dual[1] == (bits(1, 65 - 64) | bits(9, 72 - 64)));  // APERTURE_SMALL VIDEO, ADDRESS_SMALL
}

TEST_CASE("MMU v3 PTE and PDE words match gh100 dev_mmu.h", "[nv][mmu]") {
    // PCF REGULAR_RW_ATOMIC_CACHED_ACE = 0; REGULAR_RO_ATOMIC_UNCACHED_ACE = 5.
    CHECK(encode_pte(MmuVersion::v3, 0x12345000, {}) == (bits(1, 0) | 0x12345000));
    CHECK(encode_pte(MmuVersion::v3, 0x12345000, {Aperture::sys_noncoherent, true, true, 0x3}) ==
          (bits(1, 0) | bits(3, 1) | bits(5, 3) | bits(3, 8) | 0x12345000));
    CHECK_THROWS_AS(encode_pte(MmuVersion::v3, 0x1000, {Aperture::vram, false, false, 0x10}), Error);  // KIND 11:8
    CHECK_THROWS_AS(encode_pte(MmuVersion::v3, uint64_t{1} << 40, {}), Error);  // ADDRESS_VID 39:12
    // PCF VALID_CACHED_ATS_NOT_ALLOWED = 2 (VRAM), VALID_UNCACHED_ATS_NOT_ALLOWED = 3 (system).
    CHECK(encode_pde(MmuVersion::v3, 0x7000, Aperture::vram) == (bits(1, 1) | bits(2, 3) | 0x7000));
    CHECK(encode_pde(MmuVersion::v3, 0x7000, Aperture::sys_noncoherent) == (bits(3, 1) | bits(3, 3) | 0x7000));
    auto dual = encode_dual_pde_small(MmuVersion::v3, 0x9000, Aperture::vram);
    CHECK(dual[0] == bits(2, 3));  // APERTURE_BIG INVALID, PCF_BIG INVALID_ATS_NOT_ALLOWED
    CHECK(dual[1] == (bits(1, 65 - 64) | bits(2, 67 - 64) | bits(9, 76 - 64)));
}

TEST_CASE("MMU geometry: v2 49-bit with a 16-byte PDE0, v3 57-bit", "[nv][mmu]") {
    const auto& v2 = mmu_geometry(MmuVersion::v2);
    CHECK(v2.va_bits == 49);
    CHECK(v2.level_count == 5);
    CHECK(v2.levels[0].shift == 47);
    CHECK(v2.levels[3].shift == 21);
    CHECK(v2.levels[3].entry_bytes == 16);
    const auto& v3 = mmu_geometry(MmuVersion::v3);
    CHECK(v3.va_bits == 57);
    CHECK(v3.level_count == 6);
    CHECK(v3.levels[0].shift == 56);
    CHECK(v3.levels[4].entry_bytes == 16);
    CHECK(v3.levels[5].shift == 12);
}

TEST_CASE("VRAM allocator prefers 512 MiB, then 2 MiB, then 4 KiB chunks", "[nv][vram]") {
    VramAllocator vram("test", 0, 2 * GiB);
    auto a = vram.allocate(512 * MiB + 4 * MiB + 8192);
    CHECK(a.size == 512 * MiB + 4 * MiB + 8192);
    auto s = vram.stats();
    CHECK(s.chunks_512m == 1);
    CHECK(s.chunks_2m == 2);
    CHECK(s.chunks_4k == 2);
    for (const auto& b : a.blocks) CHECK(b.offset % 4096 == 0);
    CHECK(a.blocks.front().offset % (512 * MiB) == 0);
    CHECK(s.free == 2 * GiB - a.size);
    vram.free(a);
    CHECK(vram.stats().free == 2 * GiB);
    CHECK(vram.stats().largest_free == 2 * GiB);
    CHECK_THROWS_AS(vram.free(a), Error);  // double free
}

TEST_CASE("VRAM allocator steps down on fragmentation and serves contiguous requests in one block", "[nv][vram]") {
    VramAllocator vram("test", 0, 1 * GiB);
    // Pin one 4 KiB page in every 512 MiB half: no aligned 512 MiB chunk is left.
    auto p1 = vram.allocate(4096, true);
    vram.retire(512 * MiB, 4096);
    auto big = vram.allocate(512 * MiB);
    CHECK(vram.stats().chunks_512m == 0);
    CHECK(vram.stats().chunks_2m == 256);
    CHECK(big.size == 512 * MiB);
    auto c = vram.allocate(3 * MiB, true);
    REQUIRE(c.blocks.size() == 1);
    CHECK(c.blocks[0].size == 3 * MiB);
    CHECK(c.blocks[0].offset % (2 * MiB) == 0);
    CHECK(vram.stats().retired == 4096);
    CHECK_THROWS_AS(vram.allocate(1 * GiB), Error);
    CHECK_THROWS_AS(vram.retire(0, 4096), Error);  // allocated, not free
    vram.free(big);
    vram.free(c);
    vram.free(p1);
    CHECK(vram.stats().free == 1 * GiB - 4096);
}

TEST_CASE("page table maps with the largest leaves and writes v2 entries", "[nv][mmu]") {
    VramAllocator vram("test", 0, 4 * GiB);
    FakeVram fake;
    PageTable pt("test", MmuVersion::v2, vram, fake.writer(), fake.reg());
    uint64_t root = pt.root();
    // 512 MiB + 2 MiB + 4 KiB at VA 1 GiB -> phys 1 GiB.
    pt.map(GpuVirtualAddress(GiB), GiB, 512 * MiB + 2 * MiB + 4096, {});
    CHECK(pt.stats().leaves_512m == 1);
    CHECK(pt.stats().leaves_2m == 1);
    CHECK(pt.stats().leaves_4k == 1);
    // Walk as the MMU would, with the bit positions above.
    auto pde_addr = [](uint64_t pde) { return ((pde >> 8) & ((uint64_t{1} << 46) - 1)) << 12; };
    uint64_t va = GiB;
    uint64_t pd3 = fake.at(root + ((va >> 47) & 3) * 8);
    REQUIRE((pd3 & 1) == 0);
    REQUIRE(((pd3 >> 1) & 3) == 1);  // VIDEO
    uint64_t pd2 = fake.at(pde_addr(pd3) + ((va >> 38) & 511) * 8);
    uint64_t pd1_table = pde_addr(pd2);
    uint64_t pte512 = fake.at(pd1_table + ((va >> 29) & 511) * 8);
    CHECK(pte512 == (bits(1, 0) | bits(GiB >> 12, 8)));  // IS_PTE / VALID, VIDEO, address
    uint64_t va2 = GiB + 512 * MiB;
    uint64_t pd1 = fake.at(pd1_table + ((va2 >> 29) & 511) * 8);
    REQUIRE((pd1 & 1) == 0);
    uint64_t pd0_table = pde_addr(pd1);
    CHECK(fake.at(pd0_table + ((va2 >> 21) & 255) * 16) == (bits(1, 0) | bits(va2 >> 12, 8)));  // 2 MiB PTE
    CHECK(fake.at(pd0_table + ((va2 >> 21) & 255) * 16 + 8) == 0);
    uint64_t va3 = va2 + 2 * MiB;
    uint64_t dual_hi = fake.at(pd0_table + ((va3 >> 21) & 255) * 16 + 8);
    REQUIRE(((dual_hi >> 1) & 3) == 1);  // APERTURE_SMALL VIDEO
    uint64_t pt_table = ((dual_hi >> 8) & ((uint64_t{1} << 46) - 1)) << 12;
    CHECK(fake.at(pt_table + ((va3 >> 12) & 511) * 8) == (bits(1, 0) | bits(va3 >> 12, 8)));
    // TLB invalidate after the map: PDB, UPPER_PDB, INVALIDATE (ALL_VA | TRIGGER) in BAR0's VF window.
    REQUIRE(fake.registers.size() == 3);
    CHECK(fake.registers[0] == std::pair<uint32_t, uint32_t>{0xb830a0, static_cast<uint32_t>((root >> 12) << 4)});
    CHECK(fake.registers[1].first == 0xb830a4);
    CHECK(fake.registers[2] == std::pair<uint32_t, uint32_t>{0xb830b0, 0x80000001u});

    auto leaf = pt.lookup(GpuVirtualAddress(va3 + 0x123));
    REQUIRE(leaf);
    CHECK(leaf->address == va3 + 0x123);
    CHECK(leaf->page_size == 4096);
    CHECK_THROWS_AS(pt.map(GpuVirtualAddress(va3), 0, 4096, {}), Error);       // already mapped
    CHECK_THROWS_AS(pt.unmap(GpuVirtualAddress(va2), 4096), Error);            // would split a 2 MiB leaf
    pt.unmap(GpuVirtualAddress(va2), 2 * MiB);
    CHECK(fake.at(pd0_table + ((va2 >> 21) & 255) * 16) == 0);
    CHECK_FALSE(pt.lookup(GpuVirtualAddress(va2)));
    CHECK_THROWS_AS(pt.unmap(GpuVirtualAddress(va2), 2 * MiB), Error);  // not mapped
    CHECK_THROWS_AS(pt.map(GpuVirtualAddress(uint64_t{1} << 49), 0, 4096, {}), Error);  // outside 49 bits
}

TEST_CASE("page table v3: six levels, 512 MiB leaf at PDE1, sysmem 4 KiB leaf", "[nv][mmu]") {
    VramAllocator vram("test", 0, 1 * GiB);
    FakeVram fake;
    PageTable pt("test", MmuVersion::v3, vram, fake.writer(), fake.reg());
    uint64_t va = uint64_t{1} << 52;
    pt.map(GpuVirtualAddress(va), 0, 512 * MiB, {});
    pt.map(GpuVirtualAddress(va + 512 * MiB), 0xdead000, 4096, {Aperture::sys_coherent, true, false, 0});
    auto pde_addr = [](uint64_t pde) { return pde & 0x000ffffffffff000ull; };
    uint64_t t = pt.root();
    for (unsigned shift : {56u, 47u, 38u}) {
        uint64_t pde = fake.at(t + ((va >> shift) & 511) * 8);
        REQUIRE(((pde >> 1) & 3) == 1);
        REQUIRE((pde & 1) == 0);
        t = pde_addr(pde);
    }
    CHECK(fake.at(t + ((va >> 29) & 511) * 8) == bits(1, 0));  // 512 MiB PTE at VRAM 0
    uint64_t va2 = va + 512 * MiB;
    uint64_t pd1 = fake.at(t + ((va2 >> 29) & 511) * 8);
    uint64_t pd0 = pde_addr(pd1);
    uint64_t hi = fake.at(pd0 + ((va2 >> 21) & 255) * 16 + 8);
    uint64_t ptab = hi & 0x000ffffffffff000ull;
    // SYS_COH (2), PCF REGULAR_RW_ATOMIC_UNCACHED_ACE (1).
    CHECK(fake.at(ptab + ((va2 >> 12) & 511) * 8) == (bits(1, 0) | bits(2, 1) | bits(1, 3) | 0xdead000));
    auto leaf = pt.lookup(GpuVirtualAddress(va2 + 8));
    REQUIRE(leaf);
    CHECK(leaf->aperture == Aperture::sys_coherent);
    CHECK(leaf->address == 0xdead008);
}

}  // namespace memory_test
