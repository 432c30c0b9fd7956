// drivers/usb and the usb PciDevice backend against the strict simulated ASM2464
// (drivers/sim/asm24) with QEMU's edu device in the slot: the bring-up, TLP routing, completion
// status handling and retries, the SRAM engine and windows, the latency model, and the requests
// the firmware refuses (each asserted with the violation it records).
#include "base/error.hpp"
#include "drivers/pci/usb_pci_device.hpp"
#include "drivers/sim/asm24/sim_asm24.hpp"
#include "drivers/sim/edu.hpp"
#include "drivers/usb/asm24_controller.hpp"
#include "drivers/usb/asm24_protocol.hpp"

#include <catch2/catch.hpp>
#include <cstring>

namespace sim_bridge_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using sim::asm24::FaultKind;
using sim::asm24::SimAsm24Bridge;
namespace a24 = usb::asm24;

namespace {

std::unique_ptr<SimAsm24Bridge> make_bridge(bool with_edu = true, SimAsm24Bridge::Options o = {}) {
    std::unique_ptr<pci::sim::SimDeviceModel> edu;
    if (with_edu) {
        sim::EduDevice::Options eo;
        eo.pci_express = true;
        eo.memory_bar_bytes = 1 << 20;  // BAR2: 64-bit prefetchable memory
        edu = std::make_unique<sim::EduDevice>(eo);
    }
    return std::make_unique<SimAsm24Bridge>(o, std::move(edu));
}

bool has_violation(const SimAsm24Bridge& b, const std::string& text) {
    for (const auto& v : b.violations()) {
        if (v.describe().find(text) != std::string::npos) return true;
    }
    return false;
}

std::string violations(const SimAsm24Bridge& b) {
    std::string out;
    for (const auto& v : b.violations()) out += v.describe() + "\n";
    return out;
}

}  // namespace

TEST_CASE("the usb backend numbers the bridges, assigns BARs and reaches the endpoint's registers") {
    auto owned = make_bridge();
    SimAsm24Bridge* bridge = owned.get();
    REQUIRE(bridge->ltssm() == 0);  // untrained until the driver powers the slot
    std::unique_ptr<pci::PciDevice> dev = pci::open_usb_device(std::move(owned));
    CHECK(bridge->ltssm() == a24::kLtssmL0);
    CHECK(dev->name() == "usb:sim");
    CHECK(dev->backend() == "usb");
    const pci::PciIdentity id = dev->identity();
    CHECK(id.vendor_id == sim::edu::kVendorId);
    CHECK(id.device_id == sim::edu::kDeviceId);
    const pci::BarInfo& bar0 = dev->bar_info(0);
    CHECK(bar0.bus_base >= pci::kUsbMemBase);
    CHECK(dev->bar_info(2).prefetchable);
    CHECK(dev->bar_info(2).bus_base >= pci::kUsbPrefMemBase);
    CHECK_FALSE(dev->link_capabilities().bar_mmap);
    CHECK_FALSE(dev->link_capabilities().host_dma);
    CHECK(dev->bar(0).direct() == nullptr);

    const usb::TransferCounters before = *pci::usb_transfer_counters(*dev);
    CHECK(dev->bar(0).read32(BarOffset(sim::edu::kRegId)) == sim::edu::kIdValue);
    const usb::TransferCounters after_read = *pci::usb_transfer_counters(*dev);
    CHECK(after_read.control - before.control == 1);  // 0xF0 mode 2
    CHECK(after_read.bulk_in - before.bulk_in == 1);  // the data
    dev->bar(0).write32(BarOffset(sim::edu::kRegLiveness), 0x12345678);
    CHECK(dev->bar(0).read32(BarOffset(sim::edu::kRegLiveness)) == ~0x12345678u);
    CHECK(violations(*bridge).empty());
}

TEST_CASE("writes to a prefetchable BAR are batched into one stream; repeated values to a write-once BAR are skipped") {
    auto owned = make_bridge();
    SimAsm24Bridge* bridge = owned.get();
    pci::UsbOpenOptions o;
    o.write_once_bars = {0};
    std::unique_ptr<pci::PciDevice> dev = pci::open_usb_device(std::move(owned), o);
    const usb::TransferCounters start = *pci::usb_transfer_counters(*dev);
    for (uint32_t i = 0; i < 64; ++i) dev->bar(2).write32(BarOffset(i * 4), 0xa0000000u + i);
    // Nothing sent yet; a read flushes the batch first, in order.
    CHECK(pci::usb_transfer_counters(*dev)->bulk_out == start.bulk_out);
    CHECK(dev->bar(2).read32(BarOffset(63 * 4)) == 0xa0000000u + 63);
    const usb::TransferCounters batched = *pci::usb_transfer_counters(*dev);
    CHECK(batched.bulk_out - start.bulk_out == 1);
    CHECK(batched.bytes_out - start.bytes_out == 256);

    dev->bar(0).write32(BarOffset(sim::edu::kRegLiveness), 7);
    dev->bar(0).write32(BarOffset(sim::edu::kRegLiveness), 7);
    dev->bar(0).write32(BarOffset(sim::edu::kRegLiveness), 8);
    CHECK(pci::usb_coalesced_writes(*dev) == 1);
    CHECK(dev->bar(0).read32(BarOffset(sim::edu::kRegLiveness)) == ~8u);
    // Any other write in between (new work) means the repeated value goes out again.
    dev->bar(2).write32(BarOffset(0), 1);
    dev->bar(0).write32(BarOffset(sim::edu::kRegLiveness), 8);
    CHECK(pci::usb_coalesced_writes(*dev) == 1);
    CHECK(violations(*bridge).empty());
}

TEST_CASE("the endpoint DMAs into the bridge SRAM window and the host reads it through the SRAM engine") {
    auto owned = make_bridge();
    SimAsm24Bridge* bridge = owned.get();
    std::unique_ptr<pci::PciDevice> dev = pci::open_usb_device(std::move(owned));
    dev->set_bus_master(true);
    // Fill edu's buffer from the SRAM (RAM -> edu), then copy it back to another SRAM slot.
    std::vector<std::byte> pattern(4096);
    for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = std::byte(i * 7 + 3);
    const pci::LinkCapabilities link = dev->link_capabilities();
    REQUIRE(link.dma_windows.size() == 3);
    CHECK(link.dma_windows[0].bus_address == a24::kGpuSram);
    dev->dma_window_write(BusAddress(a24::kGpuSram), pattern);
    CHECK(std::memcmp(bridge->sram().data(), pattern.data(), pattern.size()) == 0);
    pci::MmioRegion& r = dev->bar(0);
    const uint64_t buffer = sim::edu::kBufferAddress;
    r.write64(BarOffset(sim::edu::kRegDmaSource), a24::kGpuSram);
    r.write64(BarOffset(sim::edu::kRegDmaDestination), buffer);
    r.write64(BarOffset(sim::edu::kRegDmaCount), pattern.size());
    r.write64(BarOffset(sim::edu::kRegDmaCommand), sim::edu::kDmaStart);
    for (int i = 0; i < 100 && (r.read64(BarOffset(sim::edu::kRegDmaCommand)) & sim::edu::kDmaStart); ++i) dev->delay(std::chrono::microseconds(10));
    r.write64(BarOffset(sim::edu::kRegDmaSource), buffer);
    r.write64(BarOffset(sim::edu::kRegDmaDestination), a24::kGpuSram + 2 * a24::kSramSlotBytes);
    r.write64(BarOffset(sim::edu::kRegDmaCount), pattern.size());
    r.write64(BarOffset(sim::edu::kRegDmaCommand), sim::edu::kDmaStart | sim::edu::kDmaToRam);
    for (int i = 0; i < 100 && (r.read64(BarOffset(sim::edu::kRegDmaCommand)) & sim::edu::kDmaStart); ++i) dev->delay(std::chrono::microseconds(10));
    CHECK(violations(*bridge).empty());

    // Host side: the same bytes through the SRAM bulk engine.
    std::vector<std::byte> back(4096);
    dev->dma_window_read(BusAddress(a24::kGpuSram + 2 * a24::kSramSlotBytes), back);
    CHECK(back == pattern);
    // The small windows go through XDATA: the GPU's view at 0x820000 is the host's 0xA000.
    const std::byte fence[8] = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}, std::byte{6}, std::byte{7}, std::byte{8}};
    dev->dma_window_write(BusAddress(a24::kGpuSysBuf + 0x800), fence);
    std::byte fence_back[8]{};
    dev->dma_window_read(BusAddress(a24::kGpuSysBuf + 0x800), fence_back);
    CHECK(std::memcmp(fence, fence_back, 8) == 0);
    CHECK_THROWS_WITH(dev->dma_window_write(BusAddress(a24::kGpuSram + 512), fence), Catch::Contains("16 KB slots"));
    CHECK_THROWS_WITH(dev->dma_window_read(BusAddress(0x100000), fence_back), Catch::Contains("outside the bridge's DMA windows"));

    // DMA outside the windows is refused and recorded.
    r.write64(BarOffset(sim::edu::kRegDmaSource), 0x100000);
    r.write64(BarOffset(sim::edu::kRegDmaDestination), buffer);
    r.write64(BarOffset(sim::edu::kRegDmaCount), 64);
    r.write64(BarOffset(sim::edu::kRegDmaCommand), sim::edu::kDmaStart);
    for (int i = 0; i < 100 && (r.read64(BarOffset(sim::edu::kRegDmaCommand)) & sim::edu::kDmaStart); ++i) dev->delay(std::chrono::microseconds(10));
    CHECK(has_violation(*bridge, "outside the bridge SRAM windows"));
}

TEST_CASE("SRAM engine: padded to 512-byte sectors, slots of 16 KB, read back through bulk IN") {
    auto owned = make_bridge(false);
    SimAsm24Bridge* bridge = owned.get();
    usb::Asm24Controller c(std::move(owned));
    std::vector<std::byte> data(1000);
    for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i ^ 0x5a);
    std::memset(bridge->sram().data() + 3 * a24::kSramSlotBytes, 0xee, 1024);
    c.sram_write(3, data);
    const std::byte* at = bridge->sram().data() + 3 * a24::kSramSlotBytes;
    CHECK(std::memcmp(at, data.data(), data.size()) == 0);
    CHECK(at[1000] == std::byte{0});  // the pad to 1024 bytes is zeros
    CHECK(at[1023] == std::byte{0});
    CHECK(at[1024] == std::byte{0});  // beyond the wire image: untouched (was never set)
    std::vector<std::byte> back(1000);
    c.sram_read(3, back);
    CHECK(back == data);
    CHECK_THROWS_AS(c.sram_write(31, std::vector<std::byte>(32 * 1024)), Error);  // would run past slot 31
    CHECK(violations(*bridge).empty());
}

TEST_CASE("non-posted TLPs: CRS and transport errors are retried (bounded), UR and CA are errors naming the request") {
    auto owned = make_bridge();
    SimAsm24Bridge* bridge = owned.get();
    usb::Asm24Controller c(std::move(owned));
    c.bring_link_up();

    // Before the bridges are numbered nothing routes to bus 4: Unsupported Request.
    try {
        c.config_read(4, 0, 0, 0, 4);
        FAIL("expected UR");
    } catch (const ProtocolError& e) {
        CHECK(std::string(e.what()).find("Unsupported Request (UR)") != std::string::npos);
        CHECK(std::string(e.what()).find("CfgRd1 bus 4") != std::string::npos);
        CHECK(std::string(e.what()).find("usb:sim") != std::string::npos);
    }
    CHECK(c.config_read(0, 0, 0, 0, 2) == 0x1b21);  // bridge 0 answers on the root bus

    bridge->inject({FaultKind::ConfigRetry, 3});
    CHECK(c.config_read(0, 0, 0, 0, 2) == 0x1b21);
    CHECK(c.counters().tlp_retries == 3);
    bridge->inject({FaultKind::TransportError, 2});
    CHECK(c.config_read(0, 0, 0, 0, 2) == 0x1b21);
    CHECK(c.counters().tlp_retries == 5);
    bridge->inject({FaultKind::TransportError, 20});
    CHECK_THROWS_WITH(c.config_read(0, 0, 0, 0, 2), Catch::Contains("no completion after 10 tries"));
    bridge->clear_faults();
    bridge->inject({FaultKind::CompleterAbort, 1});
    CHECK_THROWS_WITH(c.config_read(0, 0, 0, 0, 2), Catch::Contains("Completer Abort (CA)"));
    CHECK(c.config_read(0, 0, 0, 0, 2) == 0x1b21);

    // Bus numbers written piecemeal: the bridge refuses (tinygrad: all three in one dword).
    CHECK_THROWS_WITH(c.config_write(0, 0, 0, 0x19, 1, 1), Catch::Contains("Completer Abort"));
    CHECK(has_violation(*bridge, "bus numbers written with a 1-byte access"));
}

TEST_CASE("the simulated firmware stalls malformed requests and records why") {
    auto owned = make_bridge(false);
    SimAsm24Bridge* bridge = owned.get();
    std::vector<std::byte> buf(512);

    // Nothing before the interface is claimed.
    CHECK_THROWS_AS(bridge->control(usb::kVendorIn, a24::kReqXdataRead, 0xB450, 0, std::span(buf.data(), 1), a24::kControlTimeout),
                    ProtocolError);
    CHECK(has_violation(*bridge, "before interface 0 was claimed"));
    bridge->claim_interface(0, 0);

    SECTION("unknown vendor request") {
        CHECK_THROWS_AS(bridge->control(usb::kVendorOut, 0xE9, 0, 0, {}, a24::kControlTimeout), ProtocolError);
        CHECK(has_violation(*bridge, "unknown vendor request"));
    }
    SECTION("XDATA read longer than 255 bytes") {
        CHECK_THROWS_AS(bridge->control(usb::kVendorIn, a24::kReqXdataRead, 0, 0, std::span(buf.data(), 256), a24::kControlTimeout),
                        ProtocolError);
        CHECK(has_violation(*bridge, "1..255 bytes per request"));
    }
    SECTION("bulk transfer with nothing armed") {
        CHECK_THROWS_AS(bridge->bulk(a24::kBulkOut, buf, a24::kBulkOutTimeout), ProtocolError);
        CHECK(has_violation(*bridge, "nothing armed"));
    }
    SECTION("bulk length differs from the armed length") {
        bridge->control(usb::kVendorOut, a24::kReqSramArm, 2, 0 | 1 << 8, {}, a24::kControlTimeout);  // 2 sectors = 1024 bytes
        CHECK_THROWS_AS(bridge->bulk(a24::kBulkOut, buf, a24::kBulkOutTimeout), ProtocolError);
        CHECK(has_violation(*bridge, "wants 1024 bytes"));
    }
    SECTION("SRAM arm past the last slot") {
        CHECK_THROWS_AS(bridge->control(usb::kVendorOut, a24::kReqSramArm, 64, 31 | 2 << 8, {}, a24::kControlTimeout), ProtocolError);
        CHECK(has_violation(*bridge, "the engine has 32 slots"));
    }
    SECTION("TLP payload that is not 12 bytes, an unknown mode, an unknown fmt/type") {
        CHECK_THROWS_AS(bridge->control(usb::kVendorOut, a24::kReqTlp, 0x0f04, 0, std::span(buf.data(), 8), a24::kTlpTimeout), ProtocolError);
        CHECK(has_violation(*bridge, "expected 12"));
        CHECK_THROWS_AS(bridge->control(usb::kVendorOut, a24::kReqTlp, 0x0f04, 3, std::span(buf.data(), 12), a24::kTlpTimeout), ProtocolError);
        CHECK(has_violation(*bridge, "TLP mode 3"));
        CHECK_THROWS_AS(bridge->control(usb::kVendorOut, a24::kReqTlp, 0x0f7f, 0, std::span(buf.data(), 12), a24::kTlpTimeout), ProtocolError);
        CHECK(has_violation(*bridge, "unsupported TLP fmt/type 0x7f"));
    }
    SECTION("completion read with no non-posted TLP outstanding") {
        CHECK_THROWS_AS(bridge->control(usb::kVendorIn, a24::kReqTlp, 0, 0, std::span(buf.data(), 8), a24::kControlTimeout), ProtocolError);
        CHECK(has_violation(*bridge, "no non-posted TLP outstanding"));
    }
    SECTION("a stream whose length is not what was armed") {
        usb::tlp::Request r{usb::tlp::kMWr64, 0x0f, usb::tlp::Mode::StreamWrite, 0x10000000, 4};
        auto p = r.payload();
        bridge->control(usb::kVendorOut, a24::kReqTlp, r.w_value(), r.w_index(), p, a24::kTlpTimeout);
        CHECK_THROWS_AS(bridge->bulk(a24::kBulkOut, std::span(buf.data(), 8), a24::kBulkOutTimeout), ProtocolError);
        CHECK(has_violation(*bridge, "wants 16 bytes"));
    }
}

TEST_CASE("the stock firmware's SCSI protocol is detected and refused with UnsupportedError naming it") {
    SimAsm24Bridge::Options o;
    o.vendor_id = 0x174C;
    o.product_id = 0x2464;
    o.product = "ASM2464PD";
    o.interfaces = SimAsm24Bridge::Options::Interfaces::Uas;
    CHECK_THROWS_WITH(usb::Asm24Controller(make_bridge(false, o)), Catch::Contains("SCSI over UAS") && Catch::Contains("usb:sim"));
    o.interfaces = SimAsm24Bridge::Options::Interfaces::Bot;
    CHECK_THROWS_AS(usb::Asm24Controller(make_bridge(false, o)), UnsupportedError);
    o.vendor_id = 0x1234;
    CHECK_THROWS_AS(usb::Asm24Controller(make_bridge(false, o)), ProtocolError);
}

TEST_CASE("faults: a stall is a ProtocolError, link down is DeviceLostError with the LTSSM state, a disconnect is permanent") {
    auto owned = make_bridge();
    SimAsm24Bridge* bridge = owned.get();
    usb::Asm24Controller c(std::move(owned));
    bridge->inject({FaultKind::LinkDown});
    CHECK_THROWS_WITH(c.bring_link_up(), Catch::Contains("LTSSM state 0x00") && Catch::Contains("usb:sim"));
    bridge->clear_faults();
    c.bring_link_up();
    bridge->inject({FaultKind::Stall, 1});
    CHECK_THROWS_WITH(c.xdata_read8(a24::kXdataLtssm), Catch::Contains("stalled"));
    CHECK(c.link_up());
    bridge->inject({FaultKind::Disconnect, 1, 2});
    c.xdata_read8(a24::kXdataLtssm);
    c.xdata_read8(a24::kXdataLtssm);
    CHECK_THROWS_AS(c.xdata_read8(a24::kXdataLtssm), DeviceLostError);
    CHECK_THROWS_WITH(c.xdata_read8(a24::kXdataLtssm), Catch::Contains("usb:sim") && Catch::Contains("gone"));
}

TEST_CASE("latency model: 100 us per round trip, 10 Gb/s of bulk data, asynchronous transfers overlap their round trips") {
    auto owned = make_bridge(false);
    SimAsm24Bridge* bridge = owned.get();
    usb::Asm24Controller c(std::move(owned));
    uint64_t t0 = bridge->now_ns();
    c.xdata_read8(a24::kXdataLtssm);
    CHECK(bridge->now_ns() - t0 == 100'000);
    std::vector<std::byte> data(256 * 1024);
    t0 = bridge->now_ns();
    c.sram_write(0, data);  // arm (control) + bulk OUT
    const uint64_t one = bridge->now_ns() - t0;
    CHECK(one == 100'000 + 100'000 + static_cast<uint64_t>(256 * 1024 / 1.25));

    // Eight asynchronous 256 KB writes: the wire is the bottleneck, not the round trips.
    std::vector<std::vector<std::byte>> wires(8, std::vector<std::byte>(256 * 1024));
    std::vector<usb::UsbBackend::Tag> tags;
    t0 = bridge->now_ns();
    for (size_t i = 0; i < wires.size(); ++i) tags.push_back(c.sram_write_async((i % 2) * 16, wires[i]));
    for (auto t : tags) c.reap(t);
    const uint64_t eight = bridge->now_ns() - t0;
    CHECK(eight < 8 * one);
    CHECK(eight >= static_cast<uint64_t>(8 * 256 * 1024 / 1.25));
}

TEST_CASE("an empty slot behind the bridge is DeviceLostError naming the device and the bus address") {
    CHECK_THROWS_WITH(pci::open_usb_device(make_bridge(false)), Catch::Contains("usb:sim") && Catch::Contains("no function at 04:00.0"));
}

}  // namespace sim_bridge_test
