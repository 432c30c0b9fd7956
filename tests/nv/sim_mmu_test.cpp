// The simulated AD102's MMU walking page tables written by drivers/nv's PageTable:
// 4 KiB, 2 MiB and 512 MiB leaves, MMU v2 and v3, system-memory leaves through the bus, faults.
#include "drivers/nv/page_table.hpp"
#include "drivers/sim/nvgpu/mmu.hpp"
#include "fake_sim_port.hpp"

#include <catch2/catch.hpp>

#include <cstring>

namespace sim_mmu_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::nv;
namespace nvsim = baregpu::sim::nvgpu;

namespace {
constexpr uint64_t MiB = uint64_t{1} << 20, GiB = uint64_t{1} << 30;

struct Rig {
    test::AnonymousVram vram{2 * GiB};
    test::FakeSimPort port{0x40000000, 64 * 1024};
    VramAllocator alloc{"test", 0, 2 * GiB};
    unsigned invalidates = 0;
    PageTable pt;
    nvsim::Mmu mmu{vram.span(), &port};
    explicit Rig(MmuVersion v)
        : pt("test", v, alloc,
             [this](uint64_t at, uint64_t value) { std::memcpy(vram.span().data() + at, &value, 8); },
             [this](uint32_t, uint32_t) { ++invalidates; }) {}
    nvsim::MmuFormat format() const { return pt.version() == MmuVersion::v2 ? nvsim::MmuFormat::v2 : nvsim::MmuFormat::v3; }
    nvsim::MmuTranslation translate(uint64_t va, nvsim::MmuAccess a = nvsim::MmuAccess::read) {
        auto r = mmu.translate(pt.root(), format(), va, a);
        if (auto* f = std::get_if<nvsim::MmuFault>(&r)) FAIL(f->describe());
        return std::get<nvsim::MmuTranslation>(r);
    }
    nvsim::MmuFault fault(uint64_t va, nvsim::MmuAccess a = nvsim::MmuAccess::read) {
        auto r = mmu.translate(pt.root(), format(), va, a);
        REQUIRE(std::holds_alternative<nvsim::MmuFault>(r));
        return std::get<nvsim::MmuFault>(r);
    }
};
}  // namespace

TEST_CASE("sim MMU walks the driver's 4 KiB, 2 MiB and 512 MiB leaves", "[nv][sim][mmu]") {
    auto version = GENERATE(MmuVersion::v2, MmuVersion::v3);
    Rig rig(version);
    // Physical chunks from the allocator: 512 MiB + 2 MiB + 8 KiB.
    auto a = rig.alloc.allocate(512 * MiB + 2 * MiB + 8192);
    uint64_t va = 4 * GiB;
    uint64_t at = va;
    for (const auto& b : a.blocks) {
        rig.pt.map(GpuVirtualAddress(at), b.offset, b.size, {});
        at += b.size;
    }
    CHECK(rig.pt.stats().leaves_512m == 1);
    CHECK(rig.pt.stats().leaves_2m == 1);
    CHECK(rig.pt.stats().leaves_4k == 2);
    CHECK(rig.invalidates > 0);
    // Every page the allocator gave translates to where the shadow says.
    for (uint64_t off : {uint64_t{0}, uint64_t{0x1234}, 511 * MiB + 7, 512 * MiB, 513 * MiB + 5, 514 * MiB, 514 * MiB + 4097}) {
        auto t = rig.translate(va + off);
        auto leaf = rig.pt.lookup(GpuVirtualAddress(va + off));
        REQUIRE(leaf);
        CHECK(t.vram);
        CHECK(t.address == leaf->address);
        CHECK(t.page_size == leaf->page_size);
    }
    CHECK(rig.translate(va).page_size == 512 * MiB);
    CHECK(rig.translate(va + 512 * MiB).page_size == 2 * MiB);
    CHECK(rig.translate(va + 514 * MiB).page_size == 4096);
    // A write through the MMU lands in VRAM where the leaf says, across the 512 MiB / 2 MiB seam.
    std::vector<std::byte> data(8192);
    for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i * 7);
    REQUIRE_FALSE(rig.mmu.write(rig.pt.root(), rig.format(), va + 512 * MiB - 4096, data));
    std::vector<std::byte> back(8192);
    REQUIRE_FALSE(rig.mmu.read(rig.pt.root(), rig.format(), va + 512 * MiB - 4096, back));
    CHECK(back == data);
    auto hi = rig.pt.lookup(GpuVirtualAddress(va + 512 * MiB));
    CHECK(std::memcmp(rig.vram.span().data() + hi->address, data.data() + 4096, 4096) == 0);
}

TEST_CASE("sim MMU resolves system-memory leaves through the bus", "[nv][sim][mmu]") {
    auto version = GENERATE(MmuVersion::v2, MmuVersion::v3);
    Rig rig(version);
    rig.pt.map(GpuVirtualAddress(0x100000000), rig.port.sys_base() + 0x2000, 0x4000,
               {Aperture::sys_coherent, true, false, 0});
    auto t = rig.translate(0x100000010);
    CHECK_FALSE(t.vram);
    CHECK(t.address == rig.port.sys_base() + 0x2010);
    uint64_t value = 0x1122334455667788;
    REQUIRE_FALSE(rig.mmu.write(rig.pt.root(), rig.format(), 0x100001000, std::as_bytes(std::span(&value, 1))));
    uint64_t seen = 0;
    std::memcpy(&seen, rig.port.sys().data() + 0x3000, 8);
    CHECK(seen == value);
}

TEST_CASE("sim MMU faults with the VA, access and kind", "[nv][sim][mmu]") {
    auto version = GENERATE(MmuVersion::v2, MmuVersion::v3);
    Rig rig(version);
    rig.pt.map(GpuVirtualAddress(0x200000000), 0x10000, 0x1000, {Aperture::vram, false, true, 0});  // read only
    // Nothing at this VA: the root's entry is invalid.
    auto f = rig.fault(0x7000000000, nvsim::MmuAccess::write);
    CHECK(f.va == 0x7000000000);
    CHECK(f.access == nvsim::MmuAccess::write);
    CHECK(f.type == nvsim::MmuFaultType::pde_invalid);
    // Same 4 KiB table, neighbouring page: PTE invalid at the last level.
    auto p = rig.fault(0x200001000);
    CHECK(p.type == nvsim::MmuFaultType::pte_invalid);
    CHECK(p.level == (version == MmuVersion::v2 ? 4u : 5u));
    CHECK(rig.fault(0x200000000, nvsim::MmuAccess::write).type == nvsim::MmuFaultType::read_only);
    CHECK(rig.translate(0x200000008).read_only);
    CHECK(rig.fault(uint64_t{1} << 57).type == nvsim::MmuFaultType::va_limit);
    // A multi-page access that runs into a hole changes nothing.
    rig.pt.map(GpuVirtualAddress(0x300000000), 0x20000, 0x1000, {});
    std::vector<std::byte> ones(0x1800, std::byte{0xff});
    auto w = rig.mmu.write(rig.pt.root(), rig.format(), 0x300000000, ones);
    REQUIRE(w);
    CHECK(w->va == 0x300001000);
    CHECK(rig.vram.span()[0x20000] == std::byte{0});
    rig.pt.unmap(GpuVirtualAddress(0x300000000), 0x1000);
    CHECK(rig.fault(0x300000000).type == nvsim::MmuFaultType::pte_invalid);
}

}  // namespace sim_mmu_test
