#include "drivers/pci/enumerate.hpp"

#include "base/error.hpp"
#include "drivers/pci/device_lock.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <system_error>
#include <unistd.h>
#include <xf86drm.h>

extern "C" {
#include <pci/pci.h>
}

namespace baregpu::pci {

namespace fs = std::filesystem;

namespace {

// libpci reports through callbacks that carry no context pointer; the warnings of the
// enumeration in progress on this thread go here.
thread_local std::vector<std::string>* g_libpci_warnings = nullptr;

std::string vformat_c(const char* format, va_list args) {
    char buf[512];
    std::vsnprintf(buf, sizeof buf, format, args);
    return buf;
}

// libpci's error hook must not return. It throws instead of libpci's default exit(): Debian
// builds libpci with unwind tables (the x86-64 and arm64 ABIs require them), so the exception
// crosses libpci's frames; the pci_access is released by its owner's destructor. The GNU
// spelling: the hook's pointer type carries noreturn, which clang checks on assignment.
[[gnu::noreturn]] void libpci_error(char* format, ...) {
    va_list args;
    va_start(args, format);
    std::string message = vformat_c(format, args);
    va_end(args);
    throw Error("", "libpci: " + message);
}

void libpci_warning(char* format, ...) {
    va_list args;
    va_start(args, format);
    std::string message = vformat_c(format, args);
    va_end(args);
    if (g_libpci_warnings != nullptr) g_libpci_warnings->push_back("libpci: " + message);
}

void libpci_debug(char*, ...) {}

struct PciAccessDeleter {
    void operator()(pci_access* access) const { pci_cleanup(access); }
};
using PciAccessPtr = std::unique_ptr<pci_access, PciAccessDeleter>;

// The basename of a symlink's target ("../../../bus/pci/drivers/vfio-pci" -> "vfio-pci"),
// "" when the link does not exist.
std::string link_basename(const fs::path& link) {
    std::error_code ec;
    fs::path target = fs::read_symlink(link, ec);
    if (ec) return "";
    return target.filename().string();
}

// libpci's lookup with its variadic ID arguments; nullopt when pci.ids does not know them.
template <typename... Ids>
std::optional<std::string> lookup(pci_access* access, int flags, Ids... ids) {
    char buf[256];
    const char* name = pci_lookup_name(access, buf, sizeof buf, flags | PCI_LOOKUP_NO_NUMBERS | PCI_LOOKUP_NO_HWDB,
                                       static_cast<int>(ids)...);
    if (name == nullptr) return std::nullopt;
    return std::string(name);
}

void name_function(pci_access* access, GpuFunction& gpu) {
    gpu.vendor_name = lookup(access, PCI_LOOKUP_VENDOR, gpu.vendor_id)
                          .value_or(fmt::format("Vendor {:04x}", gpu.vendor_id));
    gpu.device_name = lookup(access, PCI_LOOKUP_DEVICE, gpu.vendor_id, gpu.device_id)
                          .value_or(fmt::format("Device {:04x}", gpu.device_id));
    gpu.class_name = lookup(access, PCI_LOOKUP_CLASS, gpu.class_code >> 8)
                         .value_or(fmt::format("Class {:04x}", gpu.class_code >> 8));
    if (gpu.subsystem_vendor_id != 0 || gpu.subsystem_id != 0) {
        std::string vendor = lookup(access, PCI_LOOKUP_SUBSYSTEM | PCI_LOOKUP_VENDOR, gpu.subsystem_vendor_id)
                                 .value_or(fmt::format("Vendor {:04x}", gpu.subsystem_vendor_id));
        std::string device = lookup(access, PCI_LOOKUP_SUBSYSTEM | PCI_LOOKUP_DEVICE, gpu.vendor_id, gpu.device_id,
                                    gpu.subsystem_vendor_id, gpu.subsystem_id)
                                 .value_or(fmt::format("Device {:04x}", gpu.subsystem_id));
        gpu.subsystem_name = vendor + " " + device;
    }
}

void read_iommu_group(const fs::path& sysfs_root, const fs::path& function_dir, GpuFunction& gpu,
                      std::vector<std::string>& warnings) {
    std::string group = link_basename(function_dir / "iommu_group");
    if (group.empty()) return;
    char* end = nullptr;
    unsigned long number = std::strtoul(group.c_str(), &end, 10);
    if (end == group.c_str() || *end != '\0') {
        warnings.push_back(fmt::format("{}: iommu_group link points at \"{}\", not a group number",
                                       gpu.address.to_string(), group));
        return;
    }
    gpu.iommu_group = static_cast<unsigned>(number);
    std::error_code ec;
    fs::path members = sysfs_root / "kernel" / "iommu_groups" / group / "devices";
    for (const fs::directory_entry& entry : fs::directory_iterator(members, ec)) {
        std::string peer = entry.path().filename().string();
        if (peer == gpu.address.to_string()) continue;
        gpu.iommu_group_peers.push_back(
            {peer, link_basename(sysfs_root / "bus" / "pci" / "devices" / peer / "driver")});
    }
    if (ec) {
        warnings.push_back(fmt::format("{}: cannot list IOMMU group {} ({}): {}", gpu.address.to_string(), group,
                                       members.string(), ec.message()));
    }
    std::sort(gpu.iommu_group_peers.begin(), gpu.iommu_group_peers.end(),
              [](const IommuGroupPeer& a, const IommuGroupPeer& b) { return a.address < b.address; });
}

// Under a fake sysfs root: the render node the tree's drm/ directory names.
std::string render_node_from_tree(const fs::path& function_dir) {
    std::error_code ec;
    std::vector<std::string> nodes;
    for (const fs::directory_entry& entry : fs::directory_iterator(function_dir / "drm", ec)) {
        std::string name = entry.path().filename().string();
        if (name.rfind("renderD", 0) == 0) nodes.push_back("/dev/dri/" + name);
    }
    std::sort(nodes.begin(), nodes.end());
    return nodes.empty() ? "" : nodes.front();
}

// At the real root: libdrm's enumeration, matched by PCI bus info.
void render_nodes_from_libdrm(std::vector<GpuFunction>& gpus, std::vector<std::string>& warnings) {
    int count = drmGetDevices2(0, nullptr, 0);
    if (count <= 0) {
        // No DRM devices (or no /dev/dri at all, as in containers): nothing to match.
        if (count < 0 && count != -ENODEV && count != -ENOENT) {
            warnings.push_back(fmt::format("libdrm: drmGetDevices2 failed: {}", SystemError::errno_text(-count)));
        }
        return;
    }
    std::vector<drmDevicePtr> devices(static_cast<size_t>(count), nullptr);
    count = drmGetDevices2(0, devices.data(), count);
    if (count < 0) {
        warnings.push_back(fmt::format("libdrm: drmGetDevices2 failed: {}", SystemError::errno_text(-count)));
        return;
    }
    for (int i = 0; i < count; ++i) {
        const drmDevice* dev = devices[static_cast<size_t>(i)];
        if (dev->bustype != DRM_BUS_PCI || (dev->available_nodes & (1 << DRM_NODE_RENDER)) == 0) continue;
        const drmPciBusInfo* bus = dev->businfo.pci;
        for (GpuFunction& gpu : gpus) {
            if (gpu.address.domain == bus->domain && gpu.address.bus == bus->bus && gpu.address.device == bus->dev &&
                gpu.address.function == bus->func) {
                gpu.render_node = dev->nodes[DRM_NODE_RENDER];
            }
        }
    }
    drmFreeDevices(devices.data(), count);
}

bool is_real_root(const std::string& sysfs_root) {
    std::error_code ec;
    return fs::equivalent(sysfs_root, "/sys", ec) && !ec;
}

}  // namespace

bool is_gpu_class(uint32_t class_code) {
    uint32_t base = (class_code >> 16) & 0xff;
    return base == 0x03 || base == 0x12;
}

Enumeration enumerate_gpus(const EnumerateOptions& options) {
    Enumeration result;
    const fs::path root = options.sysfs_root;
    const fs::path devices_dir = root / "bus" / "pci" / "devices";
    std::error_code ec;
    if (!fs::is_directory(devices_dir, ec)) {
        throw UnsupportedError("", fmt::format("no PCI bus is visible: {} does not exist (is sysfs mounted?)",
                                               devices_dir.string()));
    }

    PciAccessPtr access(pci_alloc());
    access->error = libpci_error;
    access->warning = libpci_warning;
    access->debug = libpci_debug;
    access->method = PCI_ACCESS_SYS_BUS_PCI;
    std::string sysfs_path = (root / "bus" / "pci").string();
    std::string param_name = "sysfs.path";
    if (pci_set_param(access.get(), param_name.data(), sysfs_path.data()) != 0) {  // libpci copies the value
        throw UnsupportedError("", "this libpci has no \"sysfs.path\" parameter (pciutils 3.x has it): cannot "
                                   "point it at " + sysfs_path);
    }
    std::string ids_path = options.pci_ids;  // outlives `access`'s use of it
    if (!ids_path.empty()) pci_set_name_list_path(access.get(), ids_path.data(), 0);
    if (access->id_file_name != nullptr) {
        // libpci opens "pci.ids.gz" and, when that is missing, the same name without ".gz".
        std::string name = access->id_file_name;
        bool readable = ::access(name.c_str(), R_OK) == 0;
        if (!readable && name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0) {
            name.resize(name.size() - 3);
            readable = ::access(name.c_str(), R_OK) == 0;
        }
        if (!readable) {
            result.warnings.push_back(fmt::format(
                "cannot read pci.ids at {}: names are numeric (Debian: apt install pci.ids)", name));
        }
    }

    g_libpci_warnings = &result.warnings;
    struct ClearWarnings {
        ~ClearWarnings() { g_libpci_warnings = nullptr; }
    } clear_warnings;

    pci_init(access.get());
    pci_scan_bus(access.get());
    for (pci_dev* dev = access->devices; dev != nullptr; dev = dev->next) {
        pci_fill_info(dev, PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_CLASS_EXT | PCI_FILL_SUBSYS);
        uint32_t class_code = (static_cast<uint32_t>(dev->device_class) << 8) | dev->prog_if;
        if (!is_gpu_class(class_code)) continue;
        GpuFunction gpu;
        gpu.address = PciAddress{static_cast<uint32_t>(dev->domain), dev->bus, dev->dev, dev->func};
        gpu.vendor_id = dev->vendor_id;
        gpu.device_id = dev->device_id;
        gpu.revision = dev->rev_id;
        gpu.class_code = class_code;
        gpu.subsystem_vendor_id = dev->subsys_vendor_id;
        gpu.subsystem_id = dev->subsys_id;
        name_function(access.get(), gpu);

        const fs::path function_dir = devices_dir / gpu.address.to_string();
        gpu.driver = link_basename(function_dir / "driver");
        read_iommu_group(root, function_dir, gpu, result.warnings);
        if (!is_real_root(options.sysfs_root)) gpu.render_node = render_node_from_tree(function_dir);
        try {
            gpu.owner = DeviceLock::owner_of(gpu.address.to_string());
        } catch (const Error& e) {
            result.warnings.push_back(fmt::format("{}: cannot check the device lock: {}", gpu.address.to_string(),
                                                  e.what()));
        }
        result.gpus.push_back(std::move(gpu));
    }
    if (is_real_root(options.sysfs_root)) render_nodes_from_libdrm(result.gpus, result.warnings);

    std::sort(result.gpus.begin(), result.gpus.end(),
              [](const GpuFunction& a, const GpuFunction& b) { return a.address < b.address; });
    for (GpuFunction& gpu : result.gpus) {
        gpu.verdict = judge_backend({gpu.address.to_string(), gpu.vendor_id, gpu.device_id, gpu.driver,
                                     gpu.iommu_group, gpu.iommu_group_peers, gpu.owner});
    }
    return result;
}

}  // namespace baregpu::pci
