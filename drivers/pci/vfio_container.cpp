// The type1 VFIO interface: a container (/dev/vfio/vfio) holding the device's IOMMU group
// (/dev/vfio/<group>), in the order of Documentation/driver-api/vfio.rst: check the API version
// and the IOMMU type, check the group is viable, put the group in the container, set the IOMMU
// type, query the IOMMU, then take the device fd from the group. Also no-IOMMU mode, which uses
// the same container and group calls with VFIO_NOIOMMU_IOMMU and maps no DMA.
#include "base/error.hpp"
#include "drivers/pci/bar.hpp"
#include "drivers/pci/vfio_caps.hpp"
#include "drivers/pci/vfio_iommu.hpp"
#include "drivers/pci/vfio_uapi.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <sys/resource.h>

namespace baregpu::pci {

namespace {

std::string memlock_limit_text() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_MEMLOCK, &limit) != 0) return "unknown";
    if (limit.rlim_cur == RLIM_INFINITY) return "unlimited";
    return format_size(limit.rlim_cur);
}

class VfioContainer final : public VfioIommu {
public:
    VfioContainer(PciAddress address, const IommuGroup& group, const OpenOptions& options)
        : VfioIommu(address.to_string()), group_id_(group.id), noiommu_(group.noiommu) {
        group_path_ = fmt::format("{}/vfio/{}{}", options.dev_root, noiommu_ ? "noiommu-" : "", group.id);
        std::string container_path = options.dev_root + "/vfio/vfio";
        container_ = open_vfio_node(device_, container_path,
                                    "vfio is loaded but its container node is missing. Is devtmpfs mounted on /dev? "
                                    "(A kernel built without CONFIG_VFIO_CONTAINER offers only iommufd: /dev/iommu.)");

        int api = vfio_ioctl(container_.get(), VFIO_GET_API_VERSION, 0ul);
        if (api < 0) {
            throw ProtocolError(device_, fmt::format("{} is not a VFIO container: VFIO_GET_API_VERSION failed: {}",
                                                     container_path, SystemError::errno_text(errno)));
        }
        if (api != VFIO_API_VERSION) {
            throw UnsupportedError(device_, fmt::format("{} speaks VFIO API version {}; baregpu knows version {}",
                                                        container_path, api, VFIO_API_VERSION));
        }
        iommu_type_ = noiommu_ ? VFIO_NOIOMMU_IOMMU : VFIO_TYPE1v2_IOMMU;
        if (vfio_ioctl(container_.get(), VFIO_CHECK_EXTENSION, static_cast<unsigned long>(iommu_type_)) != 1) {
            throw UnsupportedError(
                device_, noiommu_ ? fmt::format("{} does not offer VFIO_NOIOMMU_IOMMU: the kernel needs CONFIG_VFIO_NOIOMMU "
                                                "and `echo Y | sudo tee /sys/module/vfio/parameters/"
                                                "enable_unsafe_noiommu_mode`",
                                                container_path)
                                  : fmt::format("{} does not offer the type1v2 IOMMU (VFIO_TYPE1v2_IOMMU): `sudo "
                                                "modprobe vfio_iommu_type1`",
                                                container_path));
        }

        group_ = open_vfio_node(device_, group_path_,
                                fmt::format("is {} bound to vfio-pci? (`lspci -k -s {}`; see udev/README.md)", device_,
                                            device_));
        vfio_group_status status{};
        status.argsz = sizeof status;
        if (vfio_ioctl(group_.get(), VFIO_GROUP_GET_STATUS, &status) != 0) {
            throw SystemError(device_, fmt::format("VFIO_GROUP_GET_STATUS on {}", group_path_), errno);
        }
        if ((status.flags & VFIO_GROUP_FLAGS_VIABLE) == 0) {
            std::vector<GroupMember> blockers = blocking_members(group, address);
            if (!blockers.empty()) throw UnsupportedError(device_, not_viable_message(group, blockers));
            throw UnsupportedError(device_, fmt::format("the kernel reports vfio group {} not viable although every "
                                                        "function in it is on vfio-pci, pci-stub, pcieport or no "
                                                        "driver; a function may have been bound meanwhile: ls -l "
                                                        "/sys/kernel/iommu_groups/{}/devices/*/driver",
                                                        group.id, group.id));
        }
        int container_fd = container_.get();
        if (vfio_ioctl(group_.get(), VFIO_GROUP_SET_CONTAINER, &container_fd) != 0) {
            throw SystemError(device_, fmt::format("VFIO_GROUP_SET_CONTAINER ({} into {})", group_path_, container_path),
                              errno);
        }
        if (vfio_ioctl(container_.get(), VFIO_SET_IOMMU, static_cast<unsigned long>(iommu_type_)) != 0) {
            int err = errno;
            std::string hint;
            if (err == EPERM && noiommu_) {
                hint = " (no-IOMMU mode needs CAP_SYS_RAWIO: run as root)";
            } else if (err == EPERM) {
                // vfio_iommu_type1 refuses an IOMMU without interrupt remapping, because a device
                // could then forge MSIs (drivers/vfio/vfio_iommu_type1.c, allow_unsafe_interrupts).
                hint = " (the IOMMU does no interrupt remapping, so vfio_iommu_type1 refuses it: turn interrupt "
                       "remapping on in the firmware / kernel command line, or accept the risk with `sudo modprobe "
                       "vfio_iommu_type1 allow_unsafe_interrupts=1`)";
            }
            throw SystemError(device_, fmt::format("VFIO_SET_IOMMU({}) on {}{}",
                                                   noiommu_ ? "VFIO_NOIOMMU_IOMMU" : "VFIO_TYPE1v2_IOMMU",
                                                   container_path, hint),
                              err);
        }
        if (!noiommu_) query_iommu();
    }

    std::string describe() const override {
        return fmt::format("{} container with group {} ({})", noiommu_ ? "no-IOMMU" : "type1v2", group_id_, group_path_);
    }

    bool noiommu() const override { return noiommu_; }

    UniqueFd device_fd() {
        int fd = vfio_ioctl(group_.get(), VFIO_GROUP_GET_DEVICE_FD,
                            reinterpret_cast<unsigned long>(device_.c_str()));
        if (fd < 0) {
            int err = errno;
            throw SystemError(device_, fmt::format("VFIO_GROUP_GET_DEVICE_FD(\"{}\") on {}{}", device_, group_path_,
                                                   err == EBUSY ? " (the device is already open, maybe through its "
                                                                  "cdev /dev/vfio/devices/vfioN)" : ""),
                              err);
        }
        return UniqueFd(fd);
    }

    void map_dma(std::span<std::byte> memory, uint64_t iova) override {
        if (noiommu_) throw Error(device_, "no-IOMMU mode maps no DMA: buffers use physical addresses");
        vfio_iommu_type1_dma_map map{};
        map.argsz = sizeof map;
        map.flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE;
        map.vaddr = reinterpret_cast<uintptr_t>(memory.data());
        map.iova = iova;
        map.size = memory.size();
        if (vfio_ioctl(container_.get(), VFIO_IOMMU_MAP_DMA, &map) == 0) return;
        int err = errno;
        std::string what = fmt::format("VFIO_IOMMU_MAP_DMA of {} at IOVA 0x{:x}", format_size(memory.size()), iova);
        if (err == ENOMEM) {
            what += fmt::format(" (the kernel pins DMA memory against RLIMIT_MEMLOCK, now {}: raise it with `ulimit -l` "
                                "or /etc/security/limits.conf)",
                                memlock_limit_text());
        } else if (err == ENOSPC) {
            what += fmt::format(" (out of DMA mappings{}: vfio_iommu_type1's dma_entry_limit; use fewer, larger "
                                "buffers)",
                                dma_avail_ ? fmt::format(", {} were available at open", *dma_avail_) : "");
        }
        throw SystemError(device_, what, err);
    }

    bool unmap_dma(uint64_t iova, uint64_t size) noexcept override {
        vfio_iommu_type1_dma_unmap unmap{};
        unmap.argsz = sizeof unmap;
        unmap.iova = iova;
        unmap.size = size;
        if (vfio_ioctl(container_.get(), VFIO_IOMMU_UNMAP_DMA, &unmap) != 0 || unmap.size != size) {
            std::fprintf(stderr, "baregpu: %s: VFIO_IOMMU_UNMAP_DMA of 0x%llx bytes at IOVA 0x%llx unmapped 0x%llx: %s\n",
                         device_.c_str(), static_cast<unsigned long long>(size), static_cast<unsigned long long>(iova),
                         static_cast<unsigned long long>(unmap.size), SystemError::errno_text(errno).c_str());
            return false;
        }
        return true;
    }

private:
    // VFIO_IOMMU_GET_INFO: supported page sizes and, through the capability chain, the valid IOVA
    // ranges (Linux 5.4+) and how many mappings remain (5.10+). A first call with the bare
    // structure learns the size the chain needs (argsz), a second one fetches it.
    void query_iommu() {
        std::vector<uint64_t> storage(sizeof(vfio_iommu_type1_info) / 8 + 1, 0);
        auto* info = reinterpret_cast<vfio_iommu_type1_info*>(storage.data());
        info->argsz = sizeof(vfio_iommu_type1_info);
        if (vfio_ioctl(container_.get(), VFIO_IOMMU_GET_INFO, info) != 0) {
            throw SystemError(device_, "VFIO_IOMMU_GET_INFO", errno);
        }
        if (info->argsz > sizeof(vfio_iommu_type1_info)) {
            uint32_t needed = info->argsz;
            if (needed > (1u << 20)) {
                throw ProtocolError(device_, fmt::format("VFIO_IOMMU_GET_INFO asks for a {}-byte buffer", needed));
            }
            storage.assign(needed / 8 + 1, 0);
            info = reinterpret_cast<vfio_iommu_type1_info*>(storage.data());
            info->argsz = needed;
            if (vfio_ioctl(container_.get(), VFIO_IOMMU_GET_INFO, info) != 0) {
                throw SystemError(device_, "VFIO_IOMMU_GET_INFO with room for capabilities", errno);
            }
        }
        if ((info->flags & VFIO_IOMMU_INFO_PGSIZES) && info->iova_pgsizes != 0) {
            page_size_ = info->iova_pgsizes & ~(info->iova_pgsizes - 1);  // the smallest
        }
        if ((info->flags & VFIO_IOMMU_INFO_CAPS) && info->cap_offset != 0) {
            std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(storage.data()),
                                             std::min<size_t>(info->argsz, storage.size() * 8));
            if (auto cap = find_vfio_capability(device_, bytes, info->cap_offset, VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE,
                                                "VFIO_IOMMU_GET_INFO")) {
                valid_ = parse_iova_range_capability(device_, *cap);
            }
            if (auto cap = find_vfio_capability(device_, bytes, info->cap_offset, VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL,
                                                "VFIO_IOMMU_GET_INFO")) {
                if (cap->size() >= sizeof(vfio_iommu_type1_info_dma_avail)) {
                    vfio_iommu_type1_info_dma_avail avail;
                    std::memcpy(&avail, cap->data(), sizeof avail);
                    dma_avail_ = avail.avail;
                }
            }
        }
    }

    unsigned group_id_;
    bool noiommu_;
    std::string group_path_;
    uint32_t iommu_type_ = 0;
    std::optional<uint32_t> dma_avail_;
    UniqueFd container_;
    UniqueFd group_;  // after container_: closed first, which takes the group out of the container
};

}  // namespace

VfioHandle open_vfio_group(PciAddress address, const IommuGroup& group, const OpenOptions& options) {
    auto container = std::make_shared<VfioContainer>(address, group, options);
    UniqueFd fd = container->device_fd();
    return VfioHandle{std::move(container), std::move(fd)};
}

}  // namespace baregpu::pci
