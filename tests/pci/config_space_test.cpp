// The capability walk on hand-made config spaces: list order, Linux's termination rules, and
// the errors a broken or vanished device produces.
#include "base/error.hpp"
#include "drivers/pci/config_space.hpp"

#include <catch2/catch.hpp>

namespace config_space_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::pci;

namespace {

ConfigSpaceImage blank(size_t size = 256) {
    std::vector<uint8_t> bytes(size, 0);
    bytes[0] = 0x02;
    bytes[1] = 0x10;  // AMD
    bytes[cfg::kStatus] = cfg::kStatusCapList;
    return ConfigSpaceImage("test", std::move(bytes));
}

}  // namespace

TEST_CASE("standard capabilities are walked in list order") {
    ConfigSpaceImage c = blank();
    c.config_write8(cfg::kCapabilityList, 0x50);
    c.config_write16(0x50, 0x6401);  // PM -> 0x64
    c.config_write16(0x64, 0xa010);  // PCIe -> 0xa0
    c.config_write16(0xa0, 0x0005);  // MSI, end
    auto caps = c.capabilities();
    REQUIRE(caps.size() == 3);
    CHECK(caps[0].id == cfg::kCapPowerManagement);
    CHECK(caps[1].id == cfg::kCapPciExpress);
    CHECK(caps[1].offset == 0x64);
    CHECK(caps[2].id == cfg::kCapMsi);
    CHECK(c.find_capability(cfg::kCapMsi) == 0xa0);
    CHECK_FALSE(c.find_capability(cfg::kCapMsix).has_value());
}

TEST_CASE("no capability list when the status bit is clear") {
    ConfigSpaceImage c = blank();
    c.config_write8(cfg::kCapabilityList, 0x50);
    c.config_write16(0x50, 0x0001);
    c.config_write16(cfg::kStatus, 0);
    CHECK(c.capabilities().empty());
}

TEST_CASE("low pointer bits are ignored and a pointer below 0x40 ends the list") {
    ConfigSpaceImage c = blank();
    c.config_write8(cfg::kCapabilityList, 0x53);  // reserved low bits set
    c.config_write16(0x50, 0x2001);  // next 0x20: inside the header, ends the list
    auto caps = c.capabilities();
    REQUIRE(caps.size() == 1);
    CHECK(caps[0].offset == 0x50);
}

TEST_CASE("a looping capability list is a protocol error naming the offset") {
    ConfigSpaceImage c = blank();
    c.config_write8(cfg::kCapabilityList, 0x50);
    c.config_write16(0x50, 0x6001);
    c.config_write16(0x60, 0x5005);  // back to 0x50
    CHECK_THROWS_AS(c.capabilities(), ProtocolError);
    CHECK_THROWS_WITH(c.capabilities(), Catch::Contains("loops back to offset 0x50"));
}

TEST_CASE("an all-ones capability header means the device is gone") {
    ConfigSpaceImage c = blank();
    c.config_write8(cfg::kCapabilityList, 0x50);
    c.config_write16(0x50, 0xffff);
    CHECK_THROWS_AS(c.capabilities(), DeviceLostError);
}

TEST_CASE("extended capabilities from 0x100 with versions") {
    ConfigSpaceImage c = blank(4096);
    c.config_write32(0x100, 0x15010001);  // AER v1 -> 0x150
    c.config_write32(0x150, 0x20010015);  // Resizable BAR v1 -> 0x200
    c.config_write32(0x200, 0x0002000b);  // Vendor v2, end
    auto ext = c.extended_capabilities();
    REQUIRE(ext.size() == 3);
    CHECK(ext[0].id == cfg::kExtCapAer);
    CHECK(ext[1].id == cfg::kExtCapResizableBar);
    CHECK(ext[1].offset == 0x150);
    CHECK(ext[2].version == 2);
    CHECK(c.find_extended_capability(cfg::kExtCapResizableBar) == 0x150);
    CHECK(extended_capability_name(cfg::kExtCapResizableBar) == "Resizable BAR");
}

TEST_CASE("extended capabilities: zero header is an empty list, 256-byte space has none") {
    CHECK(blank(4096).extended_capabilities().empty());
    CHECK(blank(256).extended_capabilities().empty());
    ConfigSpaceImage loop = blank(4096);
    loop.config_write32(0x100, 0x10000001);  // next = 0x100: itself
    CHECK_THROWS_AS(loop.extended_capabilities(), ProtocolError);
}

TEST_CASE("config accesses must be naturally aligned and inside the space") {
    ConfigSpaceImage c = blank();
    CHECK_THROWS_WITH(c.config_read32(0x02), Catch::Contains("naturally aligned"));
    CHECK_THROWS(c.config_read8(256));
    CHECK_THROWS(c.config_read(0, 3));
    CHECK(c.config_read16(0) == 0x1002);
}

TEST_CASE("lspci dumps: rows parsed, malformed input refused with the line") {
    std::string dump =
        "03:00.0 VGA compatible controller: Some GPU\n"
        "00: 02 10 4c 74 07 04 10 00 c8 00 00 03 10 00 80 00\n";
    for (int row = 1; row < 16; ++row) {
        char line[64];
        std::snprintf(line, sizeof line, "%02x: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n", row * 16);
        dump += line;
    }
    ConfigSpaceImage image = ConfigSpaceImage::from_lspci_dump("navi", dump);
    CHECK(image.config_size() == 256);
    CHECK(image.config_read16(cfg::kDeviceId) == 0x744c);
    CHECK(image.config_read32(cfg::kRevisionId) >> 8 == 0x030000);

    CHECK_THROWS_WITH(ConfigSpaceImage::from_lspci_dump("short", "00: 02 10\n"), Catch::Contains("line 1"));
    std::string missing = dump.substr(0, dump.find("f0:"));
    CHECK_THROWS_WITH(ConfigSpaceImage::from_lspci_dump("missing", missing), Catch::Contains("no row for offset 0x0f0"));
    std::string bad = dump;
    bad.replace(bad.find("00: 02"), 6, "00: zz");
    CHECK_THROWS_AS(ConfigSpaceImage::from_lspci_dump("bad", bad), ProtocolError);
}

}  // namespace config_space_test
