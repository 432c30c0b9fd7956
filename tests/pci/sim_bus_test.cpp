// The simulated bus, driven through the PciDevice interface exactly as a driver would, with
// QEMU's edu device model on it: DMA through the IOMMU, interrupts, FLR, injected faults, and
// the violations a strict device reports.
#include "base/error.hpp"
#include "drivers/pci/sim_bus.hpp"
#include "drivers/sim/edu.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>

namespace sim_bus_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::pci;
using namespace baregpu::pci::sim;
using baregpu::sim::EduDevice;
namespace edu = baregpu::sim::edu;
using namespace std::chrono_literals;

namespace {

struct Rig {
    SimBus bus;
    PciAddress address;
    EduDevice* model;
    std::unique_ptr<PciDevice> dev;

    explicit Rig(EduDevice::Options options = {}, Transport transport = Transport::pcie_gen4_x16())
        : bus(std::move(transport)) {
        auto m = std::make_unique<EduDevice>(options);
        model = m.get();
        address = bus.attach(std::move(m));
        dev = bus.open(address);
        dev->set_dma_address_bits(edu::kDefaultDmaBits);
    }

    MmioRegion& regs() { return dev->bar(0); }

    // The sequence of docs/specs/edu.rst: program source, destination, count, start; wait for
    // the start bit to clear.
    void dma(uint64_t source, uint64_t destination, uint32_t count, bool to_ram, bool irq) {
        regs().write64(BarOffset(edu::kRegDmaSource), source);
        regs().write64(BarOffset(edu::kRegDmaDestination), destination);
        regs().write64(BarOffset(edu::kRegDmaCount), count);
        regs().write32(BarOffset(edu::kRegDmaCommand),
                       edu::kDmaStart | (to_ram ? edu::kDmaToRam : 0) | (irq ? edu::kDmaIrqOnDone : 0));
        for (int i = 0; i < 1000 && (regs().read32(BarOffset(edu::kRegDmaCommand)) & edu::kDmaStart); ++i) {
            dev->delay(1ms);
        }
        REQUIRE((regs().read32(BarOffset(edu::kRegDmaCommand)) & edu::kDmaStart) == 0);
    }

    size_t violations() const { return bus.violations().size(); }
};

std::vector<std::byte> pattern(size_t n, uint8_t seed) {
    std::vector<std::byte> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = std::byte(static_cast<uint8_t>(seed + i * 7));
    return out;
}

}  // namespace

TEST_CASE("sim: open sizes BARs through config space and identifies the device") {
    Rig rig({.pci_express = true, .function_level_reset = true, .memory_bar_bytes = 1 << 20});
    PciIdentity id = rig.dev->identity();
    CHECK(id.vendor_id == edu::kVendorId);
    CHECK(id.device_id == edu::kDeviceId);
    CHECK(rig.dev->backend() == "sim");
    CHECK(rig.dev->name() == "sim:0000:00:01.0");

    const BarInfo& bar0 = rig.dev->bar_info(0);
    CHECK(bar0.type == BarType::Memory32);
    CHECK(bar0.size == edu::kBar0Size);
    CHECK(bar0.bus_base != 0);
    const BarInfo& bar2 = rig.dev->bar_info(2);
    CHECK(bar2.type == BarType::Memory64);
    CHECK(bar2.prefetchable);
    CHECK(bar2.size == (1u << 20));
    CHECK(rig.dev->bar_info(1).type == BarType::None);
    CHECK(rig.dev->bar_info(3).type == BarType::None);  // upper half of BAR2
    CHECK_THROWS_WITH(rig.dev->bar(1), Catch::Contains("BAR1: unimplemented"));

    // Sizing left the function as open found it: memory decode on, bus mastering off.
    CHECK((rig.dev->config_read16(cfg::kCommand) & cfg::kCommandMemory) != 0);
    CHECK_FALSE(rig.dev->bus_master());
    CHECK(rig.dev->supports_function_reset());
    CHECK(rig.dev->find_capability(cfg::kCapMsix) == std::nullopt);
    CHECK(rig.dev->find_capability(cfg::kCapMsi).has_value());
    CHECK(rig.dev->find_capability(cfg::kCapPciExpress).has_value());

    CHECK(rig.regs().read32(BarOffset(edu::kRegId)) == edu::kIdValue);
    rig.regs().write32(BarOffset(edu::kRegLiveness), 0x12345678);
    CHECK(rig.regs().read32(BarOffset(edu::kRegLiveness)) == ~0x12345678u);
    CHECK(rig.violations() == 0);
}

TEST_CASE("sim: one opener at a time") {
    Rig rig;
    CHECK_THROWS_AS(rig.bus.open(rig.address), BusyError);
    rig.dev.reset();
    CHECK_NOTHROW(rig.bus.open(rig.address));
}

TEST_CASE("sim: DMA host -> device -> host through the IOMMU, with a completion MSI") {
    Rig rig;
    auto buf = rig.dev->alloc_dma(8192);
    REQUIRE(buf->contiguous());
    CHECK(buf->bus_address().value() + buf->size() <= (1u << edu::kDefaultDmaBits));
    auto data = pattern(100, 3);
    std::memcpy(buf->cpu().data(), data.data(), data.size());

    rig.dev->enable_interrupts(InterruptKind::Msi, 1);
    rig.dev->set_bus_master(true);
    rig.bus.reset_counters(rig.address);

    rig.dma(buf->bus_address().value(), edu::kBufferAddress, 100, false, true);
    CHECK(rig.dev->wait_interrupt(0, 1s) == 1);
    CHECK(rig.regs().read32(BarOffset(edu::kRegInterruptStatus)) == edu::kIrqDma);
    rig.regs().write32(BarOffset(edu::kRegInterruptAck), edu::kIrqDma);
    auto inside = rig.model->buffer();
    CHECK(std::memcmp(inside.data(), data.data(), 100) == 0);

    rig.dma(edu::kBufferAddress, buf->bus_address(4096).value(), 100, true, true);
    CHECK(rig.dev->wait_interrupt(0, 1s) == 1);
    CHECK(std::memcmp(buf->cpu().data() + 4096, data.data(), 100) == 0);

    Counters c = rig.bus.counters(rig.address);
    CHECK(c.dma_reads == 1);
    CHECK(c.dma_writes == 1);
    CHECK(c.dma_bytes_read == 100);
    CHECK(c.dma_bytes_written == 100);
    CHECK(c.interrupts_delivered == 2);
    CHECK(c.iommu_faults == 0);
    CHECK(rig.violations() == 0);
}

TEST_CASE("sim: DMA to an unmapped IOVA is an IOMMU fault, recorded and reported") {
    Rig rig;
    rig.dev->set_bus_master(true);
    uint64_t stale;
    {
        auto buf = rig.dev->alloc_dma(4096);
        stale = buf->bus_address().value();
    }  // freed: its IOVA is unmapped now
    auto before = rig.model->buffer();
    rig.dma(stale, edu::kBufferAddress, 64, false, false);
    auto faults = rig.bus.iommu_faults();
    REQUIRE(faults.size() == 1);
    CHECK(faults[0].address == BusAddress(stale));
    CHECK(faults[0].length == 64);
    CHECK_FALSE(faults[0].write);
    CHECK_THAT(faults[0].describe(), Catch::Contains("IOMMU fault") && Catch::Contains("sim:0000:00:01.0"));
    CHECK(rig.model->buffer() == before);  // nothing was transferred
    CHECK(rig.bus.counters(rig.address).iommu_faults == 1);

    // A device write that crosses from a mapped page into an unmapped one faults whole.
    auto buf = rig.dev->alloc_dma(4096);
    rig.dma(edu::kBufferAddress, buf->bus_address(4000).value(), 200, true, false);
    CHECK(rig.bus.iommu_faults().size() == 2);
    CHECK(rig.bus.iommu_faults()[1].write);
}

TEST_CASE("sim: a device cannot DMA while bus mastering is off") {
    Rig rig;
    auto buf = rig.dev->alloc_dma(4096);
    std::memset(buf->cpu().data(), 0xab, 64);
    rig.dma(buf->bus_address().value(), edu::kBufferAddress, 64, false, false);
    CHECK(rig.model->buffer()[0] == std::byte{0});
    auto v = rig.bus.violations();
    REQUIRE(v.size() == 1);
    CHECK_THAT(v[0].what, Catch::Contains("bus mastering disabled"));
    CHECK(rig.bus.counters(rig.address).dma_reads == 0);
}

TEST_CASE("sim: MSI only arrives when enabled; waits honour their timeout") {
    Rig rig;
    rig.dev->set_bus_master(true);
    rig.regs().write32(BarOffset(edu::kRegInterruptRaise), 0x1);
    CHECK(rig.bus.counters(rig.address).interrupts_dropped == 1);

    rig.dev->enable_interrupts(InterruptKind::Msi, 1);
    auto start = std::chrono::steady_clock::now();
    CHECK(rig.dev->wait_interrupt(0, 50ms) == 0);
    auto waited = std::chrono::steady_clock::now() - start;
    CHECK(waited >= 50ms);
    CHECK(waited < 1s);

    rig.regs().write32(BarOffset(edu::kRegInterruptRaise), 0x2);
    rig.regs().write32(BarOffset(edu::kRegInterruptRaise), 0x4);
    CHECK(rig.dev->wait_interrupt(0, 1s) == 2);  // the eventfd counts both
    // The dropped raise still set its status bit: only the message was lost.
    CHECK(rig.regs().read32(BarOffset(edu::kRegInterruptStatus)) == 0x7);

    CHECK_THROWS_AS(rig.dev->enable_interrupts(InterruptKind::Msi, 2), UnsupportedError);  // edu has 1 vector
    CHECK_THROWS_AS(rig.dev->enable_interrupts(InterruptKind::MsiX, 1), UnsupportedError);  // and no MSI-X

    rig.dev->disable_interrupts();
    rig.regs().write32(BarOffset(edu::kRegInterruptRaise), 0x1);
    CHECK(rig.bus.counters(rig.address).interrupts_dropped == 2);
}

TEST_CASE("sim: MSI-X vectors, per-vector masking and the pending bit array") {
    Rig rig({.msix_vectors = 2});
    rig.dev->enable_interrupts(InterruptKind::MsiX, 2);
    rig.dev->set_bus_master(true);
    auto buf = rig.dev->alloc_dma(4096);

    rig.dma(buf->bus_address().value(), edu::kBufferAddress, 16, false, true);
    CHECK(rig.dev->wait_interrupt(1, 1s) == 1);  // DMA completion on vector 1
    CHECK(rig.dev->wait_interrupt(0, 10ms) == 0);

    // Mask vector 0 through its table entry, raise it: it stays pending in the PBA.
    MmioRegion& bar0 = rig.regs();
    BarOffset control(edu::kMsixTableOffset + 0 * cfg::kMsixEntrySize + cfg::kMsixEntryVectorControl);
    bar0.write32(control, cfg::kMsixEntryMasked);
    bar0.write32(BarOffset(edu::kRegInterruptRaise), 0x8);
    CHECK(rig.dev->wait_interrupt(0, 10ms) == 0);
    CHECK((bar0.read64(BarOffset(edu::kMsixPbaOffset)) & 1) == 1);
    bar0.write32(control, 0);  // unmasking delivers the pending message
    CHECK(rig.dev->wait_interrupt(0, 1s) == 1);
    CHECK((bar0.read64(BarOffset(edu::kMsixPbaOffset)) & 1) == 0);

    // The table only takes dword/qword accesses; the PBA is read-only.
    bar0.write16(BarOffset(edu::kMsixTableOffset), 0);
    bar0.write64(BarOffset(edu::kMsixPbaOffset), 1);
    auto v = rig.bus.violations();
    REQUIRE(v.size() == 2);
    CHECK_THAT(v[0].what, Catch::Contains("2-byte write to the MSI-X table"));
    CHECK_THAT(v[1].what, Catch::Contains("Pending Bit Array"));
}

TEST_CASE("sim: function-level reset clears the device and keeps the driver's setup") {
    Rig rig({.pci_express = true, .function_level_reset = true});
    rig.dev->enable_interrupts(InterruptKind::Msi, 1);
    rig.dev->set_bus_master(true);
    rig.regs().write32(BarOffset(edu::kRegLiveness), 0x5555);
    uint64_t t0 = rig.bus.now_ns();

    rig.dev->reset_function();

    CHECK(rig.bus.now_ns() - t0 >= 100'000'000);  // the 100 ms wait passed in modelled time
    CHECK(rig.regs().read32(BarOffset(edu::kRegLiveness)) == 0xffffffff);  // ~0: state is back to power-on
    CHECK(rig.regs().read32(BarOffset(edu::kRegId)) == edu::kIdValue);  // BAR restored
    CHECK(rig.dev->bus_master());
    rig.regs().write32(BarOffset(edu::kRegInterruptRaise), 1);
    CHECK(rig.dev->wait_interrupt(0, 1s) == 1);  // same eventfd, re-routed
    CHECK(rig.violations() == 0);
}

TEST_CASE("sim: touching a function during its FLR is a violation; no FLR where DevCap has none") {
    Rig rig({.pci_express = true, .function_level_reset = true});
    auto exp = rig.dev->find_capability(cfg::kCapPciExpress);
    REQUIRE(exp);
    uint16_t devctl = static_cast<uint16_t>(*exp + cfg::kExpDevCtl);
    rig.dev->config_write16(devctl, rig.dev->config_read16(devctl) | cfg::kExpDevCtlInitiateFlr);
    CHECK(rig.dev->config_read16(cfg::kVendorId) == 0xffff);
    auto v = rig.bus.violations();
    REQUIRE(v.size() == 1);
    CHECK_THAT(v[0].source, Catch::Contains("6.6.2"));

    Rig plain;
    CHECK_FALSE(plain.dev->supports_function_reset());
    CHECK_THROWS_AS(plain.dev->reset_function(), UnsupportedError);
}

TEST_CASE("sim: MMIO with memory decode off gets all-ones and a violation") {
    Rig rig;
    rig.dev->config_write16(cfg::kCommand, 0);
    CHECK(rig.regs().read32(BarOffset(edu::kRegId)) == 0xffffffff);
    auto v = rig.bus.violations();
    REQUIRE(v.size() == 1);
    CHECK_THAT(v[0].what, Catch::Contains("memory decode disabled"));
}

TEST_CASE("sim: edu refuses what QEMU's edu refuses") {
    Rig rig;
    CHECK(rig.regs().read16(BarOffset(edu::kRegId)) == 0xffff);  // only 4-byte accesses below 0x80
    rig.dma(0x1000, 0x40f80, 0x100, false, false);  // runs past the 4 KiB buffer
    rig.dev->set_bus_master(true);
    auto buf = rig.dev->alloc_dma(4096);
    rig.dma(buf->bus_address().value() | (1ull << 40), edu::kBufferAddress, 4, false, false);  // beyond 28 bits
    auto v = rig.bus.violations();
    REQUIRE(v.size() == 3);
    CHECK_THAT(v[0].what, Catch::Contains("2-byte read"));
    CHECK_THAT(v[1].what, Catch::Contains("leaves the 4 KiB buffer"));
    CHECK_THAT(v[2].what, Catch::Contains("28-bit DMA mask"));
    for (const auto& x : v) CHECK_THAT(x.source, Catch::Contains("edu.rst"));
}

TEST_CASE("sim: 28-bit device gets IOVAs below 256 MiB and a clear error when they run out") {
    Rig rig;
    std::vector<std::unique_ptr<DmaBuffer>> bufs;
    for (int i = 0; i < 8; ++i) {
        bufs.push_back(rig.dev->alloc_dma(1 << 20));
        CHECK(bufs.back()->bus_address().value() + (1 << 20) <= (1u << 28));
    }
    rig.dev->set_dma_address_bits(13);
    CHECK_THROWS_WITH(rig.dev->alloc_dma(8192), Catch::Contains("13-bit DMA limit"));
}

TEST_CASE("sim: memory BARs hold bytes; block transfers are counted") {
    Rig rig({.memory_bar_bytes = 1 << 16});
    MmioRegion& vram = rig.dev->bar(2);
    auto data = pattern(4096, 9);
    rig.bus.reset_counters(rig.address);
    vram.write_block(BarOffset(0x1000), data);
    std::vector<std::byte> back(4096);
    vram.read_block(BarOffset(0x1000), back);
    CHECK(back == data);
    vram.write32(BarOffset(0x10), 0xcafef00d);
    CHECK(vram.read64(BarOffset(0x10)) == 0xcafef00d);
    Counters c = rig.bus.counters(rig.address);
    CHECK(c.mmio_bytes_written == 4096 + 4);
    CHECK(c.mmio_bytes_read == 4096 + 8);
    CHECK_THROWS(vram.read32(BarOffset(1 << 16)));
}

TEST_CASE("sim: surprise removal reads all-ones, drops writes, stops DMA and interrupts") {
    Rig rig;
    rig.dev->enable_interrupts(InterruptKind::Msi, 1);
    rig.dev->set_bus_master(true);
    auto buf = rig.dev->alloc_dma(4096);
    rig.bus.inject(rig.address, {.kind = FaultKind::SurpriseRemoval});

    CHECK(rig.regs().read32(BarOffset(edu::kRegId)) == 0xffffffff);
    CHECK(rig.dev->config_read16(cfg::kVendorId) == 0xffff);
    CHECK_THROWS_AS(rig.dev->check_alive(), DeviceLostError);
    CHECK_THROWS_AS(rig.dev->set_bus_master(true), DeviceLostError);
    rig.regs().write32(BarOffset(edu::kRegInterruptRaise), 1);
    CHECK(rig.dev->wait_interrupt(0, 10ms) == 0);

    rig.bus.clear_faults(rig.address);
    CHECK_NOTHROW(rig.dev->check_alive());
    CHECK(rig.regs().read32(BarOffset(edu::kRegId)) == edu::kIdValue);
}

TEST_CASE("sim: a device removed before it is opened is reported as removed, not as a bridge") {
    Rig rig;
    rig.dev.reset();
    rig.bus.inject(rig.address, {.kind = FaultKind::SurpriseRemoval});
    CHECK_THROWS_AS(rig.bus.open(rig.address), DeviceLostError);
    CHECK_THROWS_WITH(rig.bus.open(rig.address), Catch::Contains("config space reads all-ones") && !Catch::Contains("header type"));
}

TEST_CASE("sim: a completion timeout costs the timeout and reads all-ones, once") {
    Rig rig;
    rig.bus.reset_counters(rig.address);
    rig.bus.inject(rig.address, {.kind = FaultKind::CompletionTimeout, .bar = 0, .offset = 0, .length = 4, .count = 1});
    CHECK(rig.regs().read32(BarOffset(edu::kRegLiveness)) == ~0u);  // other offsets unaffected
    CHECK(rig.regs().read32(BarOffset(edu::kRegId)) == 0xffffffff);
    CHECK(rig.regs().read32(BarOffset(edu::kRegId)) == edu::kIdValue);
    Counters c = rig.bus.counters(rig.address);
    CHECK(c.completion_timeouts == 1);
    CHECK(c.modelled_ns >= rig.bus.transport().completion_timeout_ns);
}

TEST_CASE("sim: a device that is gone throws DeviceLostError from every operation") {
    Rig rig;
    rig.bus.inject(rig.address, {.kind = FaultKind::DeviceGone});
    CHECK_THROWS_AS(rig.regs().read32(BarOffset(0)), DeviceLostError);
    CHECK_THROWS_AS(rig.regs().write32(BarOffset(4), 0), DeviceLostError);
    CHECK_THROWS_AS(rig.dev->config_read32(0), DeviceLostError);
    CHECK_THROWS_AS(rig.dev->alloc_dma(4096), DeviceLostError);
    CHECK_THROWS_AS(rig.dev->enable_interrupts(InterruptKind::Msi, 1), DeviceLostError);
    CHECK_THROWS_WITH(rig.regs().read32(BarOffset(0)), Catch::Contains("sim:0000:00:01.0"));
}

TEST_CASE("sim: modelled time follows the transport's latency model") {
    Rig pcie;
    Rig usb({}, Transport::usb_tunnel());
    for (Rig* rig : {&pcie, &usb}) {
        rig->bus.reset_counters(rig->address);
        for (int i = 0; i < 100; ++i) rig->regs().read32(BarOffset(edu::kRegId));
        for (int i = 0; i < 50; ++i) rig->regs().write32(BarOffset(edu::kRegLiveness), 1);
    }
    Counters p = pcie.bus.counters(pcie.address);
    Counters u = usb.bus.counters(usb.address);
    CHECK(p.mmio_reads == 100);
    CHECK(p.mmio_writes == 50);
    const Transport& pt = pcie.bus.transport();
    const Transport& ut = usb.bus.transport();
    CHECK(p.modelled_ns == 100 * pt.mmio_read_ns + 50 * pt.mmio_write_ns);
    CHECK(u.modelled_ns == 100 * ut.mmio_read_ns + 50 * ut.mmio_write_ns);
    CHECK(u.modelled_ns > 100 * p.modelled_ns);  // a register round trip over USB costs >100x PCIe
}

}  // namespace sim_bus_test
