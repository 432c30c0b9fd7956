// edu through the sysfs backend: BAR0 through resource0 mmap, DMA to physical addresses found
// through /proc/self/pagemap. The guest boots with iommu=pt, so a function on no driver sits in
// the IOMMU's identity domain (bus address == physical address), while functions that vfio-pci
// takes get a translated domain: both backends are tested in one boot. Runs before the vfio
// tests, while edu is still on no driver (the sysfs backend refuses a bound function).
#include "base/error.hpp"
#include "drivers/sim/edu.hpp"
#include "tests/qemu/guest_devices.hpp"
#include "tests/qemu/guest_runner.hpp"
#include "tests/qemu/guest_tests.hpp"

#include <cstdio>
#include <cstring>
#include <fmt/format.h>

namespace baregpu::qemu {

namespace edu = sim::edu;

void edu_sysfs_backend() {
    if (!device_present(kEdu)) throw SkipTest{fmt::format("{}: not attached by the harness", kEdu)};
    if (!bound_driver(kEdu).empty()) {
        throw TestFailure{fmt::format("{}: bound to {} before the sysfs test; it must run first, on an unbound "
                                      "function",
                                      kEdu, bound_driver(kEdu))};
    }
    pci::OpenOptions options;
    options.backend = pci::Backend::Sysfs;
    auto dev = pci::open_device(address(kEdu), options);
    check(dev->backend() == "sysfs", fmt::format("{}: backend is {}, expected sysfs", kEdu, dev->backend()));
    check(!dev->warning().empty(), fmt::format("{}: the sysfs backend gave no no-IOMMU warning", kEdu));
    uint32_t ident = dev->bar(0).read32(BarOffset{edu::kRegId});
    check((ident & 0xffff) == (edu::kIdValue & 0xffff),
          fmt::format("{}: ID register through resource0 reads 0x{:08x}, expected 0xRRrr00ed", kEdu, ident));
    dev->bar(0).write32(BarOffset{edu::kRegLiveness}, 0x0f0f1234);
    uint32_t back = dev->bar(0).read32(BarOffset{edu::kRegLiveness});
    check(back == ~0x0f0f1234u, fmt::format("{}: liveness through resource0 read 0x{:08x}, expected 0x{:08x}", kEdu, back,
                                            ~0x0f0f1234u));

    dev->set_dma_address_bits(edu::kDefaultDmaBits);
    dev->set_bus_master(true);
    auto out = dev->alloc_dma(4096);
    auto in = dev->alloc_dma(4096);
    std::printf("physical DMA buffers at 0x%llx and 0x%llx (from pagemap)\n",
                static_cast<unsigned long long>(out->bus_address().value()),
                static_cast<unsigned long long>(in->bus_address().value()));
    for (size_t i = 0; i < out->size(); ++i) out->cpu()[i] = std::byte(static_cast<uint8_t>(i * 13 + 1));
    std::memset(in->cpu().data(), 0, in->size());
    edu_dma(*dev, EduDirection::ToDevice, out->bus_address().value(), 0, kEduDmaBytes);
    edu_dma(*dev, EduDirection::FromDevice, in->bus_address().value(), 0, kEduDmaBytes);
    check(std::memcmp(out->cpu().data(), in->cpu().data(), kEduDmaBytes) == 0,
          fmt::format("{}: {} bytes host -> edu -> host through physical addresses 0x{:x} / 0x{:x} came back "
                      "different",
                      kEdu, kEduDmaBytes, out->bus_address().value(), in->bus_address().value()));
    dev->set_bus_master(false);
    std::printf("resource0 registers and physical-address DMA both ways work\n");
}

}  // namespace baregpu::qemu
