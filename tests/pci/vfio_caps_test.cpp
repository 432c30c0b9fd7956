// What the kernel tells VFIO users through capability chains, parsed from hand-built buffers
// laid out as include/uapi/linux/vfio.h defines them; and the IOVA ranges chosen from it.
#include "base/error.hpp"
#include "drivers/pci/iova_ranges.hpp"
#include "drivers/pci/sysfs_resource.hpp"
#include "drivers/pci/vfio_caps.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <linux/vfio.h>

namespace vfio_caps_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

// vfio.h ends the capability structs in zero-length arrays, and the test declares them as the
// kernel lays them out; clang warns at each such declaration, GCC only at the (system) header.
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wzero-length-array"
#endif

using namespace baregpu;
using namespace baregpu::pci;

namespace {

// An info buffer: a fixed part of `fixed` bytes, then capabilities appended with put().
struct InfoBuffer {
    std::vector<std::byte> bytes;
    explicit InfoBuffer(size_t fixed) : bytes(fixed) {}
    template <typename T>
    uint32_t put(const T& value) {
        uint32_t at = static_cast<uint32_t>(bytes.size());
        bytes.resize(bytes.size() + sizeof value);
        std::memcpy(bytes.data() + at, &value, sizeof value);
        return at;
    }
    template <typename T>
    void put_at(uint32_t at, const T& value) {
        std::memcpy(bytes.data() + at, &value, sizeof value);
    }
    void link(uint32_t cap, uint32_t next) {
        vfio_info_cap_header h;
        std::memcpy(&h, bytes.data() + cap, sizeof h);
        h.next = next;
        put_at(cap, h);
    }
};

// A type1 GET_INFO answer as an x86 machine with VT-d gives it: DMA_AVAIL, then the IOVA ranges
// around the MSI window.
InfoBuffer x86_type1_info() {
    InfoBuffer b(sizeof(vfio_iommu_type1_info));
    vfio_iommu_type1_info_dma_avail avail{};
    avail.header.id = VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL;
    avail.header.version = 1;
    avail.avail = 65535;
    uint32_t first = b.put(avail);
    while (b.bytes.size() % 8) b.bytes.push_back(std::byte{0});
    vfio_iommu_type1_info_cap_iova_range ranges{};
    ranges.header.id = VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE;
    ranges.header.version = 1;
    ranges.nr_iovas = 2;
    uint32_t second = b.put(ranges);
    b.put(vfio_iova_range{0, 0xfedfffff});
    b.put(vfio_iova_range{0xfef00000, 0xffffffffffffull});  // 48-bit VT-d
    b.link(first, second);
    return b;
}

}  // namespace

TEST_CASE("vfio caps: the chain is followed to the capability asked for") {
    InfoBuffer b = x86_type1_info();
    uint32_t first = sizeof(vfio_iommu_type1_info);
    auto cap = find_vfio_capability("dev", b.bytes, first, VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE, "GET_INFO");
    REQUIRE(cap.has_value());
    auto windows = parse_iova_range_capability("dev", *cap);
    REQUIRE(windows.size() == 2);
    CHECK(windows[0].start == 0);
    CHECK(windows[0].last == 0xfedfffff);
    CHECK(windows[1].start == 0xfef00000);
    CHECK(windows[1].last == 0xffffffffffffull);
    CHECK_FALSE(find_vfio_capability("dev", b.bytes, first, VFIO_IOMMU_TYPE1_INFO_CAP_MIGRATION, "GET_INFO"));
    CHECK_FALSE(find_vfio_capability("dev", b.bytes, 0, VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE, "GET_INFO"));
}

TEST_CASE("vfio caps: broken chains and counts are protocol errors, not reads past the buffer") {
    InfoBuffer b = x86_type1_info();
    uint32_t first = sizeof(vfio_iommu_type1_info);
    SECTION("a loop") {
        b.link(first, first);
        CHECK_THROWS_WITH(find_vfio_capability("dev", b.bytes, first, 99, "GET_INFO"), Catch::Contains("loops back"));
    }
    SECTION("a next pointer past the end") {
        b.link(first, static_cast<uint32_t>(b.bytes.size()));
        CHECK_THROWS_AS(find_vfio_capability("dev", b.bytes, first, 99, "GET_INFO"), ProtocolError);
    }
    SECTION("more ranges claimed than present") {
        auto cap = find_vfio_capability("dev", b.bytes, first, VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE, "GET_INFO");
        REQUIRE(cap);
        std::vector<std::byte> copy(cap->begin(), cap->end());
        uint32_t huge = 0x40000000;
        std::memcpy(copy.data() + offsetof(vfio_iommu_type1_info_cap_iova_range, nr_iovas), &huge, sizeof huge);
        CHECK_THROWS_WITH(parse_iova_range_capability("dev", copy), Catch::Contains("claims 1073741824 ranges"));
    }
    SECTION("a range that ends before it starts") {
        auto cap = find_vfio_capability("dev", b.bytes, first, VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE, "GET_INFO");
        std::vector<std::byte> copy(cap->begin(), cap->end());
        vfio_iova_range bad{0x2000, 0x1000};
        std::memcpy(copy.data() + sizeof(vfio_iommu_type1_info_cap_iova_range), &bad, sizeof bad);
        CHECK_THROWS_WITH(parse_iova_range_capability("dev", copy), Catch::Contains("ends at 0x1000"));
    }
}

TEST_CASE("vfio caps: sparse mmap areas around an MSI-X table") {
    InfoBuffer b(sizeof(vfio_region_info));
    vfio_region_info_cap_sparse_mmap sparse{};
    sparse.header.id = VFIO_REGION_INFO_CAP_SPARSE_MMAP;
    sparse.header.version = 1;
    sparse.nr_areas = 2;
    uint32_t at = b.put(sparse);
    // A 1 MiB register BAR whose MSI-X table sits in its first 8 KiB: mappable around it.
    b.put(vfio_region_sparse_mmap_area{0x2000, 0xfe000});
    b.put(vfio_region_sparse_mmap_area{0, 0});  // empty areas are dropped
    auto cap = find_vfio_capability("dev", b.bytes, at, VFIO_REGION_INFO_CAP_SPARSE_MMAP, "GET_REGION_INFO");
    REQUIRE(cap);
    auto areas = parse_sparse_mmap_capability("dev", *cap, 1u << 20);
    REQUIRE(areas.size() == 1);
    CHECK(areas[0].offset == 0x2000);
    CHECK(areas[0].size == 0xfe000);
    // The same areas on a region too small for them.
    CHECK_THROWS_WITH(parse_sparse_mmap_capability("dev", *cap, 0x80000), Catch::Contains("outside the 0x80000-byte"));
}

TEST_CASE("IOVA ranges: kernel windows become page-aligned allocator ranges without page 0") {
    const IovaWindow x86[] = {{0, 0xfedfffff}, {0xfef00000, 0xffffffffffffull}};
    auto ranges = usable_iova_ranges(x86, 4096);
    REQUIRE(ranges.size() == 2);
    CHECK(ranges[0].start == 0x1000);
    CHECK(ranges[0].end == 0xfee00000);
    CHECK(ranges[1].start == 0xfef00000);
    CHECK(ranges[1].end == 0x1000000000000ull);

    // Windows not on page boundaries shrink inward; one smaller than a page goes.
    const IovaWindow odd[] = {{0x1234, 0x5fff}, {0x10000, 0x10fff}, {0x20001, 0x20ffe}};
    auto shrunk = usable_iova_ranges(odd, 4096);
    REQUIRE(shrunk.size() == 2);
    CHECK(shrunk[0].start == 0x2000);
    CHECK(shrunk[0].end == 0x6000);
    CHECK(shrunk[1].start == 0x10000);
    CHECK(shrunk[1].end == 0x11000);

    // Nothing reported: everything but page 0 and the x86 MSI window.
    auto fallback = usable_iova_ranges({}, 4096);
    REQUIRE(fallback.size() == 2);
    CHECK(fallback[0].start == 0x1000);
    CHECK(fallback[0].end == kX86MsiWindow.start);
    CHECK(fallback[1].start == kX86MsiWindow.last + 1);
    CHECK(fallback[1].end == 0xfffffffffffff000ull);
}

TEST_CASE("IOVA ranges: allocations respect the windows and the device's DMA limit") {
    const IovaWindow x86[] = {{0, 0xfedfffff}, {0xfef00000, 0xffffffffffffull}};
    IovaAllocator iova(usable_iova_ranges(x86, 4096));
    // QEMU's edu reaches 28 bits: the first buffer lands low, above page 0.
    auto a = iova.allocate(0x10000, 4096, uint64_t{1} << 28);
    REQUIRE(a);
    CHECK(*a == 0x1000);
    // A 2 MiB page aligned to 2 MiB.
    auto b = iova.allocate(2u << 20, 2u << 20, uint64_t{1} << 28);
    REQUIRE(b);
    CHECK(*b % (2u << 20) == 0);
    CHECK(*b >= 0x11000);
    // Nothing may overlap the MSI window, however the lower range is used up.
    auto big = iova.allocate(0xfee00000 - 0x400000, 4096, ~uint64_t{0});
    if (big) CHECK(*big + 0xfee00000 - 0x400000 <= 0xfee00000);
    auto next = iova.allocate(0x100000, 4096, ~uint64_t{0});
    REQUIRE(next);
    CHECK((*next + 0x100000 <= 0xfee00000 || *next >= 0xfef00000));

    // Only high windows and a 32-bit device: nothing fits.
    const IovaWindow high[] = {{0x100000000ull, 0xffffffffffull}};
    IovaAllocator high_only(usable_iova_ranges(high, 4096));
    CHECK_FALSE(high_only.allocate(4096, 4096, uint64_t{1} << 32).has_value());
    CHECK(high_only.allocate(4096, 4096, uint64_t{1} << 40).value() == 0x100000000ull);
}

TEST_CASE("IOVA windows are described for error messages") {
    const IovaWindow w[] = {{0x1000, 0xfedfffff}};
    CHECK(describe_iova_windows(w) == "0x1000-0xfedfffff");
    CHECK(describe_iova_windows({}) == "none reported");
}

TEST_CASE("sysfs resource file: flags of include/linux/ioport.h decide BAR type") {
    std::string text =
        "0x00000000fb000000 0x00000000fbffffff 0x0000000000040200\n"  // 32-bit memory, 16 MiB
        "0x000000e000000000 0x000000efffffffff 0x000000000014220c\n"  // 64-bit prefetchable, 64 GiB
        "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
        "0x000000000000f000 0x000000000000f07f 0x0000000000040101\n"  // I/O, 128 bytes
        "0x0000000000000000 0x00000000001fffff 0x0000000020040200\n"  // unassigned (IORESOURCE_UNSET)
        "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
    auto lines = parse_resource_file("dev", "resource", text);
    REQUIRE(lines.size() == 6);
    auto bars = bars_from_resources("dev", "resource", lines);
    CHECK(bars[0].type == BarType::Memory32);
    CHECK(bars[0].size == (16u << 20));
    CHECK(bars[0].bus_base == 0xfb000000u);
    CHECK(bars[1].type == BarType::Memory64);
    CHECK(bars[1].prefetchable);
    CHECK(bars[1].size == (64ull << 30));
    CHECK(bars[1].bus_base == 0xe000000000ull);
    CHECK(bars[2].type == BarType::None);
    CHECK(bars[3].type == BarType::Io);
    CHECK(bars[3].size == 128);
    CHECK(bars[4].type == BarType::Memory32);
    CHECK(bars[4].bus_base == 0);  // the kernel assigned no address
    CHECK(bars[5].type == BarType::None);

    CHECK_THROWS_WITH(bars_from_resources("dev", "resource", parse_resource_file("dev", "resource", "")),
                      Catch::Contains("0 lines"));
    CHECK_THROWS_WITH(parse_resource_file("dev", "resource", "0x1 0x0 0x200\n"), Catch::Contains("below start"));
    CHECK_THROWS_WITH(parse_resource_file("dev", "resource", "0x1 0x2\n"), Catch::Contains("line 1"));
}

}  // namespace vfio_caps_test
