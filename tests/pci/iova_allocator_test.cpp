#include "drivers/pci/iova_allocator.hpp"

#include <catch2/catch.hpp>
#include <random>

namespace iova_allocator_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu::pci;

TEST_CASE("IOVA ranges respect alignment, usable ranges and the DMA limit") {
    IovaAllocator a({{0x1000, 0xfee00000}, {0xfef00000, 1ull << 40}});
    auto x = a.allocate(0x1000, 0x1000, ~0ull);
    REQUIRE(x);
    CHECK(*x == 0x1000);
    auto huge = a.allocate(2 << 20, 2 << 20, ~0ull);
    REQUIRE(huge);
    CHECK(*huge % (2 << 20) == 0);
    // A 28-bit device (QEMU's edu) gets nothing above 256 MiB.
    auto low = a.allocate(0x10000, 0x1000, 1ull << 28);
    REQUIRE(low);
    CHECK(*low + 0x10000 <= (1ull << 28));
    CHECK_FALSE(a.allocate(1ull << 29, 0x1000, 1ull << 28));
    // The MSI window is never handed out.
    auto big = a.allocate(0x100000000ull, 0x1000, ~0ull);
    REQUIRE(big);
    CHECK((*big >= 0xfef00000 || *big + 0x100000000ull <= 0xfee00000));
    CHECK_FALSE(a.allocate(0, 0x1000, ~0ull));
    CHECK_FALSE(a.allocate(0x1000, 3, ~0ull));
}

TEST_CASE("freeing everything coalesces back into the original ranges") {
    IovaAllocator a({{0x1000, 1ull << 32}});
    uint64_t total = a.bytes_free();
    std::mt19937_64 rng(1234);
    std::vector<std::pair<uint64_t, uint64_t>> live;
    for (int i = 0; i < 2000; ++i) {
        if (live.empty() || rng() % 3 != 0) {
            uint64_t size = (1 + rng() % 64) * 0x1000;
            uint64_t align = rng() % 4 == 0 ? (2 << 20) : 0x1000;
            auto got = a.allocate(size, align, ~0ull);
            REQUIRE(got);
            for (auto& [s, n] : live) REQUIRE((*got + size <= s || s + n <= *got));  // no overlap
            live.emplace_back(*got, size);
        } else {
            size_t k = rng() % live.size();
            a.free(live[k].first, live[k].second);
            live.erase(live.begin() + static_cast<long>(k));
        }
    }
    for (auto& [s, n] : live) a.free(s, n);
    CHECK(a.bytes_free() == total);
    CHECK(a.fragments() == 1);
}

TEST_CASE("double free is refused") {
    IovaAllocator a({{0x1000, 0x100000}});
    auto x = a.allocate(0x2000, 0x1000, ~0ull);
    REQUIRE(x);
    a.free(*x, 0x2000);
    CHECK_THROWS_WITH(a.free(*x, 0x2000), Catch::Contains("freed twice"));
}

}  // namespace iova_allocator_test
