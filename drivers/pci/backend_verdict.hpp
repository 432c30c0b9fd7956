// Which baregpu backend could drive a PCI GPU, and if not now, why and what to do about it.
// A pure function of what enumeration found (IDs, bound driver, IOMMU group), so every case is
// unit-tested without a GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace baregpu::pci {

// Another function in the same IOMMU group and the driver bound to it ("" when none).
struct IommuGroupPeer {
    std::string address;  // "0000:03:00.1"
    std::string driver;
};

struct VerdictInput {
    std::string address;  // "0000:03:00.0"
    uint16_t vendor_id = 0;
    uint16_t device_id = 0;
    std::string driver;  // bound kernel driver ("amdgpu", "vfio-pci"), "" when none
    std::optional<unsigned> iommu_group;  // nullopt: the kernel put it in no IOMMU group
    std::vector<IommuGroupPeer> iommu_group_peers;  // the group's other functions
    std::optional<pid_t> owner;  // process holding baregpu's device lock (0: pid not known yet)
};

struct BackendVerdict {
    std::string backend;  // "am", "nv"; empty when no baregpu backend drives this device
    std::string family;  // "Navi31 (RDNA3, GC 11.0.0)"; empty when the ID is not known
    std::string uri;  // "am:0000:03:00.0" when a backend drives it: what the registry opens
    // NVIDIA only: how drivers/nv reaches RM when `uri` is opened — "nvrm" (nvidia.ko is bound: RM
    // ioctls on /dev/nvidiactl) or "nvpci" (unbound or vfio-pci: baregpu boots GSP-RM itself). Empty otherwise.
    std::string transport;
    // It opens now: bound to vfio-pci with a viable IOMMU group and not locked by another process,
    // or (NVIDIA) bound to nvidia.ko.
    bool ready = false;
    std::string reason;  // one line: how it opens, or what stops it and what to do
};

BackendVerdict judge_backend(const VerdictInput& input);

// The transport drivers/nv takes for an NVIDIA function bound to `driver` ("" when none): "nvrm"
// when it is nvidia.ko, else "nvpci". The verdict and the registry's nv: backend both ask here.
std::string_view nv_transport_for(std::string_view driver);

// Drivers that may hold other functions of a group without making it unusable for VFIO:
// none, vfio-pci itself, pci-stub, and pcieport on bridges (Linux marks these
// driver_managed_dma, drivers/pci/pci-stub.c and drivers/pci/pcie/portdrv.c).
bool vfio_group_peer_allowed(const std::string& driver);

}  // namespace baregpu::pci
