// BAR sizing rules (PCI Local Bus Spec 3.0 6.2.5.1) on hand-made register values.
#include "base/error.hpp"
#include "drivers/pci/bar.hpp"

#include <catch2/catch.hpp>

namespace bar_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::pci;

TEST_CASE("32-bit memory BAR: size is the lowest writable address bit") {
    // 1 MiB non-prefetchable at 0xfe000000: all-ones reads back 0xfff00000.
    BarInfo bar = decode_bar("t", 0, 0xfe000000, 0xfff00000);
    CHECK(bar.type == BarType::Memory32);
    CHECK_FALSE(bar.prefetchable);
    CHECK(bar.size == 0x100000);
    CHECK(bar.bus_base == 0xfe000000);
    CHECK(bar.describe() == "BAR0: 32-bit memory, 1 MiB");
}

TEST_CASE("64-bit prefetchable BARs combine both registers") {
    // 256 MiB at 0x3800_0000_0000 (a typical GPU VRAM aperture without resizable BAR).
    BarInfo small = decode_bar("t", 0, 0x0000000c, 0xf000000c, 0x00003800, 0xffffffff);
    CHECK(small.type == BarType::Memory64);
    CHECK(small.prefetchable);
    CHECK(small.size == 256ull << 20);
    CHECK(small.bus_base == 0x380000000000ull);

    // 32 GiB: no writable bit in the low register at all (a resized RX 7900 XTX BAR0).
    BarInfo large = decode_bar("t", 0, 0x0000000c, 0x0000000c, 0x00000040, 0xfffffff8);
    CHECK(large.size == 32ull << 30);
    CHECK(large.bus_base == 0x4000000000ull);
    CHECK(large.describe() == "BAR0: 64-bit prefetchable memory, 32 GiB");
}

TEST_CASE("I/O BARs: 16-bit decoders read back zero upper bits") {
    BarInfo io = decode_bar("t", 4, 0x0000e001, 0x0000ff01);
    CHECK(io.type == BarType::Io);
    CHECK(io.size == 256);
    CHECK(io.bus_base == 0xe000);
    BarInfo io32 = decode_bar("t", 4, 0x0000e001, 0xffffff81);
    CHECK(io32.size == 128);
}

TEST_CASE("unimplemented BARs read back zero") {
    BarInfo none = decode_bar("t", 3, 0, 0);
    CHECK(none.type == BarType::None);
    CHECK(none.size == 0);
}

TEST_CASE("impossible BARs are refused with the BAR named") {
    // A 64-bit BAR in the last slot has no upper half.
    CHECK_THROWS_WITH(decode_bar("dev", 5, 0x4, 0xfff00004), Catch::Contains("BAR5 claims to be 64-bit"));
    // Memory type 0b11 is reserved.
    CHECK_THROWS_AS(decode_bar("dev", 0, 0x6, 0xfff00006), ProtocolError);
    // Address bits with a hole are not a size mask.
    CHECK_THROWS_WITH(decode_bar("dev", 1, 0, 0xff0f0000), Catch::Contains("not a contiguous address mask"));
    // Type bits but not one writable address bit.
    CHECK_THROWS_WITH(decode_bar("dev", 2, 0x8, 0x8), Catch::Contains("no address bit is writable"));
}

TEST_CASE("format_size picks binary units") {
    CHECK(format_size(0) == "0 B");
    CHECK(format_size(4096) == "4 KiB");
    CHECK(format_size(3ull << 29) == "1.5 GiB");
}

}  // namespace bar_test
