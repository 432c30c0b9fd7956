#include "drivers/pci/iommu_group.hpp"

#include "base/error.hpp"
#include "drivers/pci/kernel_files.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>

namespace baregpu::pci {

bool is_vfio_driver(std::string_view driver) {
    return driver == "vfio-pci" || driver.ends_with("_vfio_pci") || driver.ends_with("-vfio-pci");
}

bool is_viable_driver(std::string_view driver) {
    return is_vfio_driver(driver) || driver == "pci-stub" || driver == "pcieport";
}

std::optional<std::string> bound_driver(const std::string& sysfs_root, PciAddress address) {
    return kfile::link_name(address.to_string(), kfile::pci_device_dir(sysfs_root, address) + "/driver");
}

std::optional<IommuGroup> read_iommu_group(const std::string& sysfs_root, PciAddress address) {
    std::string name = address.to_string();
    std::string dir = kfile::pci_device_dir(sysfs_root, address);
    if (!kfile::exists(dir)) {
        throw Error(name, fmt::format("there is no such PCI function ({} does not exist); `lspci -D` lists them", dir));
    }
    auto link = kfile::link_name(name, dir + "/iommu_group");
    if (!link) return std::nullopt;
    IommuGroup group;
    auto [end, ec] = std::from_chars(link->data(), link->data() + link->size(), group.id);
    if (ec != std::errc() || end != link->data() + link->size()) {
        throw ProtocolError(name, fmt::format("{}/iommu_group points to \"{}\", not a group number", dir, *link));
    }
    std::string group_dir = fmt::format("{}/kernel/iommu_groups/{}", sysfs_root, group.id);
    group.noiommu = kfile::read(name, group_dir + "/name").value_or("") == "vfio-noiommu";
    for (const std::string& entry : kfile::list(group_dir + "/devices")) {
        auto member_address = PciAddress::parse(entry);
        if (!member_address) continue;  // not a PCI function (groups may hold other buses' devices)
        GroupMember m;
        m.address = *member_address;
        m.driver = bound_driver(sysfs_root, m.address);
        m.class_code = static_cast<uint32_t>(
            kfile::read_hex(name, kfile::pci_device_dir(sysfs_root, m.address) + "/class").value_or(0));
        group.members.push_back(std::move(m));
    }
    if (std::none_of(group.members.begin(), group.members.end(),
                     [&](const GroupMember& m) { return m.address == address; })) {
        throw ProtocolError(name, fmt::format("{}/devices does not list {} although {}/iommu_group points there",
                                              group_dir, name, dir));
    }
    std::sort(group.members.begin(), group.members.end(),
              [](const GroupMember& a, const GroupMember& b) { return a.address < b.address; });
    return group;
}

std::vector<GroupMember> blocking_members(const IommuGroup& group, PciAddress target) {
    std::vector<GroupMember> out;
    for (const GroupMember& m : group.members) {
        if (m.address == target) continue;
        if (m.driver && !is_viable_driver(*m.driver)) out.push_back(m);
    }
    return out;
}

std::string not_viable_message(const IommuGroup& group, const std::vector<GroupMember>& blockers) {
    std::string who;
    for (size_t i = 0; i < blockers.size(); ++i) {
        if (i > 0) who += i + 1 == blockers.size() ? " and " : ", ";
        who += fmt::format("{} is still bound to {}", blockers[i].address.to_string(), blockers[i].driver.value_or("?"));
    }
    return fmt::format("vfio group {} is not viable: {}; bind {} to vfio-pci too (or pass --bind-vfio); see "
                       "udev/README.md",
                       group.id, who, blockers.size() == 1 ? "it" : "them");
}

BindingPlan plan_vfio_binding(const IommuGroup& group, PciAddress target, bool bind_vfio) {
    std::string name = target.to_string();
    auto self = std::find_if(group.members.begin(), group.members.end(),
                             [&](const GroupMember& m) { return m.address == target; });
    if (self == group.members.end()) {
        throw Error(name, fmt::format("is not a member of vfio group {}", group.id));
    }
    BindingPlan plan;
    bool target_ready = self->driver && is_vfio_driver(*self->driver);
    if (!target_ready) {
        if (!bind_vfio) {
            if (self->driver) {
                throw UnsupportedError(name, fmt::format("bound to {}, not vfio-pci: unbind it or pass --bind-vfio; see "
                                                         "udev/README.md",
                                                         *self->driver));
            }
            throw UnsupportedError(name, "bound to no driver, not vfio-pci: bind it to vfio-pci (driver_override) or "
                                         "pass --bind-vfio; see udev/README.md");
        }
        plan.to_bind.push_back(*self);
    }
    std::vector<GroupMember> blockers = blocking_members(group, target);
    if (!blockers.empty() && !bind_vfio) throw UnsupportedError(name, not_viable_message(group, blockers));
    plan.to_bind.insert(plan.to_bind.end(), blockers.begin(), blockers.end());
    return plan;
}

}  // namespace baregpu::pci
