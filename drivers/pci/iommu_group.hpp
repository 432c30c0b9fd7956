// IOMMU groups as sysfs shows them, and what VFIO needs of them. The IOMMU isolates groups, not
// functions: VFIO hands a group to a process only when every function in it is either bound to
// a VFIO driver, bound to a driver that does no DMA of its own (pci-stub, pcieport), or bound to
// nothing (the kernel's "viable" group: iommu_group_claim_dma_owner()). This module reads the
// group, says whether it is viable and, if not, which function holds it up and what to do.
#pragma once

#include "drivers/pci/pci_address.hpp"

#include <optional>
#include <string>
#include <vector>

namespace baregpu::pci {

struct GroupMember {
    PciAddress address;
    std::optional<std::string> driver;  // nullopt: no driver bound
    uint32_t class_code = 0;  // `class`: base << 16 | sub << 8 | prog-if; 0 when unreadable

    bool is_bridge() const { return (class_code >> 8) == 0x0604; }  // PCI-to-PCI bridge
};

struct IommuGroup {
    unsigned id = 0;
    // A group VFIO made up for no-IOMMU mode (its `name` reads "vfio-noiommu"; the device node
    // is /dev/vfio/noiommu-<id>).
    bool noiommu = false;
    std::vector<GroupMember> members;  // sorted by address
};

// vfio-pci itself or a vendor variant of it (mlx5_vfio_pci, nvgrace_gpu_vfio_pci, ...).
bool is_vfio_driver(std::string_view driver);
// A driver that may stay bound in a group VFIO takes: VFIO drivers and the ones the kernel marks
// driver_managed_dma (pci-stub, pcieport).
bool is_viable_driver(std::string_view driver);

// The group of `address` from <sysfs_root>/bus/pci/devices/<address>/iommu_group and
// <sysfs_root>/kernel/iommu_groups/<id>/devices. nullopt when the function has no group (no
// IOMMU, or the IOMMU is off). Throws Error when the function itself does not exist.
std::optional<IommuGroup> read_iommu_group(const std::string& sysfs_root, PciAddress address);

// The driver bound to `address`, nullopt when none.
std::optional<std::string> bound_driver(const std::string& sysfs_root, PciAddress address);

// The functions of `group` other than `target` that make it not viable.
std::vector<GroupMember> blocking_members(const IommuGroup& group, PciAddress target);

// "vfio group 14 is not viable: 0000:03:00.1 is still bound to snd_hda_intel; bind it to vfio-pci
// too (or pass --bind-vfio); see udev/README.md"
std::string not_viable_message(const IommuGroup& group, const std::vector<GroupMember>& blockers);

// What must move to vfio-pci before `target` can be opened: `target` first when it is not on a
// VFIO driver, then every blocking member of its group.
struct BindingPlan {
    std::vector<GroupMember> to_bind;
    bool empty() const { return to_bind.empty(); }
};

// With bind_vfio the plan is returned. Without it, a non-empty plan is an UnsupportedError that
// says exactly what to do ("0000:03:00.0: bound to amdgpu, not vfio-pci: unbind it or pass
// --bind-vfio; see udev/README.md", or the not-viable message).
BindingPlan plan_vfio_binding(const IommuGroup& group, PciAddress target, bool bind_vfio);

}  // namespace baregpu::pci
