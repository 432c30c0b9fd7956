#include "drivers/pci/open.hpp"

#include "drivers/pci/device_lock.hpp"
#include "drivers/pci/sysfs_device.hpp"
#include "drivers/pci/vfio_device.hpp"

namespace baregpu::pci {

std::unique_ptr<PciDevice> open_device(PciAddress address, const OpenOptions& options) {
    // The lock comes first: nothing about the device is touched (not even its driver binding)
    // while another process owns it.
    DeviceLock lock = DeviceLock::acquire(address.to_string());
    switch (options.backend) {
        case Backend::Sysfs: return open_sysfs(address, options, std::move(lock));
        case Backend::Vfio: break;
    }
    return open_vfio(address, options, std::move(lock));
}

}  // namespace baregpu::pci
