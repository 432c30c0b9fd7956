// Moving functions to vfio-pci the way the kernel documents it
// (Documentation/ABI/testing/sysfs-bus-pci, driver_override): write "vfio-pci" to the
// function's driver_override, unbind it from its current driver, ask the PCI core to probe it
// again (drivers_probe), and wait until the driver link names vfio-pci.
#pragma once

#include "drivers/pci/iommu_group.hpp"

#include <chrono>
#include <string>

namespace baregpu::pci {

// Throws UnsupportedError when vfio-pci is not loaded (the message says to modprobe it).
void check_vfio_pci_loaded(const std::string& sysfs_root, const std::string& device);

// Binds one function to vfio-pci. Says on stderr what it changes (this alters the machine's
// state until reboot or until the user binds it back). Throws TimeoutError naming the driver it
// found when the function is not on vfio-pci within `timeout`.
void bind_to_vfio_pci(const std::string& sysfs_root, const GroupMember& function, std::chrono::milliseconds timeout);

// Every function of the plan, in order.
void execute_binding(const std::string& sysfs_root, const BindingPlan& plan, std::chrono::milliseconds timeout);

}  // namespace baregpu::pci
