// Opening VFIO and iommufd device nodes, and the ioctl wrapper both interfaces share.
#include "base/error.hpp"
#include "drivers/pci/kernel_files.hpp"
#include "drivers/pci/vfio_iommu.hpp"

#include <cerrno>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/ioctl.h>

namespace baregpu::pci {

int vfio_ioctl(int fd, unsigned long request, void* arg) {
    int rc;
    do {
        rc = ::ioctl(fd, request, arg);
    } while (rc < 0 && errno == EINTR);
    return rc;
}

int vfio_ioctl(int fd, unsigned long request, unsigned long arg) {
    int rc;
    do {
        rc = ::ioctl(fd, request, arg);
    } while (rc < 0 && errno == EINTR);
    return rc;
}

UniqueFd open_vfio_node(const std::string& device, const std::string& path, const std::string& missing_hint) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    if (fd) return fd;
    int err = errno;
    switch (err) {
        case ENOENT:
            throw UnsupportedError(device, fmt::format("{} does not exist: {}", path, missing_hint));
        case EACCES:
        case EPERM:
            throw UnsupportedError(device, fmt::format("permission denied opening {}: add your user to the `baregpu` "
                                                       "group and install the udev rules (see udev/README.md), or run "
                                                       "as root",
                                                       path));
        case EBUSY:
            throw BusyError(device, 0, fmt::format("{} is already open in another process (QEMU, another baregpu): VFIO "
                                                   "gives a group or device to one process at a time",
                                                   path));
        default:
            throw SystemError(device, fmt::format("cannot open {}", path), err);
    }
}

std::optional<std::string> vfio_cdev_name(const std::string& sysfs_root, PciAddress address) {
    // Linux 6.1 already lists the vfio device under vfio-dev, but only 6.6+ (with
    // CONFIG_VFIO_DEVICE_CDEV) gives it a character device, whose numbers are in its `dev` file.
    std::string dir = kfile::pci_device_dir(sysfs_root, address) + "/vfio-dev";
    for (const std::string& name : kfile::list(dir)) {
        if (name.starts_with("vfio") && name.size() > 4 &&
            name.find_first_not_of("0123456789", 4) == std::string::npos && kfile::exists(dir + "/" + name + "/dev")) {
            return name;
        }
    }
    return std::nullopt;
}

}  // namespace baregpu::pci
