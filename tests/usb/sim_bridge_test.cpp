// drivers/usb and the usb PciDevice backend against the strict simulated ASM2464
// (drivers/sim/asm24) with QEMU's edu device in the slot: the bring-up, TLP routing, completion
// status handling and retries, the SRAM engine and windows, the latency model, and what the custom
// firmware does with requests it cannot serve (never a stall: asm2464pd-firmware main.c), each
// asserted with the violation it records.
#include "base/error.hpp"
#include "drivers/pci/usb_pci_device.hpp"
#include "drivers/sim/asm24/sim_asm24.hpp"
#include "tests/usb/bridge_violations.hpp"
#include "drivers/sim/edu.hpp"
#include "drivers/usb/asm24_controller.hpp"
#include "drivers/usb/asm24_protocol.hpp"

#include <catch2/catch.hpp>
#include <cstring>

namespace sim_bridge_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using usb_test::has_violation;
using usb_test::violations;
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
    r.write32(BarOffset(sim::edu::kRegDmaCount), pattern.size());
    r.write32(BarOffset(sim::edu::kRegDmaCommand), sim::edu::kDmaStart);
    for (int i = 0; i < 100 && (r.read32(BarOffset(sim::edu::kRegDmaCommand)) & sim::edu::kDmaStart); ++i) dev->delay(std::chrono::microseconds(10));
    r.write64(BarOffset(sim::edu::kRegDmaSource), buffer);
    r.write64(BarOffset(sim::edu::kRegDmaDestination), a24::kGpuSram + 2 * a24::kSramSlotBytes);
    r.write32(BarOffset(sim::edu::kRegDmaCount), pattern.size());
    r.write32(BarOffset(sim::edu::kRegDmaCommand), sim::edu::kDmaStart | sim::edu::kDmaToRam);
    for (int i = 0; i < 100 && (r.read32(BarOffset(sim::edu::kRegDmaCommand)) & sim::edu::kDmaStart); ++i) dev->delay(std::chrono::microseconds(10));
    INFO(violations(*bridge));
    CHECK(violations(*bridge).empty());

    // Host side: the same bytes through the SRAM bulk engine. The engine sends nothing until the
    // device writes the CQ window after the arm (asm2464pd-firmware README.md): edu writes it.
    std::vector<std::byte> back(4096);
    const BusAddress slot2(a24::kGpuSram + 2 * a24::kSramSlotBytes);
    CHECK_THROWS_WITH(dev->dma_window_read(slot2, back), Catch::Contains("needs dma_window_read_arm"));
    REQUIRE(link.dma_windows[0].read_trigger == a24::kGpuCqBuf);
    dev->dma_window_read_arm(slot2, back.size());
    r.write64(BarOffset(sim::edu::kRegDmaSource), buffer);
    r.write64(BarOffset(sim::edu::kRegDmaDestination), a24::kGpuCqBuf + 12);
    r.write32(BarOffset(sim::edu::kRegDmaCount), 4);
    r.write32(BarOffset(sim::edu::kRegDmaCommand), sim::edu::kDmaStart | sim::edu::kDmaToRam);
    for (int i = 0; i < 100 && (r.read32(BarOffset(sim::edu::kRegDmaCommand)) & sim::edu::kDmaStart); ++i) dev->delay(std::chrono::microseconds(10));
    dev->dma_window_read(slot2, back);
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
    r.write32(BarOffset(sim::edu::kRegDmaCount), 64);
    r.write32(BarOffset(sim::edu::kRegDmaCommand), sim::edu::kDmaStart);
    for (int i = 0; i < 100 && (r.read32(BarOffset(sim::edu::kRegDmaCommand)) & sim::edu::kDmaStart); ++i) dev->delay(std::chrono::microseconds(10));
    CHECK(has_violation(*bridge, "outside the bridge SRAM windows"));
}

TEST_CASE("SRAM engine: padded to 512-byte sectors, slots of 16 KB, read back through bulk IN") {
    auto owned = make_bridge(false);
    SimAsm24Bridge* bridge = owned.get();
    usb::Asm24Controller c(std::move(owned));
    std::vector<std::byte> data(1000);
    for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i ^ 0x5a);
    std::memset(bridge->sram().data() + 3 * a24::kSramSlotBytes, 0xee, 1024);
    c.sram_write(3 * 16384, data);
    const std::byte* at = bridge->sram().data() + 3 * a24::kSramSlotBytes;
    CHECK(std::memcmp(at, data.data(), data.size()) == 0);
    CHECK(at[1000] == std::byte{0});  // the pad to 1024 bytes is zeros
    CHECK(at[1023] == std::byte{0});
    CHECK(at[1024] == std::byte{0});  // beyond the wire image: untouched (was never set)
    CHECK_THROWS_AS(c.sram_write(31 * 16384, std::vector<std::byte>(32 * 1024)), Error);  // would run past slot 31
    CHECK(violations(*bridge).empty());
    // XDATA 0xF000.. shows the first 4 KB of the SRAM (asm2464pd-firmware app/README.md,
    // pcie/test_sram_verify.py's spot check after a 0xF2 write).
    c.sram_write(0, data);
    std::vector<std::byte> alias(16);
    c.xdata_read(a24::kXdataBulkWindow, alias);
    CHECK(std::memcmp(alias.data(), data.data(), alias.size()) == 0);
}

TEST_CASE("an SRAM read is released only by a device write to PCIe 0x822000 after the arm") {
    // asm2464pd-firmware README.md: "The SRAM read needs a write from the PCIe device side at
    // 0x822000 to trigger the read"; pcie/test_sram_verify.py arms, SDMA-writes, then reads.
    auto owned = make_bridge(false);
    SimAsm24Bridge* bridge = owned.get();
    usb::Asm24Controller c(std::move(owned));
    std::vector<std::byte> data(1024, std::byte{0x5a});
    c.sram_write(0, data);
    std::vector<std::byte> back(1024);
    const uint64_t t0 = bridge->now_ns();
    CHECK_THROWS_AS(c.sram_read(0, back), TimeoutError);
    CHECK(has_violation(*bridge, "no device write to PCIe 0x822000 since the arm"));
    CHECK(bridge->counters().timeouts == 1);
    // The host waited out its bulk IN timeout on the modelled clock, and got nothing.
    CHECK(bridge->now_ns() - t0 >= static_cast<uint64_t>(std::chrono::nanoseconds(a24::kBulkInTimeout).count()));
    CHECK(back == std::vector<std::byte>(1024));
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

TEST_CASE("the simulated firmware never stalls: it answers short, ACKs, drops or lets the host time out, and records why") {
    // asm2464pd-firmware handmade/src/main.c handle_usb_control sends no STALL for any request.
    SimAsm24Bridge::Options o;
    auto owned = make_bridge(false, o);
    SimAsm24Bridge* bridge = owned.get();
    std::vector<std::byte> buf(1024);

    // Nothing before the interface is claimed (the host's USB stack refuses).
    CHECK_THROWS_AS(bridge->control(usb::kVendorIn, a24::kReqXdataRead, 0xB450, 0, std::span(buf.data(), 1), a24::kControlTimeout),
                    ProtocolError);
    CHECK(has_violation(*bridge, "before interface 0 was claimed"));
    bridge->claim_interface(0, 0);

    SECTION("unknown vendor request: ACKed without a data stage, never answered with one") {
        CHECK(bridge->control(usb::kVendorOut, 0xE9, 0, 0, {}, a24::kControlTimeout) == 0);
        CHECK(has_violation(*bridge, "unknown vendor request (ignored by the firmware)"));
        CHECK_THROWS_AS(bridge->control(usb::kVendorIn, 0xE9, 0, 0, std::span(buf.data(), 4), a24::kControlTimeout), TimeoutError);
    }
    SECTION("XDATA read longer than the firmware's buffer: the reply is 512 bytes on USB 3") {
        CHECK(bridge->control(usb::kVendorIn, a24::kReqXdataRead, 0, 0, std::span(buf.data(), 1024), a24::kControlTimeout) == 512);
    }
    SECTION("bulk transfer with nothing armed: the host times out") {
        CHECK_THROWS_AS(bridge->bulk(a24::kBulkOut, std::span(buf.data(), 512), a24::kBulkOutTimeout), TimeoutError);
        CHECK(has_violation(*bridge, "nothing armed"));
    }
    SECTION("bulk length differs from the armed length") {
        bridge->control(usb::kVendorOut, a24::kReqSramArm, 2, 0 | 1 << 8, {}, a24::kControlTimeout);  // 2 sectors = 1024 bytes
        CHECK_THROWS_AS(bridge->bulk(a24::kBulkOut, std::span(buf.data(), 512), a24::kBulkOutTimeout), TimeoutError);
        CHECK(has_violation(*bridge, "wants 1024 bytes"));
    }
    SECTION("SRAM arm past the last slot is dropped") {
        CHECK_NOTHROW(bridge->control(usb::kVendorOut, a24::kReqSramArm, 64, 31 | 2 << 8, {}, a24::kControlTimeout));
        CHECK(has_violation(*bridge, "the engine has 32 slots"));
        CHECK_FALSE(bridge->armed());
    }
    SECTION("TLP payload that is not 12 bytes, mode 3, an unknown fmt/type: dropped") {
        CHECK_NOTHROW(bridge->control(usb::kVendorOut, a24::kReqTlp, 0x0f04, 0, std::span(buf.data(), 8), a24::kTlpTimeout));
        CHECK(has_violation(*bridge, "expected 12"));
        CHECK_NOTHROW(bridge->control(usb::kVendorOut, a24::kReqTlp, 0x0f04, 3, std::span(buf.data(), 12), a24::kTlpTimeout));
        CHECK(has_violation(*bridge, "TLP mode 3"));
        CHECK_NOTHROW(bridge->control(usb::kVendorOut, a24::kReqTlp, 0x0f7f, 0, std::span(buf.data(), 12), a24::kTlpTimeout));
        CHECK(has_violation(*bridge, "unsupported TLP fmt/type 0x7f"));
    }
    SECTION("completion read with no non-posted TLP outstanding: 8 bytes, status 0xFF") {
        std::fill(buf.begin(), buf.end(), std::byte{0x11});
        CHECK(bridge->control(usb::kVendorIn, a24::kReqTlp, 0, 0, std::span(buf.data(), 8), a24::kTlpTimeout) == 8);
        CHECK(buf[7] == std::byte{0xFF});
        CHECK(buf[0] == std::byte{0});
        CHECK(has_violation(*bridge, "no non-posted TLP outstanding"));
    }
    SECTION("a new TLP drops a stream whose data has not come") {
        usb::tlp::Request r{usb::tlp::kMWr64, 0x0f, usb::tlp::Mode::StreamWrite, 0x10000000, 4};
        auto p = r.payload();
        bridge->control(usb::kVendorOut, a24::kReqTlp, r.w_value(), r.w_index(), p, a24::kTlpTimeout);
        CHECK(bridge->armed());
        bridge->control(usb::kVendorOut, a24::kReqTlp, r.w_value(), r.w_index(), p, a24::kTlpTimeout);
        CHECK(has_violation(*bridge, "the stream is dropped"));
    }
    SECTION("an SRAM arm survives the TLPs that run the GPU between it and its bulk IN") {
        bridge->control(usb::kVendorOut, a24::kReqSramArm, 2 | a24::kSramArmRead, 0 | 1 << 8, {}, a24::kControlTimeout);
        usb::tlp::Request r{usb::tlp::kMWr64, 0x0f, usb::tlp::Mode::StreamWrite, 0x10000000, 1};
        auto p = r.payload();
        bridge->control(usb::kVendorOut, a24::kReqTlp, r.w_value(), r.w_index(), p, a24::kTlpTimeout);
        bridge->bulk(a24::kBulkOut, std::span(buf.data(), 4), a24::kBulkOutTimeout);
        REQUIRE(bridge->armed());
        CHECK(bridge->armed()->endpoint == a24::kBulkIn);
        CHECK(bridge->armed()->bytes == 1024);
        CHECK_FALSE(bridge->armed()->ready);  // nothing wrote the CQ window yet
    }
}

TEST_CASE("a USB 2 fallback answers 64 bytes per XDATA read, and the controller reads on") {
    SimAsm24Bridge::Options o;
    o.usb2 = true;
    auto owned = make_bridge(false, o);
    SimAsm24Bridge* bridge = owned.get();
    usb::Asm24Controller c(std::move(owned));
    std::vector<std::byte> data(1024);
    for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i * 3);
    c.sram_write(0, data);
    std::vector<std::byte> back(255);
    const uint64_t before = c.counters().control;
    c.xdata_read(a24::kXdataBulkWindow, back);  // through the 0xF000 alias of the SRAM
    CHECK(std::memcmp(back.data(), data.data(), back.size()) == 0);
    CHECK(c.counters().control - before == 4);  // 64 + 64 + 64 + 63
    CHECK(violations(*bridge).empty());
}

TEST_CASE("the completion read waits as long as tinygrad's 5 s; a slower completer is a TimeoutError") {
    auto owned = make_bridge(false);
    SimAsm24Bridge* bridge = owned.get();
    usb::Asm24Controller c(std::move(owned));
    c.bring_link_up();
    bridge->inject({FaultKind::SlowCompletion, 1, 2000});  // the firmware polls up to 500000 times (main.c)
    CHECK(c.config_read(0, 0, 0, 0, 2) == 0x1b21);
    bridge->inject({FaultKind::SlowCompletion, 1, 6000});
    CHECK_THROWS_AS(c.config_read(0, 0, 0, 0, 2), TimeoutError);
}

TEST_CASE("streams cost one PCIe TLP per dword: about 3.6 MB/s written, 1.8 MB/s read; a 64-bit write is two TLPs") {
    // asm2464pd-firmware README.md and handmade/src/pcie_pio.h (pcie_write_chunk, pcie_read_chunk).
    auto owned = make_bridge();
    SimAsm24Bridge* bridge = owned.get();
    std::unique_ptr<pci::PciDevice> dev = pci::open_usb_device(std::move(owned));
    pci::MmioRegion& bar2 = dev->bar(2);
    std::vector<std::byte> block(64 * 1024, std::byte{7});
    uint64_t t0 = bridge->now_ns();
    uint64_t tlps = bridge->counters().tlps;
    bar2.write_block(BarOffset(0), block);
    const uint64_t write_ns = bridge->now_ns() - t0;
    CHECK(bridge->counters().tlps - tlps == block.size() / 4);
    const double write_mb_s = static_cast<double>(block.size()) / static_cast<double>(write_ns) * 1e3;
    CHECK(write_mb_s > 3.0);
    CHECK(write_mb_s < 3.7);
    t0 = bridge->now_ns();
    bar2.read_block(BarOffset(0), block);
    const double read_mb_s = static_cast<double>(block.size()) / static_cast<double>(bridge->now_ns() - t0) * 1e3;
    CHECK(read_mb_s > 1.5);
    CHECK(read_mb_s < 1.85);

    tlps = bridge->counters().tlps;
    dev->bar(0).write64(BarOffset(sim::edu::kRegDmaSource), 0x1122334455667788ull);
    CHECK(bridge->counters().tlps - tlps == 2);
    CHECK(dev->bar(0).read64(BarOffset(sim::edu::kRegDmaSource)) == 0x1122334455667788ull);
    CHECK(violations(*bridge).empty());
}

TEST_CASE("a stream read nothing claims returns the TLP engine's stale data registers, not all-ones") {
    // asm2464pd-firmware pcie_pio.h pcie_read_chunk stores DATA_0..3 whatever the status says.
    auto owned = make_bridge();
    SimAsm24Bridge* bridge = owned.get();
    std::unique_ptr<pci::PciDevice> dev = pci::open_usb_device(std::move(owned));
    CHECK(dev->bar(0).read32(BarOffset(sim::edu::kRegId)) == sim::edu::kIdValue);
    dev->config_write16(pci::cfg::kCommand, 0);  // memory decode off: BAR reads are Unsupported Requests
    CHECK(dev->bar(0).read32(BarOffset(sim::edu::kRegLiveness)) != 0xffffffffu);
    CHECK(has_violation(*bridge, "(stale data)"));
}

TEST_CASE("after a failed bulk transfer the controller clears the endpoint's halt; the firmware drops the stream") {
    auto owned = make_bridge(false);
    SimAsm24Bridge* bridge = owned.get();
    usb::Asm24Controller c(std::move(owned));
    std::vector<std::byte> back(1024);
    const uint64_t control = bridge->counters().control;
    CHECK_THROWS_AS(c.sram_read(0, back), TimeoutError);  // no trigger
    CHECK(bridge->counters().control - control == 2);  // the arm, then CLEAR_FEATURE(ENDPOINT_HALT) on 0x81
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

TEST_CASE("latency model: 100 us per round trip, 700 MB/s through the SRAM engine, asynchronous transfers overlap their round trips") {
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
    CHECK(one == 100'000 + 100'000 + static_cast<uint64_t>(256 * 1024 / 0.7));

    // Eight asynchronous 256 KB writes: the wire is the bottleneck, not the round trips.
    std::vector<std::vector<std::byte>> wires(8, std::vector<std::byte>(256 * 1024));
    std::vector<usb::UsbBackend::Tag> tags;
    t0 = bridge->now_ns();
    for (size_t i = 0; i < wires.size(); ++i) tags.push_back(c.sram_write_async((i % 2) * 16 * 16384, wires[i]));
    for (auto t : tags) c.reap(t);
    const uint64_t eight = bridge->now_ns() - t0;
    CHECK(eight < 8 * one);
    CHECK(eight >= static_cast<uint64_t>(8 * 256 * 1024 / 0.7));
}

TEST_CASE("an empty slot behind the bridge is DeviceLostError naming the device and the bus address") {
    CHECK_THROWS_WITH(pci::open_usb_device(make_bridge(false)), Catch::Contains("usb:sim") && Catch::Contains("no function at 04:00.0"));
}

}  // namespace sim_bridge_test
