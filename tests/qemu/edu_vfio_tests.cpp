// QEMU's edu through our vfio backend: binding, config space, BAR0 registers, DMA through the
// IOMMU both ways, and MSI to our eventfd. The register map is the one drivers/sim/edu models,
// so these tests also check the model against the real device.
#include "base/error.hpp"
#include "drivers/pci/config_space.hpp"
#include "drivers/sim/edu.hpp"
#include "tests/qemu/guest_devices.hpp"
#include "tests/qemu/guest_runner.hpp"
#include "tests/qemu/guest_tests.hpp"

#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <thread>
#include <vector>

namespace baregpu::qemu {

namespace edu = sim::edu;

namespace {

std::vector<uint8_t> sysfs_config(std::string_view addr, size_t bytes) {
    std::ifstream in(fmt::format("/sys/bus/pci/devices/{}/config", addr), std::ios::binary);
    std::vector<uint8_t> out(bytes);
    in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(bytes));
    check(in.gcount() == static_cast<std::streamsize>(bytes),
          fmt::format("{}: read {} of {} bytes of /sys/bus/pci/devices/{}/config", addr, in.gcount(), bytes, addr));
    return out;
}

std::unique_ptr<pci::PciDevice> open_edu_for_dma() {
    auto dev = open_vfio(kEdu);
    dev->set_dma_address_bits(edu::kDefaultDmaBits);  // edu masks DMA addresses to 28 bits
    dev->set_bus_master(true);
    return dev;
}

void fill_pattern(std::span<std::byte> bytes, uint8_t seed) {
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::byte(static_cast<uint8_t>(seed + i * 7));
}

}  // namespace

void edu_bind_vfio() {
    auto dev = open_vfio(kEdu);
    check(dev->backend() == "vfio", fmt::format("{}: backend is {}, expected vfio", kEdu, dev->backend()));
    std::string driver = bound_driver(kEdu);
    check(driver == "vfio-pci", fmt::format("{}: /sys/bus/pci/devices/{}/driver is {}, expected vfio-pci", kEdu, kEdu,
                                            driver.empty() ? "(none)" : driver));
    std::printf("%s bound to vfio-pci and opened through the type1 container\n", dev->name().c_str());
}

void edu_config_space() {
    auto dev = open_vfio(kEdu);
    pci::PciIdentity id = dev->identity();
    check(id.vendor_id == edu::kVendorId && id.device_id == edu::kDeviceId,
          fmt::format("{}: config space says {:04x}:{:04x}, expected {:04x}:{:04x}", kEdu, id.vendor_id, id.device_id,
                      edu::kVendorId, edu::kDeviceId));
    // Our config reads through the vfio config region against the kernel's own view of the
    // same bytes. vfio-pci virtualizes some fields (BARs, command); the header's IDs, class and
    // capability pointer are passed through.
    std::vector<uint8_t> kernel = sysfs_config(kEdu, 64);
    for (uint16_t offset : {uint16_t{0x00}, uint16_t{0x02}, uint16_t{0x08}, uint16_t{0x2c}, uint16_t{0x2e}}) {
        uint16_t ours = dev->config_read16(offset);
        uint16_t theirs = static_cast<uint16_t>(kernel[offset] | kernel[offset + 1] << 8);
        check(ours == theirs, fmt::format("{}: config 0x{:02x} reads 0x{:04x} through vfio, 0x{:04x} through sysfs "
                                          "config",
                                          kEdu, offset, ours, theirs));
    }
    auto msi = dev->find_capability(0x05);  // PCI_CAP_ID_MSI: edu calls msi_init() at realize
    check(msi.has_value(), fmt::format("{}: no MSI capability in the capability list", kEdu));
    for (const auto& cap : dev->capabilities()) {
        std::printf("capability 0x%02x (%s) at 0x%02x\n", cap.id, std::string(pci::capability_name(static_cast<uint8_t>(cap.id))).c_str(),
                    cap.offset);
    }
    const pci::BarInfo& bar0 = dev->bar_info(0);
    check(bar0.size == edu::kBar0Size,
          fmt::format("{}: BAR0 is 0x{:x} bytes, expected 0x{:x}", kEdu, bar0.size, edu::kBar0Size));
}

void edu_bar0_registers() {
    auto dev = open_vfio(kEdu);
    pci::MmioRegion& bar = dev->bar(0);
    uint32_t ident = bar.read32(BarOffset{edu::kRegId});
    check((ident & 0xffff) == (edu::kIdValue & 0xffff),
          fmt::format("{}: BAR0 ID register 0x{:08x}, expected 0xRRrr00ed (0x{:08x})", kEdu, ident, edu::kIdValue));
    std::printf("edu ID register 0x%08x\n", ident);
    for (uint32_t value : {0x12345678u, 0xdeadbeefu, 0u}) {
        bar.write32(BarOffset{edu::kRegLiveness}, value);
        uint32_t back = bar.read32(BarOffset{edu::kRegLiveness});
        check(back == ~value, fmt::format("{}: liveness wrote 0x{:08x}, read 0x{:08x}, expected 0x{:08x}", kEdu, value,
                                          back, ~value));
    }
    // The factorial unit: a computation behind a status bit, so a read is not just a latch.
    bar.write32(BarOffset{edu::kRegFactorial}, 10);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((bar.read32(BarOffset{edu::kRegStatus}) & edu::kStatusComputing) != 0) {
        check(std::chrono::steady_clock::now() < deadline, fmt::format("{}: factorial still computing after 5 s", kEdu));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    uint32_t fact = bar.read32(BarOffset{edu::kRegFactorial});
    check(fact == 3628800, fmt::format("{}: factorial of 10 read 0x{:x}, expected 3628800", kEdu, fact));
}

void edu_dma_both_ways() {
    auto dev = open_edu_for_dma();
    auto buffer = dev->alloc_dma(2 * 4096);
    check(buffer->bus_address().value() + buffer->size() <= dev->dma_address_limit(),
          fmt::format("{}: DMA buffer at IOVA 0x{:x} is beyond edu's 28-bit reach", kEdu, buffer->bus_address().value()));
    std::printf("DMA buffer of %llu bytes at IOVA 0x%llx\n", static_cast<unsigned long long>(buffer->size()),
                static_cast<unsigned long long>(buffer->bus_address().value()));
    auto out = buffer->cpu().subspan(0, 4096);
    auto in = buffer->cpu().subspan(4096, 4096);
    fill_pattern(out, 0x5a);
    std::memset(in.data(), 0, in.size());
    uint64_t out_bus = buffer->bus_address(0).value();
    uint64_t in_bus = buffer->bus_address(4096).value();
    if (break_dma_requested()) {
        // The deliberately broken run: an IOVA one page past the buffer, which nothing maps.
        std::printf("baregpu.break=dma: using unmapped IOVA 0x%llx for the way back\n",
                    static_cast<unsigned long long>(in_bus + 4096));
        in_bus += 4096;
    }
    edu_dma(*dev, EduDirection::ToDevice, out_bus, 0, kEduDmaBytes);
    edu_dma(*dev, EduDirection::FromDevice, in_bus, 0, kEduDmaBytes);
    size_t first_bad = kEduDmaBytes;
    for (size_t i = 0; i < kEduDmaBytes; ++i) {
        if (in[i] != out[i]) {
            first_bad = i;
            break;
        }
    }
    check(first_bad == kEduDmaBytes,
          fmt::format("{}: {} bytes host -> edu -> host through IOVAs 0x{:x} / 0x{:x}: byte {} is 0x{:02x}, "
                      "expected 0x{:02x}",
                      kEdu, kEduDmaBytes, out_bus, in_bus, first_bad, static_cast<unsigned>(in[first_bad % in.size()]),
                      static_cast<unsigned>(out[first_bad % out.size()])));
    std::printf("%llu bytes went host -> edu -> host intact\n", static_cast<unsigned long long>(kEduDmaBytes));
}

void edu_msi_interrupt() {
    auto dev = open_edu_for_dma();
    dev->enable_interrupts(pci::InterruptKind::Msi, 1);
    pci::MmioRegion& bar = dev->bar(0);
    // Nothing pending before we ask.
    check(dev->wait_interrupt(0, std::chrono::milliseconds(50)) == 0,
          fmt::format("{}: MSI fired before any interrupt was raised", kEdu));
    constexpr uint32_t kCause = 0x00ab0000;
    bar.write32(BarOffset{edu::kRegInterruptRaise}, kCause);
    uint64_t fired = dev->wait_interrupt(0, std::chrono::seconds(5));
    check(fired > 0, fmt::format("{}: no MSI on our eventfd within 5 s of writing the interrupt-raise register", kEdu));
    uint32_t status = bar.read32(BarOffset{edu::kRegInterruptStatus});
    check((status & kCause) == kCause,
          fmt::format("{}: interrupt status 0x{:08x}, expected the raised bits 0x{:08x}", kEdu, status, kCause));
    bar.write32(BarOffset{edu::kRegInterruptAck}, status);
    // The DMA engine's completion interrupt.
    auto buffer = dev->alloc_dma(4096);
    edu_dma(*dev, EduDirection::ToDevice, buffer->bus_address().value(), 0, 64, /*irq=*/true);
    fired = dev->wait_interrupt(0, std::chrono::seconds(5));
    check(fired > 0, fmt::format("{}: no MSI within 5 s of a DMA with the interrupt-on-done bit", kEdu));
    status = bar.read32(BarOffset{edu::kRegInterruptStatus});
    check((status & edu::kIrqDma) != 0,
          fmt::format("{}: interrupt status 0x{:08x} after DMA lacks 0x{:x}", kEdu, status, edu::kIrqDma));
    bar.write32(BarOffset{edu::kRegInterruptAck}, status);
    dev->disable_interrupts();
    std::printf("MSI delivered to the eventfd: interrupt-raise and DMA completion\n");
}

}  // namespace baregpu::qemu
