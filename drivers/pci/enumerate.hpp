// Finding the GPUs on this machine: every display controller (PCI class 0x03) and processing
// accelerator (0x12), named from pci.ids through libpci, with what the kernel has done with it
// (bound driver, DRM render node, IOMMU group), whether a baregpu process owns it, and which
// backend could drive it (backend_verdict.hpp).
//
// Every path is rooted so tests can point the whole thing at a fake sysfs tree in a temp dir:
// libpci reads <sysfs_root>/bus/pci (its "sysfs.path" parameter); the driver and iommu_group
// links are read from the same tree. At the real root the render node comes from libdrm's device
// enumeration (drmGetDevices2); under a fake root from the tree's drm/renderD* entries.
#pragma once

#include "drivers/pci/backend_verdict.hpp"
#include "drivers/pci/pci_address.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace baregpu::pci {

struct GpuFunction {
    PciAddress address;
    uint16_t vendor_id = 0;
    uint16_t device_id = 0;
    uint8_t revision = 0;
    uint32_t class_code = 0;  // 24 bits: base class, sub class, programming interface
    uint16_t subsystem_vendor_id = 0;  // 0 when the function has none
    uint16_t subsystem_id = 0;

    // From pci.ids; a numeric fallback ("Device 744c") when the database does not know the ID.
    std::string vendor_name;
    std::string device_name;
    std::string subsystem_name;  // empty when there is no subsystem ID
    std::string class_name;  // "VGA compatible controller"

    std::string driver;  // bound kernel driver, "" when none
    std::string render_node;  // "/dev/dri/renderD128", "" when the driver exposes none
    std::optional<unsigned> iommu_group;
    std::vector<IommuGroupPeer> iommu_group_peers;  // other functions in the group
    std::optional<pid_t> owner;  // the process holding baregpu's DeviceLock (0: pid unknown)

    BackendVerdict verdict;
};

struct EnumerateOptions {
    std::string sysfs_root = "/sys";
    // pci.ids to name devices from; empty: libpci's default (/usr/share/misc/pci.ids on Debian).
    std::string pci_ids;
};

struct Enumeration {
    std::vector<GpuFunction> gpus;  // in address order
    // Things worth telling the user that did not stop enumeration (libpci warnings, a missing
    // pci.ids, an unreadable link). One line each.
    std::vector<std::string> warnings;
};

// Base classes enumerated: 0x03 display controller, 0x12 processing accelerator
// (PCI Code and ID Assignment Specification, "Base Class" table).
bool is_gpu_class(uint32_t class_code);

// Throws UnsupportedError when <sysfs_root>/bus/pci/devices does not exist (no PCI bus is
// visible, e.g. in a container without /sys) and Error on a malformed sysfs tree.
Enumeration enumerate_gpus(const EnumerateOptions& options = {});

}  // namespace baregpu::pci
