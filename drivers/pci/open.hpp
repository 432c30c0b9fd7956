// Opening a real PCI function: through VFIO (the safe default, IOMMU-protected) or through
// sysfs (resourceN mmap + physical addresses; root only, no IOMMU protection). The simulated
// bus opens its own functions (SimBus::open).
#pragma once

#include "drivers/pci/pci_address.hpp"
#include "drivers/pci/pci_device.hpp"

#include <memory>
#include <string>

namespace baregpu::pci {

enum class Backend { Vfio, Sysfs };

// Which VFIO kernel interface carries the device. Auto: iommufd + the device cdev
// (/dev/iommu, /dev/vfio/devices/vfioN; Linux 6.6+) when the kernel offers both, else the type1
// container + group (/dev/vfio/vfio, /dev/vfio/N). The others force one (tests, debugging).
enum class VfioInterface { Auto, Group, Cdev };

struct OpenOptions {
    Backend backend = Backend::Vfio;
    // vfio: when no IOMMU is present, use VFIO's no-IOMMU mode (physical DMA addresses, no
    // protection). Only when the user asked for it explicitly.
    bool allow_noiommu = false;
    // vfio: bind the function to vfio-pci (driver_override + drivers_probe) when it is bound to
    // another driver or to none. Without it, a device not bound to vfio-pci is an error that
    // says how to bind it.
    bool bind_vfio = false;
    VfioInterface vfio_interface = VfioInterface::Auto;
    // Roots of the kernel interfaces, so tests can point them at a fake tree.
    std::string sysfs_root = "/sys";
    std::string dev_root = "/dev";
    std::string proc_root = "/proc";
};

// Takes the device's ownership lock (BusyError naming the owner's pid when another process has
// it), then opens it through the chosen backend. Errors say what to do next: which driver to
// unbind, which other function shares the IOMMU group, that root is needed for sysfs.
std::unique_ptr<PciDevice> open_device(PciAddress address, const OpenOptions& options = {});

}  // namespace baregpu::pci
