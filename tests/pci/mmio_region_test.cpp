#include "base/error.hpp"
#include "drivers/pci/mmio_region.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

namespace mmio_region_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::pci;

namespace {

struct Recorder final : MmioHandler {
    std::vector<std::tuple<char, uint64_t, unsigned, uint64_t>> log;
    uint64_t mmio_read(uint64_t offset, unsigned width) override {
        log.emplace_back('r', offset, width, 0);
        return 0x1122334455667788ull >> (64 - 8 * width);
    }
    void mmio_write(uint64_t offset, unsigned width, uint64_t value) override { log.emplace_back('w', offset, width, value); }
};

}  // namespace

TEST_CASE("direct regions read and write little-endian values of each width") {
    alignas(8) std::array<std::byte, 64> mem{};
    MmioRegion r("test BAR0", mem.data(), mem.size());
    r.write32(BarOffset(0), 0xdeadbeef);
    r.write64(BarOffset(8), 0x0102030405060708ull);
    r.write16(BarOffset(16), 0xabcd);
    r.write8(BarOffset(18), 0x7f);
    CHECK(r.read32(BarOffset(0)) == 0xdeadbeef);
    CHECK(r.read8(BarOffset(0)) == 0xef);
    CHECK(r.read64(BarOffset(8)) == 0x0102030405060708ull);
    CHECK(r.read16(BarOffset(16)) == 0xabcd);
    CHECK(r.read8(BarOffset(18)) == 0x7f);
    CHECK(r.read64(BarOffset(56)) == 0);
}

TEST_CASE("accesses outside the region or misaligned are refused with the region named") {
    alignas(8) std::array<std::byte, 64> mem{};
    MmioRegion r("0000:03:00.0 BAR5", mem.data(), mem.size());
    CHECK_THROWS_WITH(r.read32(BarOffset(64)), Catch::Contains("0000:03:00.0 BAR5") && Catch::Contains("outside"));
    CHECK_THROWS_WITH(r.read64(BarOffset(64)), Catch::Contains("outside"));
    CHECK_THROWS_WITH(r.write32(BarOffset(2), 1), Catch::Contains("not 4-byte aligned"));
    CHECK_THROWS(r.read32(BarOffset(~uint64_t{0} - 1)));  // no wrap-around past the end
    std::array<std::byte, 8> out{};
    CHECK_THROWS(r.read_block(BarOffset(60), out));
    CHECK_THROWS(r.write_block(BarOffset(~uint64_t{0}), out));
    MmioRegion never;
    CHECK_THROWS_WITH(never.read32(BarOffset(0)), Catch::Contains("never mapped"));
}

TEST_CASE("handler-backed regions forward each access and split blocks") {
    Recorder rec;
    MmioRegion r("sim BAR0", &rec, 4096);
    CHECK(r.read32(BarOffset(0x10)) == 0x11223344);
    r.write64(BarOffset(0x18), 42);
    std::array<std::byte, 6> data{};
    r.write_block(BarOffset(0x21), data);  // 3 single bytes to reach alignment, then one dword... or bytes at the tail
    REQUIRE(rec.log.size() >= 3);
    CHECK(rec.log[0] == std::make_tuple('r', uint64_t{0x10}, 4u, uint64_t{0}));
    CHECK(rec.log[1] == std::make_tuple('w', uint64_t{0x18}, 8u, uint64_t{42}));
    for (size_t i = 2; i < rec.log.size(); ++i) {
        auto [kind, offset, width, value] = rec.log[i];
        CHECK(kind == 'w');
        CHECK(offset % width == 0);  // the handler never sees a misaligned access
    }
    CHECK(r.direct() == nullptr);
}

}  // namespace mmio_region_test
