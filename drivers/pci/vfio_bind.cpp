#include "drivers/pci/vfio_bind.hpp"

#include "base/error.hpp"
#include "drivers/pci/kernel_files.hpp"

#include <cstdio>
#include <fmt/format.h>
#include <thread>

namespace baregpu::pci {

void check_vfio_pci_loaded(const std::string& sysfs_root, const std::string& device) {
    if (!kfile::exists(sysfs_root + "/bus/pci/drivers/vfio-pci")) {
        throw UnsupportedError(device, fmt::format("the vfio-pci driver is not loaded ({}/bus/pci/drivers/vfio-pci does "
                                                   "not exist): `sudo modprobe vfio-pci`; see udev/README.md",
                                                   sysfs_root));
    }
}

void bind_to_vfio_pci(const std::string& sysfs_root, const GroupMember& function, std::chrono::milliseconds timeout) {
    std::string name = function.address.to_string();
    std::string dir = kfile::pci_device_dir(sysfs_root, function.address);
    std::fprintf(stderr, "baregpu: binding %s (%s) to vfio-pci\n", name.c_str(),
                 function.driver ? ("was on " + *function.driver).c_str() : "no driver");
    // driver_override first, so that nothing but vfio-pci can claim the function once it is free.
    kfile::write(name, dir + "/driver_override", "vfio-pci");
    if (auto driver = kfile::link_name(name, dir + "/driver")) {
        if (*driver == "vfio-pci") return;
        kfile::write(name, dir + "/driver/unbind", name);
    }
    kfile::write(name, sysfs_root + "/bus/pci/drivers_probe", name);

    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::optional<std::string> now;
    for (;;) {
        now = kfile::link_name(name, dir + "/driver");
        if (now && *now == "vfio-pci") return;
        if (std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    throw TimeoutError(name, fmt::format("waited {} ms for the kernel to bind it to vfio-pci after writing "
                                         "driver_override and drivers_probe; it is {} (dmesg says why vfio-pci's probe "
                                         "failed)",
                                         timeout.count(), now ? "bound to " + *now : "bound to no driver"));
}

void execute_binding(const std::string& sysfs_root, const BindingPlan& plan, std::chrono::milliseconds timeout) {
    for (const GroupMember& m : plan.to_bind) bind_to_vfio_pci(sysfs_root, m, timeout);
}

}  // namespace baregpu::pci
