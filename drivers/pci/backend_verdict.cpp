#include "drivers/pci/backend_verdict.hpp"

#include "drivers/pci/gpu_ids.hpp"

#include <array>
#include <fmt/format.h>
#include <string_view>

namespace baregpu::pci {

namespace {

// Kernel GPU drivers that own the hardware while bound (and would fight us for it).
constexpr std::array<std::string_view, 6> kGpuDrivers{"amdgpu", "radeon", "nouveau", "nvidia", "xe", "i915"};

bool is_gpu_driver(const std::string& driver) {
    for (std::string_view d : kGpuDrivers) {
        if (driver == d) return true;
    }
    return false;
}

std::string vendor_name(uint16_t vendor) {
    switch (vendor) {
        case kVendorAmd: return "AMD";
        case kVendorNvidia: return "NVIDIA";
        default: return fmt::format("vendor {:04x}", vendor);
    }
}

}  // namespace

bool vfio_group_peer_allowed(const std::string& driver) {
    return driver.empty() || driver == "vfio-pci" || driver == "pci-stub" || driver == "pcieport";
}

BackendVerdict judge_backend(const VerdictInput& in) {
    BackendVerdict v;
    std::string id = fmt::format("{:04x}:{:04x}", in.vendor_id, in.device_id);
    if (in.vendor_id != kVendorAmd && in.vendor_id != kVendorNvidia) {
        v.reason = fmt::format("no baregpu backend for {} ({}): baregpu drives AMD (am) and NVIDIA (nv) GPUs",
                               vendor_name(in.vendor_id), id);
        return v;
    }
    std::optional<GpuFamily> family = find_gpu_family(in.vendor_id, in.device_id);
    if (!family) {
        v.reason = fmt::format("{} {} is not a supported generation: the {} backend drives {}", vendor_name(in.vendor_id),
                               id, in.vendor_id == kVendorAmd ? "am" : "nv", supported_generations(in.vendor_id));
        return v;
    }
    v.backend = family->backend;
    v.family = fmt::format("{} ({})", family->chip, family->generation);
    v.uri = fmt::format("{}:{}", family->backend, in.address);
    std::string untested = family->support == GpuSupport::SameGeneration
                               ? fmt::format(" (untested on {}: the {} backend is developed on its siblings)",
                                             family->chip, family->backend)
                               : "";

    if (in.vendor_id == kVendorNvidia) v.transport = in.driver == "nvidia" ? "nvrm" : "nvpci";
    if (in.driver == "nvidia" && in.vendor_id == kVendorNvidia) {
        // nvidia.ko stays: the nvrm transport speaks RM through its ioctls (drivers/nv/nvrm_transport.hpp).
        v.reason = "bound to nvidia: nvrm can drive it through nvidia.ko's RM ioctls (/dev/nvidiactl); for nvpci, "
                   "where baregpu boots GSP itself, bind it to vfio-pci (udev/README.md)" +
                   untested;
        return v;
    }
    if (in.driver.empty()) {
        v.reason = "not bound: bind to vfio-pci (udev/README.md) or use the sysfs backend as root" + untested;
        return v;
    }
    if (in.driver != "vfio-pci") {
        if (is_gpu_driver(in.driver)) {
            v.reason = fmt::format("bound to {}: unbind or use vfio-pci (udev/README.md)", in.driver) + untested;
        } else {
            v.reason = fmt::format("bound to {}: bind it to vfio-pci instead (udev/README.md)", in.driver) + untested;
        }
        return v;
    }
    if (!in.iommu_group) {
        v.reason = "bound to vfio-pci but in no IOMMU group: enable the IOMMU (intel_iommu=on / amd_iommu=on) "
                   "or use the sysfs backend as root" +
                   untested;
        return v;
    }
    for (const IommuGroupPeer& peer : in.iommu_group_peers) {
        if (!vfio_group_peer_allowed(peer.driver)) {
            v.reason = fmt::format("IOMMU group {} is not viable: {} is bound to {}; bind it to vfio-pci too "
                                   "(udev/README.md)",
                                   *in.iommu_group, peer.address, peer.driver) +
                       untested;
            return v;
        }
    }
    if (in.owner) {
        std::string who = *in.owner == 0 ? std::string("another baregpu process") : fmt::format("process {}", *in.owner);
        v.reason = fmt::format("in use by {} (it holds the baregpu device lock); opens as {} once it exits", who,
                               v.uri) +
                   untested;
        return v;
    }
    v.ready = true;
    v.reason = fmt::format("ready via vfio (IOMMU group {}): open as {}", *in.iommu_group, v.uri) + untested;
    return v;
}

}  // namespace baregpu::pci
