// The `sysfs` backend: a PCI function driven through /sys/bus/pci/devices/<address> as root —
// `config` for config space, `resource` + `resourceN` (mmap) for BARs, `enable`, `reset` — with
// DMA memory addressed physically (/proc/self/pagemap). No IOMMU stands between the device and
// RAM, and there is no interrupt path: drivers poll. For machines without an IOMMU (or with it
// off) where vfio's no-IOMMU mode is unavailable; vfio is the safe default.
#pragma once

#include "drivers/pci/device_lock.hpp"
#include "drivers/pci/open.hpp"

#include <memory>

namespace baregpu::pci {

// Opens `address` with the paths rooted at options' sysfs_root and proc_root. `lock` is the
// device's ownership lock, held for the device's life. Throws UnsupportedError when not root,
// Error when the function is missing or bound to a kernel driver (the message says how to
// unbind it), ProtocolError on a malformed `resource` file.
std::unique_ptr<PciDevice> open_sysfs(PciAddress address, const OpenOptions& options, DeviceLock lock);

}  // namespace baregpu::pci
