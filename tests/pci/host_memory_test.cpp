#include "base/error.hpp"
#include "drivers/pci/host_memory.hpp"

#include <catch2/catch.hpp>
#include <cstdint>

namespace host_memory_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::pci;

TEST_CASE("4 KiB DMA memory is page aligned, rounded up and writable") {
    HostMemory m = HostMemory::allocate("test", 5000, PageSize::k4K, false);
    CHECK(m.bytes().size() == 8192);
    CHECK(reinterpret_cast<uintptr_t>(m.bytes().data()) % 4096 == 0);
    m.bytes()[8191] = std::byte{0x5a};
    CHECK(m.bytes()[8191] == std::byte{0x5a});
}

TEST_CASE("2 MiB huge pages when the system has them") {
    if (HostMemory::free_huge_pages() == 0) {
        WARN("skipped: no free 2 MiB huge pages (HugePages_Free is 0; reserve some with "
             "`echo 4 | sudo tee /proc/sys/vm/nr_hugepages`)");
        // Without pages the allocation must fail with a message that says how to get them.
        CHECK_THROWS_WITH(HostMemory::allocate("test", 1, PageSize::k2M, false), Catch::Contains("nr_hugepages"));
        return;
    }
    HostMemory m = HostMemory::allocate("test", 1, PageSize::k2M, false);
    CHECK(m.bytes().size() == (2u << 20));
    CHECK(reinterpret_cast<uintptr_t>(m.bytes().data()) % (2u << 20) == 0);
    m.bytes()[(2u << 20) - 1] = std::byte{1};
}

}  // namespace host_memory_test
