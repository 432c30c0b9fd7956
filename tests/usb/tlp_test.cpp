// TLP words, completion decoding and protocol detection against the facts in
// tinygrad usb.py (pcie_cfg_req / pcie_request), which
// follow the PCI Express Base Specification's Fmt/Type and completion status codes.
#include "base/error.hpp"
#include "drivers/usb/detect.hpp"
#include "drivers/usb/libusb_backend.hpp"
#include "drivers/usb/scsi.hpp"
#include "drivers/usb/tlp.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <vector>

namespace tlp_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu::usb;

namespace {
std::array<std::byte, 8> bytes8(std::initializer_list<int> v) {
    std::array<std::byte, 8> b{};
    size_t i = 0;
    for (int x : v) b[i++] = std::byte(x);
    return b;
}
}  // namespace

TEST_CASE("config request fmt/type: type 0 on bus 0, type 1 beyond; reads 0x04/0x05, writes 0x44/0x45") {
    CHECK(tlp::config_fmt_type(false, 0) == 0x04);
    CHECK(tlp::config_fmt_type(false, 4) == 0x05);
    CHECK(tlp::config_fmt_type(true, 0) == 0x44);
    CHECK(tlp::config_fmt_type(true, 1) == 0x45);
}

TEST_CASE("config address: bus << 24 | dev << 19 | fn << 16 | reg & 0xffc") {
    CHECK(tlp::config_address(4, 0, 0, 0x10) == 0x04000010u);
    CHECK(tlp::config_address(1, 3, 2, 0x1a) == (1u << 24 | 3u << 19 | 2u << 16 | 0x18u));
    CHECK(tlp::config_address(0, 31, 7, 0xfff) == (31u << 19 | 7u << 16 | 0xffcu));
}

TEST_CASE("byte enables: ((1 << size) - 1) << (reg & 3)") {
    CHECK(tlp::byte_enables(4, 0) == 0x0f);
    CHECK(tlp::byte_enables(2, 2) == 0x0c);
    CHECK(tlp::byte_enables(1, 3) == 0x08);
    CHECK(tlp::byte_enables(1, 0) == 0x01);
}

TEST_CASE("posted: MWr and Msg only") {
    CHECK(tlp::is_posted(tlp::kMWr64));
    CHECK(tlp::is_posted(0x40));  // 3-DW MWr
    CHECK(tlp::is_posted(0x30));  // Msg, routed to root
    CHECK(tlp::is_posted(0x34));  // Msg, broadcast from root
    CHECK_FALSE(tlp::is_posted(tlp::kMRd64));
    CHECK_FALSE(tlp::is_posted(tlp::kCfgWr0));  // config writes are non-posted
    CHECK_FALSE(tlp::is_posted(tlp::kCfgRd1));
    CHECK(tlp::is_config(0x04));
    CHECK(tlp::is_config(0x45));
    CHECK_FALSE(tlp::is_config(0x20));
}

TEST_CASE("0xF0 OUT words: wValue = fmt_type | byte_en << 8, wIndex = mode, payload <III little-endian") {
    tlp::Request r{tlp::kMWr64, 0x0f, tlp::Mode::StreamWrite, 0x123456780ull, 16};
    CHECK(r.w_value() == 0x0f60);
    CHECK(r.w_index() == 1);
    const std::array<std::byte, 12> p = r.payload();
    const uint8_t expected[12] = {0x80, 0x67, 0x45, 0x23, 0x01, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00};
    for (int i = 0; i < 12; ++i) CHECK(static_cast<uint8_t>(p[i]) == expected[i]);
    const tlp::Request back = tlp::Request::decode(r.w_value(), r.w_index(), p);
    CHECK(back.fmt_type == r.fmt_type);
    CHECK(back.byte_enables == r.byte_enables);
    CHECK(back.address == r.address);
    CHECK(back.value == r.value);
    CHECK(back.mode == tlp::Mode::StreamWrite);

    tlp::Request cfg{tlp::config_fmt_type(true, 4), tlp::byte_enables(2, 2), tlp::Mode::Single, tlp::config_address(4, 0, 0, 0x06),
                     0xbeefu << 16};
    CHECK(cfg.w_value() == 0x0c45);
    CHECK(cfg.w_index() == 0);
    CHECK(cfg.describe().find("CfgWr1 bus 4") != std::string::npos);
}

TEST_CASE("completion: data dword at 0, status = (b[4] >> 5) & 7, transport status b[7]") {
    tlp::Completion c = tlp::decode_completion(bytes8({0x78, 0x56, 0x34, 0x12, 0x00, 0, 0, 0}));
    CHECK(c.data == 0x12345678u);
    CHECK(c.status == tlp::CompletionStatus::Successful);
    CHECK(c.transport_status == 0);
    CHECK(tlp::decode_completion(bytes8({0, 0, 0, 0, 0x20, 0, 0, 0})).status == tlp::CompletionStatus::UnsupportedRequest);
    CHECK(tlp::decode_completion(bytes8({0, 0, 0, 0, 0x40, 0, 0, 0})).status == tlp::CompletionStatus::ConfigRetry);
    CHECK(tlp::decode_completion(bytes8({0, 0, 0, 0, 0x80, 0, 0, 0})).status == tlp::CompletionStatus::CompleterAbort);
    // Bits 4:0 of byte 4 are not status.
    CHECK(tlp::decode_completion(bytes8({0, 0, 0, 0, 0x1f, 0, 0, 0})).status == tlp::CompletionStatus::Successful);
    CHECK(tlp::decode_completion(bytes8({0, 0, 0, 0, 0, 0, 0, 0x05})).transport_status == 5);
    CHECK(tlp::describe(tlp::CompletionStatus::UnsupportedRequest) == "Unsupported Request (UR)");
    CHECK(tlp::describe(tlp::CompletionStatus::CompleterAbort) == "Completer Abort (CA)");
    CHECK(tlp::describe(static_cast<tlp::CompletionStatus>(3)).find("reserved") != std::string::npos);
    // Round trip.
    const tlp::Completion ca{0xdeadbeef, tlp::CompletionStatus::CompleterAbort, 0};
    const tlp::Completion again = tlp::decode_completion(tlp::encode_completion(ca));
    CHECK(again.data == ca.data);
    CHECK(again.status == ca.status);
}

TEST_CASE("protocol detection from descriptors") {
    DeviceDescriptor custom{0x3801, 0x0001, "custom ASM2464", {{0, 0, 0xff, 0, 0, {}}}};
    CHECK(detect_protocol(custom) == BridgeProtocol::CustomFirmware);
    custom.vendor_id = 0xADD1;
    CHECK(detect_protocol(custom) == BridgeProtocol::CustomFirmware);
    custom.product = "USB 3.2 PCIe TinyEnclosure";  // the patched stock firmware's string, no mass storage
    CHECK_FALSE(detect_protocol(custom).has_value());

    DeviceDescriptor stock{0x174C, 0x2464, "ASM2464PD", {{0, 0, 0x08, 0x06, 0x50, {}}}};
    CHECK(detect_protocol(stock) == BridgeProtocol::Bot);
    stock.interfaces.push_back({0, 1, 0x08, 0x06, 0x62, {}});
    CHECK(detect_protocol(stock) == BridgeProtocol::Uas);

    DeviceDescriptor other{0x1234, 0x5678, "custom", {{0, 0, 0x08, 0x06, 0x62, {}}}};
    CHECK_FALSE(detect_protocol(other).has_value());
}

TEST_CASE("libusb: enumeration never throws; opening a bridge that is not there names it") {
    std::vector<BridgeInfo> bridges;
    CHECK_NOTHROW(bridges = enumerate_bridges());
    for (const BridgeInfo& b : bridges) CHECK_FALSE(b.location.empty());
    try {
        open_libusb("250-9.9");
        FAIL("opened a bridge at a bus-port that cannot exist");
    } catch (const baregpu::Error& e) {
        // Without libusb: UnsupportedError; with it: DeviceLostError (nothing there) or the
        // libusb_init failure of a machine without a USB stack. Each names the device.
        CHECK(e.device() == "usb:250-9.9");
    }
}

TEST_CASE("SCSI wire formats: BOT CBW/CSW, the UAS command IU, the vendor CDBs") {
    const std::array<uint8_t, 6> cdb = scsi::cdb_xdata_read(0xB450, 1);
    // >BBBHB: E4, len, addr >> 16, addr & 0xffff (big-endian), 0 with addr = (a & 0x1FFFF) | 0x500000.
    CHECK(cdb == std::array<uint8_t, 6>{0xE4, 0x01, 0x50, 0xB4, 0x50, 0x00});
    CHECK(scsi::cdb_xdata_write(0x1B450, 0x33) == std::array<uint8_t, 6>{0xE5, 0x33, 0x51, 0xB4, 0x50, 0x00});
    const std::array<uint8_t, 16> w = scsi::cdb_sram_write(0x0102030405060708ull, 8);
    CHECK(w[0] == 0x8A);
    CHECK(w[2] == 0x01);
    CHECK(w[9] == 0x08);
    CHECK(w[13] == 0x08);

    const auto cbw = scsi::encode_cbw(7, 255, true, cdb);
    const uint8_t head[15] = {0x55, 0x53, 0x42, 0x43, 7, 0, 0, 0, 255, 0, 0, 0, 0x80, 0, 6};  // "USBC", tag, length, IN, LUN 0, 6
    for (int i = 0; i < 15; ++i) CHECK(static_cast<uint8_t>(cbw[i]) == head[i]);
    CHECK(static_cast<uint8_t>(cbw[15]) == 0xE4);
    CHECK(cbw.size() == 31);

    std::array<std::byte, 13> csw{};
    const uint8_t ok[13] = {0x55, 0x53, 0x42, 0x53, 7, 0, 0, 0, 0, 0, 0, 0, 0};  // "USBS", tag 7, residue 0, passed
    for (int i = 0; i < 13; ++i) csw[i] = std::byte(ok[i]);
    CHECK(scsi::decode_csw("usb:test", csw, 7).tag == 7);
    CHECK_THROWS_WITH(scsi::decode_csw("usb:test", csw, 8), Catch::Contains("CSW tag 7, expected 8"));
    csw[12] = std::byte{1};
    CHECK_THROWS_WITH(scsi::decode_csw("usb:test", csw, 7), Catch::Contains("command failed"));
    csw[0] = std::byte{0};
    CHECK_THROWS_WITH(scsi::decode_csw("usb:test", csw, 7), Catch::Contains("signature"));

    const auto iu = scsi::encode_command_iu(3, cdb);
    CHECK(static_cast<uint8_t>(iu[0]) == 0x01);
    CHECK(static_cast<uint8_t>(iu[3]) == 3);
    CHECK(static_cast<uint8_t>(iu[16]) == 0xE4);
    CHECK(iu.size() == 32);
}

TEST_CASE("a user-supplied VID:PID (BAREGPU_USB_BRIDGE_IDS) makes an enclosure with its own IDs a bridge") {
    CHECK(parse_usb_ids("174c:2464,ADD1:0001") == std::vector<UsbId>{{0x174c, 0x2464}, {0xadd1, 0x0001}});
    CHECK(parse_usb_ids("").empty());
    CHECK_THROWS_WITH(parse_usb_ids("174c-2464"), Catch::Contains("BAREGPU_USB_BRIDGE_IDS") && Catch::Contains("174c-2464"));
    CHECK_THROWS_AS(parse_usb_ids("1:10000"), baregpu::Error);
    CHECK_THROWS_AS(parse_usb_ids("12g4:0001"), baregpu::Error);

    DeviceDescriptor d;
    d.vendor_id = 0x1d6b;  // an enclosure maker's IDs, flashed with the custom firmware
    d.product_id = 0x1234;
    d.product = "custom v0.1";
    d.interfaces.push_back({0, 0, 0xff, 0x00, 0x00, {}});
    ::unsetenv(kUserIdsVariable);
    CHECK_FALSE(is_bridge_id(0x1d6b, 0x1234));
    CHECK_FALSE(detect_protocol(d).has_value());
    ::setenv(kUserIdsVariable, "0bda:9210,1d6b:1234", 1);
    CHECK(is_bridge_id(0x1d6b, 0x1234));
    CHECK(detect_protocol(d) == BridgeProtocol::CustomFirmware);
    d.product = "USB3.2 PCIe enclosure";  // the stock firmware under the same IDs: mass storage
    d.interfaces = {{0, 0, 0x08, 0x06, 0x50, {}}};
    CHECK(detect_protocol(d) == BridgeProtocol::Bot);
    ::unsetenv(kUserIdsVariable);
    CHECK(is_bridge_id(0x3801, 0x0001));  // the built-in IDs stay
}

}  // namespace tlp_test
