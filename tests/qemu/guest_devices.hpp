// Where the harness puts each emulated device (run_qemu_tests.py's QEMU command line pins the
// slots with addr=, so the guest knows the addresses without scanning), and the edu helpers the
// tests share.
#pragma once

#include "drivers/pci/open.hpp"
#include "drivers/pci/pci_address.hpp"
#include "drivers/pci/pci_device.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace baregpu::qemu {

// Root bus, slot 0x10: the edu every vfio and sysfs test drives (its own IOMMU group).
inline constexpr std::string_view kEdu = "0000:00:10.0";
// Root bus, slot 0x11: an NVMe controller with a small raw disk image.
inline constexpr std::string_view kNvme = "0000:00:11.0";
// Behind a PCIe-to-PCI bridge (slot 0x12, bus 01): a second edu and a second NVMe controller.
// Conventional PCI behind one bridge shares one requester ID, so both land in one IOMMU group;
// the NVMe there is bound to the kernel's nvme driver, which makes that group not viable.
inline constexpr std::string_view kEduBehindBridge = "0000:01:01.0";
inline constexpr std::string_view kNvmeBehindBridge = "0000:01:02.0";

pci::PciAddress address(std::string_view text);
bool device_present(std::string_view address);
// The driver the kernel has bound to `address` ("vfio-pci", "nvme"), empty when none.
std::string bound_driver(std::string_view address);

// open_device through vfio (type1 container + group: the Debian 6.1 kernel has no vfio cdev),
// binding to vfio-pci from our own code.
std::unique_ptr<pci::PciDevice> open_vfio(std::string_view address);

// edu's DMA engine: copy `count` bytes between a bus address and edu's internal buffer
// (edu::kBufferAddress + offset) and wait, with a deadline, for the engine to go idle.
// `irq` asks for the DMA-done interrupt.
// How much one edu DMA moves here. QEMU 7.2's edu refuses (with a hardware error that stops the
// whole VM) a transfer that ends exactly at the end of its 4 KiB buffer: its range check is
// off by one. Half the buffer stays clear of that.
inline constexpr uint64_t kEduDmaBytes = 2048;

enum class EduDirection { ToDevice, FromDevice };
void edu_dma(pci::PciDevice& edu, EduDirection direction, uint64_t bus_address, uint64_t edu_offset, uint64_t count,
             bool irq = false);

// The IOVA that the deliberately broken run (kernel command line baregpu.break=dma) makes the
// DMA round trip use instead of its buffer's: one page past the buffer, mapped by nobody.
bool break_dma_requested();

}  // namespace baregpu::qemu
