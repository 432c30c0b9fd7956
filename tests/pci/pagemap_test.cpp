// /proc/self/pagemap on this machine: addresses that are plausible, stable, and tell pages apart
// — one physical page seen through two virtual mappings translates to one physical address.
#include "base/error.hpp"
#include "drivers/pci/pagemap.hpp"
#include "fake_kernel.hpp"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace pagemap_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::pci;

namespace {

// Root may read PFNs; anyone else reads zeros (Linux 4.2+). Skip with a message when we cannot.
bool pfns_readable() {
    if (::geteuid() != 0) {
        WARN("skipped: reading physical frame numbers from /proc/self/pagemap needs CAP_SYS_ADMIN (uid "
             << ::geteuid() << ")");
        return false;
    }
    return true;
}

}  // namespace

TEST_CASE("pagemap: a resident page has a page-aligned, non-zero, stable physical address") {
    if (!pfns_readable()) return;
    Pagemap pagemap("test", "/proc");
    long page = ::sysconf(_SC_PAGESIZE);
    void* p = ::mmap(nullptr, static_cast<size_t>(page) * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    REQUIRE(::mlock(p, static_cast<size_t>(page) * 4) == 0);
    auto* bytes = static_cast<std::byte*>(p);
    for (int i = 0; i < 4; ++i) bytes[i * page] = std::byte{1};

    uint64_t first = pagemap.physical_address(bytes);
    CHECK(first != 0);
    CHECK(first % static_cast<uint64_t>(page) == 0);
    CHECK(pagemap.physical_address(bytes) == first);  // stable while locked
    CHECK(pagemap.physical_address(bytes + 100) == first + 100);  // the offset inside the page carries over
    std::vector<uint64_t> pages = pagemap.physical_pages({bytes, static_cast<size_t>(page) * 4}, static_cast<uint64_t>(page));
    REQUIRE(pages.size() == 4);
    CHECK(pages[0] == first);
    for (size_t i = 0; i < pages.size(); ++i) {
        for (size_t j = i + 1; j < pages.size(); ++j) CHECK(pages[i] != pages[j]);
    }
    ::munmap(p, static_cast<size_t>(page) * 4);
}

TEST_CASE("pagemap: two mappings of one memfd page share a physical address; different pages differ") {
    if (!pfns_readable()) return;
    Pagemap pagemap("test", "/proc");
    size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    int fd = ::memfd_create("baregpu-pagemap-test", MFD_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(2 * page)) == 0);
    void* a = ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    void* b = ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    REQUIRE(a != MAP_FAILED);
    REQUIRE(b != MAP_FAILED);
    REQUIRE(a != b);
    auto* va = static_cast<volatile uint8_t*>(a);
    auto* vb = static_cast<volatile uint8_t*>(b);
    va[0] = 0x11;
    va[page] = 0x22;
    // Reading through the second mapping faults its pages in: the same page-cache pages.
    REQUIRE(vb[0] == 0x11);
    REQUIRE(vb[page] == 0x22);

    uint64_t a0 = pagemap.physical_address(static_cast<std::byte*>(a));
    uint64_t b0 = pagemap.physical_address(static_cast<std::byte*>(b));
    uint64_t a1 = pagemap.physical_address(static_cast<std::byte*>(a) + page);
    uint64_t b1 = pagemap.physical_address(static_cast<std::byte*>(b) + page);
    CHECK(a0 == b0);
    CHECK(a1 == b1);
    CHECK(a0 != a1);
    ::munmap(a, 2 * page);
    ::munmap(b, 2 * page);
    ::close(fd);
}

// An independent witness: /proc/kpagecount (Documentation/admin-guide/mm/pagemap.rst) holds, per
// physical frame, how many times it is mapped. Map three memfd pages 3, 1 and 2 times; the frames
// pagemap names must carry exactly those counts, which a wrong translation would not reproduce.
TEST_CASE("pagemap: the frames it names are mapped as often as we mapped them (kpagecount)") {
    if (!pfns_readable()) return;
    int counts = ::open("/proc/kpagecount", O_RDONLY | O_CLOEXEC);
    if (counts < 0) {
        WARN("skipped: /proc/kpagecount is not readable (CONFIG_PROC_PAGE_MONITOR off?)");
        return;
    }
    Pagemap pagemap("test", "/proc");
    size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    int fd = ::memfd_create("baregpu-kpagecount-test", MFD_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(3 * page)) == 0);
    auto map = [&](size_t pages, off_t first) {
        void* p = ::mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, first);
        REQUIRE(p != MAP_FAILED);
        for (size_t i = 0; i < pages; ++i) static_cast<volatile uint8_t*>(p)[i * page] = 1;  // fault it in
        return static_cast<std::byte*>(p);
    };
    std::byte* a = map(3, 0);  // pages 0, 1, 2
    std::byte* b = map(1, 0);  // page 0 again
    std::byte* c = map(1, 0);  // and again
    std::byte* d = map(1, static_cast<off_t>(2 * page));  // page 2 again
    auto mapcount = [&](uint64_t phys) {
        uint64_t n = 0;
        REQUIRE(::pread(counts, &n, sizeof n, static_cast<off_t>(phys / page * sizeof n)) == sizeof n);
        return n;
    };
    CHECK(mapcount(pagemap.physical_address(a)) == 3);
    CHECK(mapcount(pagemap.physical_address(a + page)) == 1);
    CHECK(mapcount(pagemap.physical_address(a + 2 * page)) == 2);
    CHECK(pagemap.physical_address(c) == pagemap.physical_address(a));
    CHECK(pagemap.physical_address(d) == pagemap.physical_address(a + 2 * page));
    ::munmap(d, page);
    CHECK(mapcount(pagemap.physical_address(a + 2 * page)) == 1);
    ::munmap(a, 3 * page);
    ::munmap(b, page);
    ::munmap(c, page);
    ::close(fd);
    ::close(counts);
}

TEST_CASE("pagemap: a page that is not resident is an error, not address 0") {
    if (!pfns_readable()) return;
    Pagemap pagemap("test", "/proc");
    size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    void* p = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    CHECK_THROWS_WITH(pagemap.physical_address(p), Catch::Contains("is not resident"));
    ::munmap(p, page);
}

TEST_CASE("pagemap: without CAP_SYS_ADMIN the hidden PFNs are reported, never returned as 0") {
    if (::geteuid() != 0) {
        // Already unprivileged: the real check runs here directly.
        Pagemap pagemap("test", "/proc");
        std::byte b{1};
        volatile std::byte* touch = &b;
        *touch = std::byte{2};
        CHECK_THROWS_AS(pagemap.physical_address(&b), UnsupportedError);
        return;
    }
    std::string out = baregpu::pci::testing::run_as_nobody([] {
        Pagemap pagemap("test", "/proc");
        static std::byte b{1};
        volatile std::byte* touch = &b;
        *touch = std::byte{2};
        try {
            uint64_t phys = pagemap.physical_address(&b);
            return "returned 0x" + std::to_string(phys);
        } catch (const UnsupportedError& e) {
            return std::string(e.what());
        }
    });
    CHECK_THAT(out, Catch::Contains("CAP_SYS_ADMIN"));
}

TEST_CASE("pagemap: a missing pagemap file names the path") {
    CHECK_THROWS_WITH(Pagemap("test", "/nonexistent-proc"), Catch::Contains("/nonexistent-proc/self/pagemap"));
}

}  // namespace pagemap_test
