// Unit: the GPU virtual address space manager.
#include "hcq/va_allocator.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <random>

using namespace baregpu;
using namespace baregpu::hcq;

TEST_CASE("va: the largest page size that fits") {
    CHECK(VaAllocator::page_size_for(1) == 4096);
    CHECK(VaAllocator::page_size_for(65535) == 4096);
    CHECK(VaAllocator::page_size_for(65536) == 65536);
    CHECK(VaAllocator::page_size_for((2 << 20) - 1) == 65536);
    CHECK(VaAllocator::page_size_for(2 << 20) == (2 << 20));
    CHECK(VaAllocator::page_size_for((1ull << 30) + 5) == (1ull << 30));
}

TEST_CASE("va: allocations are aligned to their page size and rounded to 4 KiB") {
    VaAllocator va(GpuVirtualAddress(0x1000), 16ull << 30);
    auto small = va.allocate(10);
    REQUIRE(small);
    CHECK(small->size == 4096);
    CHECK(small->page_size == 4096);
    auto mid = va.allocate(100 << 10);
    REQUIRE(mid);
    CHECK(mid->start.is_aligned(64 << 10));
    CHECK(mid->page_size == (64 << 10));
    auto big = va.allocate(3 << 20);
    REQUIRE(big);
    CHECK(big->start.is_aligned(2 << 20));
    // The page size follows what is reserved: one byte short of a page still reserves the page.
    auto odd64k = va.allocate((64 << 10) - 1);
    REQUIRE(odd64k);
    CHECK(odd64k->size == (64 << 10));
    CHECK(odd64k->start.is_aligned(64 << 10));
    CHECK(odd64k->page_size == (64 << 10));
    auto odd2m = va.allocate((2 << 20) - 1);
    REQUIRE(odd2m);
    CHECK(odd2m->size == (2 << 20));
    CHECK(odd2m->start.is_aligned(2 << 20));
    CHECK(odd2m->page_size == (2 << 20));
    auto huge = va.allocate(1ull << 30);
    REQUIRE(huge);
    CHECK(huge->start.is_aligned(1ull << 30));
    CHECK(huge->page_size == (1ull << 30));
    CHECK_FALSE(va.allocate(0));
    CHECK_FALSE(va.allocate(64ull << 30));
    CHECK_FALSE(va.allocate(4096, 3000));
}

TEST_CASE("va: double frees and foreign ranges are refused and change nothing") {
    VaAllocator va(GpuVirtualAddress(0x100000), 1 << 20);
    auto a = va.allocate(8192);
    REQUIRE(a);
    uint64_t before = va.bytes_free();
    va.free(a->start, a->size);
    CHECK_THROWS_AS(va.free(a->start, a->size), std::logic_error);
    CHECK_THROWS_AS(va.free(GpuVirtualAddress(0x10), 4096), std::logic_error);
    CHECK(va.bytes_free() == before + 8192);
    CHECK(va.fragments() == 1);
}

TEST_CASE("va: random alloc/free never overlaps, keeps fragments <= live + 1, and coalesces fully") {
    const uint64_t total = 64ull << 30;
    VaAllocator va(GpuVirtualAddress(1ull << 40), total);
    std::mt19937_64 rng(20240901);
    std::map<uint64_t, uint64_t> live;  // start -> size
    size_t max_fragments = 0;
    for (int i = 0; i < 20000; ++i) {
        if (live.empty() || rng() % 5 < 3) {
            static const uint64_t sizes[] = {100,     4096,    5000,    (64 << 10) - 1, 64 << 10, 70 << 10,
                                             1 << 20, 2 << 20, 3 << 20, (2 << 20) - 1,  9 << 20};
            uint64_t size = sizes[rng() % std::size(sizes)] + (rng() % 4) * 4096;
            auto r = va.allocate(size);
            if (!r) continue;
            REQUIRE(r->size == (size + 4095) / 4096 * 4096);
            REQUIRE(r->start.is_aligned(VaAllocator::page_size_for(r->size)));
            REQUIRE(r->page_size == VaAllocator::page_size_for(r->size));
            auto next = live.lower_bound(r->start.value());
            if (next != live.end()) REQUIRE(r->start.value() + r->size <= next->first);
            if (next != live.begin()) REQUIRE(std::prev(next)->first + std::prev(next)->second <= r->start.value());
            live.emplace(r->start.value(), r->size);
        } else {
            auto it = live.begin();
            std::advance(it, rng() % live.size());
            va.free(GpuVirtualAddress(it->first), it->second);
            live.erase(it);
        }
        REQUIRE(va.fragments() <= live.size() + 1);
        max_fragments = std::max(max_fragments, va.fragments());
        uint64_t used = 0;
        for (auto& [s, n] : live) used += n;
        REQUIRE(va.bytes_free() + used == total);
    }
    for (auto& [s, n] : live) va.free(GpuVirtualAddress(s), n);
    CHECK(va.fragments() == 1);
    CHECK(va.bytes_free() == total);
    CHECK(va.largest_free() == total);
}

TEST_CASE("va: a large request still fits after heavy small churn (bounded fragmentation)") {
    const uint64_t total = 256ull << 20;
    VaAllocator va(GpuVirtualAddress(1ull << 30), total);
    std::mt19937_64 rng(5);
    std::vector<VaAllocator::Range> live;
    // Fill half the space with small blocks, free every other one, repeat.
    for (int round = 0; round < 20; ++round) {
        while (va.bytes_free() > total / 2) live.push_back(*va.allocate(4096 * (1 + rng() % 16)));
        for (size_t i = 0; i < live.size(); i += 2) va.free(live[i].start, live[i].size);
        std::vector<VaAllocator::Range> keep;
        for (size_t i = 1; i < live.size(); i += 2) keep.push_back(live[i]);
        live = keep;
    }
    // Best fit packs small blocks together: a contiguous quarter of the space is still free.
    CHECK(va.largest_free() >= total / 4);
}
