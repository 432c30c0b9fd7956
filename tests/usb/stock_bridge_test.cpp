// drivers/usb's stock-firmware path (Asm24ScsiController over BOT and UAS) against the simulated
// ASM2464 running ASMedia's stock firmware (drivers/sim/asm24/stock_firmware.cpp) with QEMU's edu
// device in the slot: bring-up through the XDATA TLP engine, SRAM writes as WRITE(16), and each
// rule the model keeps — a malformed CBW or IU, a wrong tag, XDATA outside the window, a data phase
// of the wrong length, a skipped setup step — refused, and recovery from a stalled pipe and a
// command the firmware never answers without losing the device.
#include "base/error.hpp"
#include "drivers/pci/usb_pci_device.hpp"
#include "drivers/sim/asm24/sim_asm24.hpp"
#include "tests/usb/bridge_violations.hpp"
#include "drivers/sim/edu.hpp"
#include "drivers/usb/asm24_protocol.hpp"
#include "drivers/usb/asm24_scsi_controller.hpp"
#include "drivers/usb/scsi.hpp"
#include "drivers/usb/scsi_transport.hpp"

#include <catch2/catch.hpp>
#include <cstring>

namespace stock_bridge_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using usb_test::has_violation;
using usb_test::violations;
using sim::asm24::FaultKind;
using sim::asm24::SimAsm24Bridge;
namespace a24 = usb::asm24;
namespace scsi = usb::scsi;
using Interfaces = SimAsm24Bridge::Options::Interfaces;

namespace {

SimAsm24Bridge::Options stock(Interfaces i) {
    SimAsm24Bridge::Options o;
    o.interfaces = i;
    o.vendor_id = a24::kAsmediaVendor;
    o.product_id = a24::kStockProduct2464;
    o.product = "ASM2464PD";
    o.link_trained = true;
    return o;
}

std::unique_ptr<SimAsm24Bridge> make_bridge(Interfaces i, bool with_edu = true) {
    std::unique_ptr<pci::sim::SimDeviceModel> edu;
    if (with_edu) {
        sim::EduDevice::Options eo;
        eo.pci_express = true;
        eo.memory_bar_bytes = 1 << 20;
        edu = std::make_unique<sim::EduDevice>(eo);
    }
    return std::make_unique<SimAsm24Bridge>(stock(i), std::move(edu));
}

// The bridge claimed for SCSI and a transport on it, as Asm24ScsiController sets them up, for
// tests that send what the driver never would.
struct Raw {
    std::unique_ptr<SimAsm24Bridge> bridge;
    usb::TransferCounters counters;
    std::unique_ptr<usb::ScsiTransport> transport;
    explicit Raw(Interfaces which) : bridge(make_bridge(which)) {
        if (which == Interfaces::Uas) {
            bridge->claim_interface(0, 1);
            const std::array<uint8_t, 3> eps{0x02, 0x81, 0x83};
            transport = usb::make_uas_transport(*bridge, counters, bridge->alloc_streams(31, eps));
        } else {
            bridge->claim_interface(0, 0);
            transport = usb::make_bot_transport(*bridge, counters);
        }
    }
    usb::ScsiCommand run(usb::ScsiCommand c) {
        transport->execute(std::span(&c, 1));
        return c;
    }
    void xdata_write(uint16_t at, uint8_t v) {
        const usb::ScsiCommand c = run(usb::ScsiCommand::of(scsi::cdb_xdata_write(at, v)));
        CHECK(c.status == 0);
    }
    uint8_t xdata_read(uint16_t at) {
        std::byte b{};
        usb::ScsiCommand c = usb::ScsiCommand::of(scsi::cdb_xdata_read(at, 1));
        c.data_in = std::span(&b, 1);
        c = run(c);
        CHECK(c.status == 0);
        return static_cast<uint8_t>(b);
    }
};

const char* name_of(Interfaces i) { return i == Interfaces::Uas ? "uas" : "bot"; }

}  // namespace

TEST_CASE("a stock-firmware bridge over UAS and BOT: the usb backend reaches the endpoint through the XDATA TLP engine") {
    for (Interfaces which : {Interfaces::Uas, Interfaces::Bot}) {
        CAPTURE(which == Interfaces::Uas ? "uas" : "bot");
        auto owned = make_bridge(which);
        SimAsm24Bridge* bridge = owned.get();
        std::unique_ptr<pci::PciDevice> dev = pci::open_usb_device(std::move(owned));
        INFO(violations(*bridge));
        CHECK(pci::usb_bridge_firmware(*dev)->find(which == Interfaces::Uas ? "UAS" : "BOT") != std::string::npos);
        CHECK(dev->identity().vendor_id == sim::edu::kVendorId);
        CHECK(dev->bar(0).read32(BarOffset(sim::edu::kRegId)) == sim::edu::kIdValue);
        dev->bar(0).write32(BarOffset(sim::edu::kRegLiveness), 0x12345678);
        CHECK(dev->bar(0).read32(BarOffset(sim::edu::kRegLiveness)) == ~0x12345678u);
        CHECK_FALSE(dev->link_capabilities().dma_windows.at(0).read_trigger != 0);  // no SRAM read engine
        CHECK(violations(*bridge).empty());
    }
}

TEST_CASE("stock firmware: a CDB the firmware does not know, and XDATA outside its window, are CHECK CONDITION with sense") {
    for (Interfaces which : {Interfaces::Uas, Interfaces::Bot}) {
        CAPTURE(name_of(which));
        Raw raw(which);
        usb::ScsiCommand c = raw.run(usb::ScsiCommand::of(std::array<uint8_t, 6>{0xE9, 0, 0, 0, 0, 0}));
        CHECK(c.status == scsi::kStatusCheckCondition);
        CHECK(c.sense.key == scsi::kSenseIllegalRequest);
        CHECK(c.sense.asc == 0x20);  // invalid command operation code
        CHECK(scsi::describe(c.sense).find("invalid command operation code") != std::string::npos);
        // XDATA addresses travel as (a & 0x1FFFF) | 0x500000: 0x400000 is outside the window.
        std::array<uint8_t, 6> out_of_window = scsi::cdb_xdata_write(0x1234, 1);
        out_of_window[2] = 0x40;
        c = raw.run(usb::ScsiCommand::of(out_of_window));
        CHECK(c.status == scsi::kStatusCheckCondition);
        CHECK(c.sense.asc == 0x24);  // invalid field in CDB
        CHECK(has_violation(*raw.bridge, "outside the XDATA window"));
        CHECK(raw.xdata_read(0x1234) == 0);  // nothing was written, and the device still answers
    }
}

TEST_CASE("stock firmware over BOT: an invalid CBW stalls both pipes until Reset Recovery, which the transport performs") {
    Raw raw(Interfaces::Bot);
    // A CBW of 30 bytes: refused (BOT 1.0 6.6.1), and every transfer after it stalls, clear halt or not.
    std::array<std::byte, 30> short_cbw{};
    CHECK_THROWS_AS(raw.bridge->bulk(0x02, short_cbw, std::chrono::milliseconds(100)), ProtocolError);
    CHECK(has_violation(*raw.bridge, "invalid CBW"));
    raw.bridge->clear_halt(0x81);
    raw.bridge->clear_halt(0x02);
    std::array<std::byte, 31> cbw = scsi::encode_cbw(1, 0, false, scsi::cdb_xdata_write(0x1000, 5));
    CHECK_THROWS_AS(raw.bridge->bulk(0x02, cbw, std::chrono::milliseconds(100)), ProtocolError);
    // A wrong signature is as invalid; the transport recovers by itself and reports what failed.
    raw.bridge->control(scsi::kBotResetRequestType, scsi::kBotResetRequest, 0, 0, {}, std::chrono::milliseconds(100));
    cbw[1] = std::byte{0x00};  // "USBC" -> "U\0BC"
    CHECK_THROWS_AS(raw.bridge->bulk(0x02, cbw, std::chrono::milliseconds(100)), ProtocolError);
    CHECK_THROWS_WITH(raw.xdata_write(0x1000, 5), Catch::Contains("recovered") && Catch::Contains("Bulk-Only Mass Storage Reset"));
    raw.xdata_write(0x1000, 5);  // the device is usable again
    CHECK(raw.xdata_read(0x1000) == 5);
    CHECK(raw.counters.recoveries == 1);
}

TEST_CASE("stock firmware over BOT: a data phase longer than the host allowed is a phase error, recovered") {
    Raw raw(Interfaces::Bot);
    raw.xdata_write(0x1000, 7);
    // 0xE4 for 8 bytes with a CBW that allows 4 (Hi < Di, BOT 1.0 6.7 case 7).
    std::array<std::byte, 4> in{};
    usb::ScsiCommand c = usb::ScsiCommand::of(scsi::cdb_xdata_read(0x1000, 8));
    c.data_in = in;
    CHECK_THROWS_WITH(raw.run(c), Catch::Contains("phase error") && Catch::Contains("recovered"));
    CHECK(has_violation(*raw.bridge, "phase error"));
    CHECK(raw.xdata_read(0x1000) == 7);
    // A WRITE(16) whose data phase is not its sectors' length: the same.
    std::vector<std::byte> data(256);
    usb::ScsiCommand w = usb::ScsiCommand::of(scsi::cdb_sram_write(0, 1));
    w.data_out = data;
    CHECK_THROWS_WITH(raw.run(w), Catch::Contains("phase error"));
}

TEST_CASE("stock firmware over UAS: a malformed IU, a tag beyond the streams and a wrong-length data phase are refused") {
    Raw raw(Interfaces::Uas);
    const std::chrono::milliseconds t{200};
    // An IU that is not a command IU: the firmware answers a RESPONSE IU, INVALID INFORMATION UNIT.
    std::array<std::byte, 32> iu = scsi::encode_command_iu(3, scsi::cdb_xdata_write(0x1000, 1));
    iu[0] = std::byte{0x09};
    std::array<std::byte, 64> status{};
    auto a = raw.bridge->submit_bulk(0x04, iu, t, 0);
    auto b = raw.bridge->submit_bulk(0x83, status, t, 3);
    raw.bridge->reap(a);
    const size_t n = raw.bridge->reap(b);
    scsi::Iu got = scsi::decode_iu("usb:sim", std::span(status.data(), n));
    CHECK(got.id == scsi::IuId::Response);
    CHECK(got.response == scsi::kRcInvalidIu);
    CHECK(has_violation(*raw.bridge, "not a command IU"));
    // Tag 0 has no stream: the same answer.
    iu = scsi::encode_command_iu(0, scsi::cdb_xdata_write(0x1000, 1));
    raw.bridge->clear_violations();
    a = raw.bridge->submit_bulk(0x04, iu, t, 0);
    raw.bridge->reap(a);
    CHECK(has_violation(*raw.bridge, "tag 0"));
    // The host's IU decoding refuses what is not a sense, response or ready IU.
    std::array<std::byte, 16> bogus{};
    bogus[0] = std::byte{0x01};
    CHECK_THROWS_AS(scsi::decode_iu("usb:sim", bogus), ProtocolError);
    // A WRITE(16) of one sector with 256 bytes of data: CHECK CONDITION, invalid field in CDB.
    std::vector<std::byte> data(256);
    usb::ScsiCommand w = usb::ScsiCommand::of(scsi::cdb_sram_write(0, 1));
    w.data_out = data;
    w = raw.run(w);
    CHECK(w.status == scsi::kStatusCheckCondition);
    CHECK(w.sense.asc == 0x24);
    CHECK(has_violation(*raw.bridge, "with a data phase of 256"));
}

TEST_CASE("stock firmware: a stalled pipe and a command the firmware never answers are recovered without losing the device") {
    for (Interfaces which : {Interfaces::Uas, Interfaces::Bot}) {
        CAPTURE(name_of(which));
        Raw raw(which);
        raw.xdata_write(0x1000, 9);
        raw.bridge->inject({FaultKind::Stall, 1, 0});
        CHECK_THROWS_WITH(raw.xdata_write(0x1000, 10), Catch::Contains("recovered"));
        CHECK(raw.xdata_read(0x1000) == 9);  // the stalled command did not run; the device answers
        raw.bridge->inject({FaultKind::CommandTimeout, 1, 0});
        CHECK_THROWS_AS(raw.xdata_write(0x1000, 11), TimeoutError);
        CHECK(has_violation(*raw.bridge, "stops answering"));
        raw.xdata_write(0x1000, 12);
        CHECK(raw.xdata_read(0x1000) == 12);
        CHECK(raw.counters.recoveries == 2);
    }
}

TEST_CASE("stock firmware: the TLP engine launches only after the controller init and with 0xB254 armed; WRITE(16) lands only re-armed") {
    for (Interfaces which : {Interfaces::Uas, Interfaces::Bot}) {
        CAPTURE(name_of(which));
        Raw raw(which);
        // A config read of the first bridge's vendor ID, without tinygrad's init writes: nothing is sent.
        auto launch = [&] {
            raw.xdata_write(a24::kTlpFmtType, 0x04);
            raw.xdata_write(a24::kTlpByteEnables, 0x0f);
            for (int i = 0; i < 4; ++i) raw.xdata_write(static_cast<uint16_t>(a24::kTlpAddressLow + i), 0);
            raw.xdata_write(a24::kTlpArm, a24::kTlpArmValue);
            raw.xdata_write(a24::kTlpStatus, a24::kTlpLaunch);
            return raw.xdata_read(a24::kTlpStatus);
        };
        CHECK(launch() == a24::kTlpLaunch);  // never done
        CHECK(has_violation(*raw.bridge, "before the controller init"));
        for (const a24::XdataInit& w : a24::kStockInit)
            for (unsigned i = 0; i < w.length; ++i) raw.xdata_write(static_cast<uint16_t>(w.address + i), w.bytes[i]);
        CHECK(launch() == a24::kTlpDone);
        // Without 0xB254 = 0x0F before the launch: nothing is sent.
        raw.xdata_write(a24::kTlpStatus, a24::kTlpLaunch);
        CHECK(raw.xdata_read(a24::kTlpStatus) == a24::kTlpLaunch);
        CHECK(has_violation(*raw.bridge, "not 0x0F"));

        // WRITE(16) after the re-arm lands; a second one without the fixups and re-arm does not.
        std::vector<std::byte> data(512, std::byte{0x5a});
        raw.xdata_write(a24::kScsiWriteRearm, 0);
        usb::ScsiCommand w = usb::ScsiCommand::of(scsi::cdb_sram_write(2, 1));
        w.data_out = data;
        raw.run(w);
        CHECK(raw.bridge->sram()[1024] == std::byte{0x5a});
        std::fill(data.begin(), data.end(), std::byte{0x33});
        raw.run(w);
        CHECK(raw.bridge->sram()[1024] == std::byte{0x5a});
        CHECK(has_violation(*raw.bridge, "not re-armed"));
    }
}

TEST_CASE("stock firmware: the custom firmware's vendor requests are stalled; the driver picks the SCSI path from the descriptors") {
    Raw raw(Interfaces::Bot);
    std::array<std::byte, 1> b{};
    CHECK_THROWS_AS(raw.bridge->control(usb::kVendorIn, a24::kReqXdataRead, a24::kXdataLtssm, 0, b, std::chrono::milliseconds(100)),
                    ProtocolError);
    CHECK(has_violation(*raw.bridge, "does not know"));
    // Through the usb backend the same bridge is driven over SCSI, and SRAM writes land where the GPU sees them.
    auto owned = make_bridge(Interfaces::Uas);
    SimAsm24Bridge* bridge = owned.get();
    std::unique_ptr<pci::PciDevice> dev = pci::open_usb_device(std::move(owned));
    std::vector<std::byte> data(100 * 1024);
    for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i * 7);
    dev->dma_window_write(BusAddress(a24::kGpuSram + 4096), data);  // two WRITE(16)s of 64 KB and 36 KB
    CHECK(std::equal(data.begin(), data.end(), bridge->sram().begin() + 4096));
    // Read back through the XDATA alias of the SRAM's first 4 KB; beyond it the host cannot read.
    std::vector<std::byte> back(4096);
    dev->dma_window_read(BusAddress(a24::kGpuSram), back);
    CHECK(std::equal(back.begin(), back.end(), bridge->sram().begin()));
    CHECK_THROWS_AS(dev->dma_window_read(BusAddress(a24::kGpuSram + 4096), back), UnsupportedError);
    CHECK(violations(*bridge).empty());
}

}  // namespace stock_bridge_test
