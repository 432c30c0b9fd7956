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

std::string_view nv_transport_for(std::string_view driver) { return driver == "nvidia" ? "nvrm" : "nvpci"; }

BackendVerdict judge_backend(const VerdictInput& in) {
    BackendVerdict v;
    std::string id = fmt::format("{:04x}:{:04x}", in.vendor_id, in.device_id);
    if (in.vendor_id != kVendorAmd && in.vendor_id != kVendorNvidia) {
        v.reason = fmt::format("no baregpu backend for {} ({}): baregpu drives AMD (am) and NVIDIA (nv) GPUs",
                               vendor_name(in.vendor_id), id);
        return v;
    }
    const std::string_view backend = in.vendor_id == kVendorAmd ? "am" : "nv";
    std::optional<GpuFamily> family = find_gpu_family(in.vendor_id, in.device_id);
    if (!family) {
        v.reason = fmt::format("{} {} is not a GPU baregpu drives: the {} backend drives {}", vendor_name(in.vendor_id), id,
                               backend, driven_chips(backend));
        return v;
    }
    v.family = fmt::format("{} ({})", family->chip, family->generation);
    if (family->support != GpuSupport::Driven) {
        // Named so the user learns what it is, but no URI: its driver would refuse it.
        v.reason = fmt::format("{} {} ({}) is not driven yet: the {} backend drives {}",
                               vendor_name(in.vendor_id), id, family->chip, family->backend, driven_chips(family->backend));
        return v;
    }
    v.backend = family->backend;
    v.uri = fmt::format("{}:{}", family->backend, in.address);

    if (in.vendor_id == kVendorNvidia) v.transport = nv_transport_for(in.driver);
    if (in.driver == "nvidia" && in.vendor_id == kVendorNvidia) {
        // nvidia.ko stays: the nvrm transport speaks RM through its ioctls (drivers/nv/nvrm_transport.hpp).
        v.ready = true;
        v.reason = fmt::format("bound to nvidia: opens as {} through nvidia.ko's RM ioctls (/dev/nvidiactl, transport "
                               "nvrm); for nvpci, where baregpu boots GSP itself, bind it to vfio-pci (udev/README.md)",
                               v.uri);
        return v;
    }
    if (in.driver.empty()) {
        v.reason = fmt::format("not bound: bind to vfio-pci (udev/README.md), or as root open {}?access=sysfs (the sysfs "
                               "backend: no IOMMU protection)",
                               v.uri);
        return v;
    }
    if (in.driver != "vfio-pci") {
        if (is_gpu_driver(in.driver)) {
            v.reason = fmt::format("bound to {}: unbind or use vfio-pci (udev/README.md)", in.driver);
        } else {
            v.reason = fmt::format("bound to {}: bind it to vfio-pci instead (udev/README.md)", in.driver);
        }
        return v;
    }
    if (!in.iommu_group) {
        v.reason = fmt::format("bound to vfio-pci but in no IOMMU group: enable the IOMMU (intel_iommu=on / amd_iommu=on), "
                               "or as root open {}?access=sysfs (the sysfs backend)",
                               v.uri);
        return v;
    }
    for (const IommuGroupPeer& peer : in.iommu_group_peers) {
        if (!vfio_group_peer_allowed(peer.driver)) {
            v.reason = fmt::format("IOMMU group {} is not viable: {} is bound to {}; bind it to vfio-pci too "
                                   "(udev/README.md)",
                                   *in.iommu_group, peer.address, peer.driver);
            return v;
        }
    }
    if (in.owner) {
        std::string who = *in.owner == 0 ? std::string("another baregpu process") : fmt::format("process {}", *in.owner);
        v.reason = fmt::format("in use by {} (it holds the baregpu device lock); opens as {} once it exits", who,
                               v.uri);
        return v;
    }
    v.ready = true;
    v.reason = fmt::format("ready via vfio (IOMMU group {}): open as {}", *in.iommu_group, v.uri);
    return v;
}

}  // namespace baregpu::pci
