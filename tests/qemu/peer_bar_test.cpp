// Peer-to-peer through VFIO on a real kernel: edu's DMA engine reads the NVMe
// controller's BAR0 through an IOMMU mapping of that BAR's mmap (PciDevice::map_peer_bar:
// VFIO_IOMMU_MAP_DMA of the VM_PFNMAP vaddr vfio-pci gave us), and what arrives is what the CPU
// reads from the same registers. The two functions sit under one host bridge, so no refusal.
#include "base/error.hpp"
#include "drivers/pci/peer_mapping.hpp"
#include "drivers/sim/edu.hpp"
#include "tests/qemu/guest_devices.hpp"
#include "tests/qemu/guest_runner.hpp"
#include "tests/qemu/guest_tests.hpp"

#include <cstdio>
#include <cstring>
#include <fmt/format.h>

namespace baregpu::qemu {

void vfio_peer_bar_dma() {
    auto nvme = open_vfio(kNvme);
    auto edu = open_vfio(kEdu);
    edu->set_dma_address_bits(sim::edu::kDefaultDmaBits);  // edu masks DMA addresses to 28 bits
    edu->set_bus_master(true);
    const auto refusal = edu->peer_refusal(*nvme);
    check(!refusal.has_value(), fmt::format("{} -> {}: refused: {}", kEdu, kNvme, refusal.value_or("")));

    // NVMe 1.4 section 3.1: CAP at 0x00 (8 bytes), VS at 0x08; neither changes on a read.
    constexpr uint64_t kBytes = 64;
    std::unique_ptr<pci::BusMapping> peer = edu->map_peer_bar(*nvme, 0, 0, 4096);
    std::printf("%s BAR0 mapped for %s at IOVA 0x%llx (%s)\n", nvme->name().c_str(), edu->name().c_str(),
                static_cast<unsigned long long>(peer->address().value()), peer->what().c_str());
    auto buffer = edu->alloc_dma(4096);
    std::memset(buffer->cpu().data(), 0xee, kBytes);
    edu_dma(*edu, EduDirection::ToDevice, peer->address().value(), 0, kBytes);  // NVMe registers -> edu
    edu_dma(*edu, EduDirection::FromDevice, buffer->bus_address().value(), 0, kBytes);  // edu -> host
    uint64_t cap = 0;
    uint32_t vs = 0;
    std::memcpy(&cap, buffer->cpu().data(), 8);
    std::memcpy(&vs, buffer->cpu().data() + 8, 4);
    const uint64_t cpu_cap = nvme->bar(0).read64(BarOffset{0x00});
    const uint32_t cpu_vs = nvme->bar(0).read32(BarOffset{0x08});
    check(cap == cpu_cap && vs == cpu_vs,
          fmt::format("edu's DMA read of {} BAR0 through IOVA 0x{:x}: CAP 0x{:016x} VS 0x{:08x}; the CPU reads CAP 0x{:016x} "
                      "VS 0x{:08x}",
                      kNvme, peer->address().value(), cap, vs, cpu_cap, cpu_vs));
    std::printf("edu read NVMe CAP 0x%016llx VS 0x%08x peer-to-peer through the IOMMU\n", static_cast<unsigned long long>(cap), vs);
}

}  // namespace baregpu::qemu
