// The sysfs backend end to end against a fake sysfs tree: what it reads (config, resource), what
// it maps (resourceN) and writes (enable, reset), and what it refuses. DMA uses the real
// /proc/self/pagemap, which needs root.
#include "base/error.hpp"
#include "drivers/pci/host_memory.hpp"
#include "drivers/pci/open.hpp"
#include "drivers/pci/pagemap.hpp"
#include "fake_kernel.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>

namespace sysfs_device_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::pci;
using namespace baregpu::pci::testing;

namespace {

const PciAddress kSysfsGpu{0, 0x03, 0x00, 0};

struct SysfsRig {
    FakeKernel kernel;
    explicit SysfsRig(const FakeFunction& f = navi31_like()) { kernel.add_function(kSysfsGpu, f); }
    std::unique_ptr<PciDevice> open() { return open_device(kSysfsGpu, kernel.options(Backend::Sysfs)); }
    std::string file(const std::string& name) const { return kernel.device_dir(kSysfsGpu) + "/" + name; }
};

bool is_root() { return ::geteuid() == 0; }

}  // namespace

TEST_CASE("sysfs: identity, capabilities and BARs of a fake Navi 31") {
    if (!is_root()) {
        WARN("skipped: the sysfs backend needs root (running as uid " << ::geteuid() << ")");
        return;
    }
    SysfsRig rig;
    auto dev = rig.open();
    CHECK(dev->backend() == "sysfs");
    CHECK(dev->name() == "0000:03:00.0");
    CHECK(dev->config_size() == 4096);

    PciIdentity id = dev->identity();
    CHECK(id.vendor_id == 0x1002);
    CHECK(id.device_id == 0x744c);
    CHECK(id.subsystem_vendor_id == 0x1002);
    CHECK(id.subsystem_id == 0x0e3b);
    CHECK(id.revision == 0xc8);
    CHECK(id.class_code == 0x030000);

    auto caps = dev->capabilities();
    REQUIRE(caps.size() == 5);
    CHECK(caps[0].id == cfg::kCapVendor);
    CHECK(caps[1].id == cfg::kCapPowerManagement);
    CHECK(caps[2].id == cfg::kCapPciExpress);
    CHECK(caps[2].offset == 0x64);
    CHECK(caps[3].id == cfg::kCapMsi);
    CHECK(caps[4].id == cfg::kCapMsix);
    auto ext = dev->extended_capabilities();
    REQUIRE(ext.size() == 2);
    CHECK(ext[0].id == cfg::kExtCapAer);
    CHECK(ext[1].id == cfg::kExtCapResizableBar);
    CHECK(dev->supports_function_reset());

    const BarInfo& bar0 = dev->bar_info(0);
    CHECK(bar0.type == BarType::Memory64);
    CHECK(bar0.prefetchable);
    CHECK(bar0.size == (256u << 20));
    CHECK(bar0.bus_base == 0x7c00000000ull);
    CHECK(dev->bar_info(1).type == BarType::None);  // upper half of BAR0
    const BarInfo& bar2 = dev->bar_info(2);
    CHECK(bar2.type == BarType::Memory64);
    CHECK(bar2.size == (2u << 20));
    CHECK(bar2.bus_base == 0x7c10000000ull);
    const BarInfo& bar4 = dev->bar_info(4);
    CHECK(bar4.type == BarType::Io);
    CHECK(bar4.size == 256);
    CHECK(bar4.bus_base == 0xe000);
    const BarInfo& bar5 = dev->bar_info(5);
    CHECK(bar5.type == BarType::Memory32);
    CHECK_FALSE(bar5.prefetchable);
    CHECK(bar5.size == (1u << 20));
    CHECK(bar5.bus_base == 0xfcc00000u);
    CHECK_THROWS_WITH(dev->bar(4), Catch::Contains("cannot map BAR4: I/O ports"));
}

TEST_CASE("sysfs: enable is written at open and given back at close; it warns about the missing IOMMU") {
    if (!is_root()) {
        WARN("skipped: the sysfs backend needs root");
        return;
    }
    SysfsRig rig;
    {
        auto dev = rig.open();
        CHECK(rig.kernel.read_file(rig.file("enable")) == "1");
        CHECK_THAT(dev->warning(), Catch::Contains("no IOMMU protection") && Catch::Contains("anywhere in RAM"));
    }
    CHECK(rig.kernel.read_file(rig.file("enable")) == "0");

    // Enabled by someone else already: left alone, also at close.
    rig.kernel.write_file(rig.file("enable"), "2\n");
    { auto dev = rig.open(); }
    CHECK(rig.kernel.read_file(rig.file("enable")) == "2\n");
}

TEST_CASE("sysfs: MMIO through the resourceN mapping lands in the file, config writes in `config`") {
    if (!is_root()) {
        WARN("skipped: the sysfs backend needs root");
        return;
    }
    SysfsRig rig;
    auto dev = rig.open();
    MmioRegion& regs = dev->bar(5);
    CHECK(regs.size() == (1u << 20));
    CHECK(regs.direct() != nullptr);
    regs.write32(BarOffset(0x2000), 0xdeadbeef);
    regs.write64(BarOffset(0xffff8), 0x0123456789abcdefull);
    auto bytes = rig.kernel.read_bytes(rig.file("resource5"), 0x2000, 4);
    CHECK(bytes == std::vector<uint8_t>{0xef, 0xbe, 0xad, 0xde});
    auto tail = rig.kernel.read_bytes(rig.file("resource5"), 0xffff8, 8);
    CHECK(tail == std::vector<uint8_t>{0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01});
    CHECK_THROWS_WITH(regs.read32(BarOffset(1u << 20)), Catch::Contains("outside"));

    // The other direction: the "device" changes a register, the mapping sees it.
    {
        int fd = ::open(rig.file("resource5").c_str(), O_RDWR);
        REQUIRE(fd >= 0);
        uint32_t v = 0x11223344;
        REQUIRE(::pwrite(fd, &v, 4, 0x40) == 4);
        ::close(fd);
    }
    CHECK(regs.read32(BarOffset(0x40)) == 0x11223344);
    CHECK(&dev->bar(5) == &regs);  // mapped once

    MmioRegion& vram = dev->bar(0);
    CHECK(vram.size() == (256u << 20));
    vram.write32(BarOffset(0x0fff0000), 0xcafef00d);
    CHECK(rig.kernel.read_bytes(rig.file("resource0"), 0x0fff0000, 4) == std::vector<uint8_t>{0x0d, 0xf0, 0xfe, 0xca});

    dev->set_bus_master(true);
    CHECK((rig.kernel.read_bytes(rig.file("config"), cfg::kCommand, 1)[0] & cfg::kCommandMaster) != 0);
    dev->set_bus_master(false);
    CHECK((rig.kernel.read_bytes(rig.file("config"), cfg::kCommand, 1)[0] & cfg::kCommandMaster) == 0);
}

TEST_CASE("sysfs: function reset writes `reset`; without the file it is unsupported; no interrupts") {
    if (!is_root()) {
        WARN("skipped: the sysfs backend needs root");
        return;
    }
    SysfsRig rig;
    auto dev = rig.open();
    CHECK(rig.kernel.read_file(rig.file("reset")).empty());
    dev->reset_function();
    CHECK(rig.kernel.read_file(rig.file("reset")) == "1");
    CHECK_THROWS_WITH(dev->enable_interrupts(InterruptKind::Msi, 1),
                      Catch::Contains("the sysfs backend has no interrupt path; drivers poll"));
    CHECK_THROWS_AS(dev->enable_interrupts(InterruptKind::MsiX, 1), UnsupportedError);
    dev.reset();

    FakeFunction no_reset = navi31_like();
    no_reset.reset_file = false;
    SysfsRig rig2(no_reset);
    auto dev2 = rig2.open();
    CHECK_THROWS_AS(dev2->reset_function(), UnsupportedError);
    CHECK_THROWS_WITH(dev2->reset_function(), Catch::Contains("/reset does not exist"));
}

TEST_CASE("sysfs: what it refuses, and why") {
    if (!is_root()) {
        WARN("skipped: the sysfs backend needs root");
        return;
    }
    SECTION("a missing resource file") {
        FakeFunction f = navi31_like();
        f.resource.clear();
        SysfsRig rig(f);
        CHECK_THROWS_WITH(rig.open(), Catch::Contains("0000:03:00.0: ") && Catch::Contains("/resource does not exist"));
    }
    SECTION("a malformed resource file names the line") {
        FakeFunction f = navi31_like();
        f.resource = "0x0000007c00000000 0x0000007c0fffffff 0x000000000014220c\nbogus\n";
        SysfsRig rig(f);
        CHECK_THROWS_AS(rig.open(), ProtocolError);
        CHECK_THROWS_WITH(rig.open(), Catch::Contains("line 2"));
    }
    SECTION("a BAR whose size is not a power of two") {
        FakeFunction f = navi31_like();
        f.resource.replace(f.resource.find("0x0000007c0fffffff"), 18, "0x0000007c0ffffffe");
        SysfsRig rig(f);
        CHECK_THROWS_WITH(rig.open(), Catch::Contains("BAR0") && Catch::Contains("power of two"));
    }
    SECTION("config space cut at 64 bytes, as a non-root reader sees it") {
        FakeFunction f = navi31_like();
        f.config.resize(64);
        SysfsRig rig(f);
        CHECK_THROWS_AS(rig.open(), UnsupportedError);
        CHECK_THROWS_WITH(rig.open(), Catch::Contains("64 bytes") && Catch::Contains("root"));
    }
    SECTION("a function bound to a kernel driver") {
        SysfsRig rig;
        rig.kernel.bind(kSysfsGpu, "amdgpu");
        CHECK_THROWS_WITH(rig.open(), Catch::Contains("bound to amdgpu") && Catch::Contains("driver/unbind"));
    }
    SECTION("a function that does not exist") {
        SysfsRig rig;
        CHECK_THROWS_WITH(open_device(PciAddress{0, 4, 0, 0}, rig.kernel.options(Backend::Sysfs)),
                          Catch::Contains("0000:04:00.0") && Catch::Contains("does not exist"));
    }
    SECTION("a resourceN file shorter than its BAR") {
        FakeFunction f = navi31_like();
        f.resource_files = {{5, 4096}};
        SysfsRig rig(f);
        auto dev = rig.open();
        CHECK_THROWS_AS(dev->bar(5), ProtocolError);
        CHECK_THROWS_WITH(dev->bar(5), Catch::Contains("resource5 is 0x1000 bytes"));
    }
    SECTION("not root") {
        SysfsRig rig;
        OpenOptions options = rig.kernel.options(Backend::Sysfs);
        std::string out = run_as_nobody([&] {
            try {
                open_device(kSysfsGpu, options);
                return std::string("opened");
            } catch (const UnsupportedError& e) {
                return std::string(e.what());
            }
        });
        CHECK_THAT(out, Catch::Contains("the sysfs backend needs root"));
        CHECK(rig.kernel.read_file(rig.file("enable")) == "0\n");  // nothing touched
    }
}

TEST_CASE("sysfs: the ownership lock is taken first and names the owner") {
    if (!is_root()) {
        WARN("skipped: the sysfs backend needs root");
        return;
    }
    SysfsRig rig;
    auto dev = rig.open();
    try {
        rig.open();
        FAIL("a second open of an owned device succeeded");
    } catch (const BusyError& e) {
        CHECK(e.owner_pid() == ::getpid());
    }
    // The lock comes before anything else: even a vanished function reports the owner first.
    std::filesystem::remove_all(rig.kernel.device_dir(kSysfsGpu));
    CHECK_THROWS_AS(rig.open(), BusyError);
    dev.reset();
    CHECK_THROWS_WITH(rig.open(), Catch::Contains("does not exist"));
}

TEST_CASE("sysfs: DMA buffers carry the physical addresses of their pages") {
    if (!is_root()) {
        WARN("skipped: physical addresses from /proc/self/pagemap need root");
        return;
    }
    SysfsRig rig;
    auto dev = rig.open();
    auto buf = dev->alloc_dma(5 * 4096);
    REQUIRE(buf->size() == 5 * 4096);
    Pagemap pagemap("test", "/proc");
    for (uint64_t off = 0; off < buf->size(); off += 4096) {
        uint64_t phys = pagemap.physical_address(buf->cpu().data() + off);
        CHECK(buf->bus_address(off).value() == phys);
        CHECK(buf->bus_address(off + 123).value() == phys + 123);
    }
    if (!buf->contiguous()) CHECK(buf->pages().size() == 5);

    // A device that reaches only the first 4 KiB of the bus cannot use any of this memory.
    dev->set_dma_address_bits(12);
    CHECK_THROWS_AS(dev->alloc_dma(4096), UnsupportedError);
    CHECK_THROWS_WITH(dev->alloc_dma(4096), Catch::Contains("at or above the device's DMA limit 0x1000"));
}

TEST_CASE("sysfs: a 2 MiB huge page is one contiguous bus range") {
    if (!is_root()) {
        WARN("skipped: physical addresses from /proc/self/pagemap need root");
        return;
    }
    if (HostMemory::free_huge_pages() == 0) {
        WARN("skipped: no free 2 MiB huge pages (HugePages_Free is 0; reserve some with "
             "`echo 8 | sudo tee /proc/sys/vm/nr_hugepages`)");
        return;
    }
    SysfsRig rig;
    auto dev = rig.open();
    auto buf = dev->alloc_dma(1, PageSize::k2M);
    REQUIRE(buf->size() == (2u << 20));
    CHECK(buf->contiguous());
    CHECK(buf->bus_address().is_aligned(2u << 20));
    Pagemap pagemap("test", "/proc");
    // Every 4 KiB inside the huge page sits at its offset from the start, physically.
    for (uint64_t off = 0; off < buf->size(); off += 256 * 1024) {
        CHECK(pagemap.physical_address(buf->cpu().data() + off) == buf->bus_address().value() + off);
    }
    CHECK(buf->bus_address((2u << 20) - 1).value() == buf->bus_address().value() + (2u << 20) - 1);
}

}  // namespace sysfs_device_test
