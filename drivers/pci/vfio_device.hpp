// The `vfio` backend: a PCI function owned through the kernel's vfio-pci driver, its DMA
// translated and confined by the IOMMU. Config space through the device fd's config region,
// BARs mmapped through the device fd, DMA buffers mapped at IOVAs we choose, MSI/MSI-X to
// eventfds, reset through VFIO_DEVICE_RESET.
#pragma once

#include "drivers/pci/device_lock.hpp"
#include "drivers/pci/open.hpp"
#include "drivers/pci/vfio_iommu.hpp"

#include <chrono>
#include <memory>

namespace baregpu::pci {

// The whole open: find the IOMMU group (or, with allow_noiommu, VFIO's no-IOMMU mode), decide and
// (with bind_vfio) carry out the binding to vfio-pci, pick the interface (iommufd + cdev when the
// kernel has it, else type1 container + group), open it and build the device. `lock` is held for
// the device's life. Every refusal says what to do.
std::unique_ptr<PciDevice> open_vfio(PciAddress address, const OpenOptions& options, DeviceLock lock);

// Builds the device on an opened VFIO handle (open_vfio's last step).
std::unique_ptr<PciDevice> make_vfio_device(PciAddress address, VfioHandle handle, const OpenOptions& options,
                                            DeviceLock lock);

// How long open_vfio waits for the kernel to bind a function to vfio-pci and for udev to create
// its device node.
inline constexpr std::chrono::milliseconds kVfioBindTimeout{5000};

}  // namespace baregpu::pci
