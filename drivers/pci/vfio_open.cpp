// Opening a function through VFIO, decision by decision: is there an IOMMU group (or is no-IOMMU
// mode allowed and available), is vfio-pci loaded, what must be bound to vfio-pci (and may we),
// which kernel interface to use. The ioctls are in vfio_container.cpp and vfio_iommufd.cpp.
#include "base/error.hpp"
#include "drivers/pci/kernel_files.hpp"
#include "drivers/pci/vfio_bind.hpp"
#include "drivers/pci/vfio_device.hpp"

#include <fmt/format.h>
#include <thread>

namespace baregpu::pci {

namespace {

constexpr const char* kNoiommuParameter = "/module/vfio/parameters/enable_unsafe_noiommu_mode";

// No IOMMU group: without permission that is the end; with it, VFIO's no-IOMMU mode must be on.
void check_noiommu_possible(const std::string& name, const OpenOptions& options) {
    if (!options.allow_noiommu) {
        throw UnsupportedError(name, "has no IOMMU group: the IOMMU is absent or off, and VFIO needs it. Turn it on "
                                     "(VT-d / AMD-Vi in the firmware setup, intel_iommu=on or amd_iommu=on on the "
                                     "kernel command line; `dmesg | grep -i -e DMAR -e AMD-Vi`), or accept a device "
                                     "that can DMA anywhere in RAM: --allow-noiommu (VFIO no-IOMMU mode) or the sysfs "
                                     "backend (root)");
    }
    std::string parameter = options.sysfs_root + kNoiommuParameter;
    auto value = kfile::read(name, parameter);
    if (!value) {
        throw UnsupportedError(name, fmt::format("has no IOMMU group and this kernel has no VFIO no-IOMMU mode ({} does "
                                                 "not exist: CONFIG_VFIO_NOIOMMU is off, or vfio is not loaded: `sudo "
                                                 "modprobe vfio-pci`). Use the sysfs backend (root) instead",
                                                 parameter));
    }
    if (*value != "Y" && *value != "1") {
        throw UnsupportedError(name, fmt::format("has no IOMMU group and VFIO's no-IOMMU mode is off: `echo Y | sudo tee "
                                                 "{}` (this gives up all DMA protection)",
                                                 parameter));
    }
}

// The group of a function not yet on vfio-pci in no-IOMMU mode does not exist yet: vfio-pci makes
// it when it binds. Until then the function stands alone.
IommuGroup lone_function(const std::string& sysfs_root, PciAddress address) {
    IommuGroup group;
    GroupMember self;
    self.address = address;
    self.driver = bound_driver(sysfs_root, address);
    group.members.push_back(self);
    group.noiommu = true;
    return group;
}

void wait_for_node(const std::string& path) {
    auto deadline = std::chrono::steady_clock::now() + kVfioBindTimeout;
    while (!kfile::exists(path) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // If it never appears, opening it says so with the usual hint.
}

}  // namespace

std::unique_ptr<PciDevice> open_vfio(PciAddress address, const OpenOptions& options, DeviceLock lock) {
    std::string name = address.to_string();
    std::optional<IommuGroup> group = read_iommu_group(options.sysfs_root, address);
    if (!group) check_noiommu_possible(name, options);
    if (group && group->noiommu && !options.allow_noiommu) {
        throw UnsupportedError(name, fmt::format("is in vfio group {}, a no-IOMMU group: the device could DMA anywhere "
                                                 "in RAM. Pass --allow-noiommu to accept that",
                                                 group->id));
    }
    check_vfio_pci_loaded(options.sysfs_root, name);

    BindingPlan plan = plan_vfio_binding(group ? *group : lone_function(options.sysfs_root, address), address,
                                         options.bind_vfio);
    if (!plan.empty()) {
        execute_binding(options.sysfs_root, plan, kVfioBindTimeout);
        group = read_iommu_group(options.sysfs_root, address);
    }
    if (!group) {
        throw UnsupportedError(name, "is on vfio-pci but has no IOMMU group: vfio-pci made no no-IOMMU group for it "
                                     "(it was bound before no-IOMMU mode was turned on? unbind and bind it again; "
                                     "dmesg says more)");
    }
    // Binding may have been undone or raced; decide again without binding.
    if (!plan.empty()) plan_vfio_binding(*group, address, false);

    std::optional<std::string> cdev = group->noiommu ? std::nullopt : vfio_cdev_name(options.sysfs_root, address);
    bool have_cdev = cdev && kfile::exists(options.dev_root + "/iommu") &&
                     kfile::exists(options.dev_root + "/vfio/devices/" + *cdev);
    bool use_cdev = false;
    switch (options.vfio_interface) {
        case VfioInterface::Auto: use_cdev = have_cdev; break;
        case VfioInterface::Group: use_cdev = false; break;
        case VfioInterface::Cdev:
            if (!have_cdev) {
                throw UnsupportedError(
                    name, group->noiommu
                              ? std::string("no-IOMMU mode is opened through the group (/dev/vfio/noiommu-N), not the "
                                            "device cdev")
                              : fmt::format("the VFIO device cdev is not available ({}): it needs Linux 6.6+ with "
                                            "CONFIG_VFIO_DEVICE_CDEV and CONFIG_IOMMUFD (`sudo modprobe iommufd`)",
                                            !cdev ? "sysfs shows no vfio-dev/vfioN/dev for it"
                                                  : !kfile::exists(options.dev_root + "/vfio/devices/" + *cdev)
                                                        ? options.dev_root + "/vfio/devices/" + *cdev +
                                                              " does not exist"
                                                        : options.dev_root + "/iommu does not exist"));
            }
            use_cdev = true;
            break;
    }

    VfioHandle handle;
    if (use_cdev) {
        handle = open_vfio_cdev(address, *cdev, *group, options);
    } else {
        if (!plan.empty()) {
            wait_for_node(fmt::format("{}/vfio/{}{}", options.dev_root, group->noiommu ? "noiommu-" : "", group->id));
        }
        handle = open_vfio_group(address, *group, options);
    }
    return make_vfio_device(address, std::move(handle), options, std::move(lock));
}

}  // namespace baregpu::pci
