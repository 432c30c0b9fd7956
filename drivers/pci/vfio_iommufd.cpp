// The iommufd VFIO interface (Documentation/userspace-api/iommufd.rst, vfio.rst "VFIO device
// cdev"): open /dev/iommu and the device's cdev /dev/vfio/devices/vfioN, bind the device to the
// iommufd (VFIO_DEVICE_BIND_IOMMUFD; this claims DMA ownership of its whole IOMMU group), allocate
// an I/O address space (IOMMU_IOAS_ALLOC), attach the device to it
// (VFIO_DEVICE_ATTACH_IOMMUFD_PT), and ask which IOVAs it accepts (IOMMU_IOAS_IOVA_RANGES).
#include "base/error.hpp"
#include "drivers/pci/bar.hpp"
#include "drivers/pci/vfio_iommu.hpp"
#include "drivers/pci/vfio_uapi.hpp"

#include <cerrno>
#include <cstdio>
#include <fmt/format.h>
#include <sys/resource.h>

namespace baregpu::pci {

namespace {

class VfioIommufd final : public VfioIommu {
public:
    VfioIommufd(PciAddress address, const IommuGroup& group, const OpenOptions& options, const std::string& cdev,
                UniqueFd& device_out)
        : VfioIommu(address.to_string()) {
        iommufd_path_ = options.dev_root + "/iommu";
        cdev_path_ = options.dev_root + "/vfio/devices/" + cdev;
        iommufd_ = open_vfio_node(device_, iommufd_path_, "`sudo modprobe iommufd`");
        UniqueFd device = open_vfio_node(device_, cdev_path_,
                                         fmt::format("sysfs lists {} for {}, but the node is missing: is devtmpfs "
                                                     "mounted on /dev?",
                                                     cdev, device_));

        uapi::VfioDeviceBindIommufd bind{};
        bind.argsz = sizeof bind;
        bind.iommufd = iommufd_.get();
        if (vfio_ioctl(device.get(), uapi::kVfioDeviceBindIommufd, &bind) != 0) {
            int err = errno;
            if (err == EBUSY || err == EINVAL) {
                std::vector<GroupMember> blockers = blocking_members(group, address);
                if (!blockers.empty()) throw UnsupportedError(device_, not_viable_message(group, blockers));
            }
            throw SystemError(device_, fmt::format("VFIO_DEVICE_BIND_IOMMUFD of {} to {}{}", cdev_path_, iommufd_path_,
                                                   err == EBUSY ? " (the device or its group is in use elsewhere, "
                                                                  "e.g. opened through /dev/vfio/<group>)" : ""),
                              err);
        }

        uapi::IommuIoasAlloc alloc{};
        alloc.size = sizeof alloc;
        if (vfio_ioctl(iommufd_.get(), uapi::kIommuIoasAlloc, &alloc) != 0) {
            throw SystemError(device_, fmt::format("IOMMU_IOAS_ALLOC on {}", iommufd_path_), errno);
        }
        ioas_ = alloc.out_ioas_id;

        uapi::VfioDeviceAttachIommufdPt attach{};
        attach.argsz = sizeof attach;
        attach.pt_id = ioas_;
        if (vfio_ioctl(device.get(), uapi::kVfioDeviceAttachIommufdPt, &attach) != 0) {
            throw SystemError(device_, fmt::format("VFIO_DEVICE_ATTACH_IOMMUFD_PT of {} to IOAS {}", cdev_path_, ioas_),
                              errno);
        }
        query_ranges();
        device_out = std::move(device);
    }

    ~VfioIommufd() override {
        if (ioas_ != 0) {
            uapi::IommuDestroy destroy{};
            destroy.size = sizeof destroy;
            destroy.id = ioas_;
            // Fails with EBUSY while the device is still attached; closing iommufd frees it then.
            (void)vfio_ioctl(iommufd_.get(), uapi::kIommuDestroy, &destroy);
        }
    }

    std::string describe() const override {
        return fmt::format("iommufd ({}, IOAS {}) with device cdev {}", iommufd_path_, ioas_, cdev_path_);
    }

    void map_dma(std::span<std::byte> memory, uint64_t iova) override {
        uapi::IommuIoasMap map{};
        map.size = sizeof map;
        map.flags = uapi::kIommuIoasMapFixedIova | uapi::kIommuIoasMapReadable | uapi::kIommuIoasMapWriteable;
        map.ioas_id = ioas_;
        map.user_va = reinterpret_cast<uintptr_t>(memory.data());
        map.length = memory.size();
        map.iova = iova;
        if (vfio_ioctl(iommufd_.get(), uapi::kIommuIoasMap, &map) == 0) return;
        int err = errno;
        std::string what = fmt::format("IOMMU_IOAS_MAP of {} at IOVA 0x{:x}", format_size(memory.size()), iova);
        if (err == ENOMEM) {
            rlimit limit{};
            ::getrlimit(RLIMIT_MEMLOCK, &limit);
            what += fmt::format(" (iommufd pins DMA memory against RLIMIT_MEMLOCK, now {}: raise it with `ulimit -l` "
                                "or /etc/security/limits.conf)",
                                limit.rlim_cur == RLIM_INFINITY ? "unlimited" : format_size(limit.rlim_cur));
        }
        throw SystemError(device_, what, err);
    }

    bool unmap_dma(uint64_t iova, uint64_t size) noexcept override {
        uapi::IommuIoasUnmap unmap{};
        unmap.size = sizeof unmap;
        unmap.ioas_id = ioas_;
        unmap.iova = iova;
        unmap.length = size;
        if (vfio_ioctl(iommufd_.get(), uapi::kIommuIoasUnmap, &unmap) != 0 || unmap.length != size) {
            std::fprintf(stderr, "baregpu: %s: IOMMU_IOAS_UNMAP of 0x%llx bytes at IOVA 0x%llx unmapped 0x%llx: %s\n",
                         device_.c_str(), static_cast<unsigned long long>(size), static_cast<unsigned long long>(iova),
                         static_cast<unsigned long long>(unmap.length), SystemError::errno_text(errno).c_str());
            return false;
        }
        return true;
    }

private:
    // IOMMU_IOAS_IOVA_RANGES: with too small an array the kernel fails with EMSGSIZE and says how
    // many ranges there are; ask again with room for them (the set can change in between when
    // another device attaches, hence the loop).
    void query_ranges() {
        std::vector<uapi::IommuIovaRange> ranges;
        for (int attempt = 0; attempt < 4; ++attempt) {
            uapi::IommuIoasIovaRanges query{};
            query.size = sizeof query;
            query.ioas_id = ioas_;
            query.num_iovas = static_cast<uint32_t>(ranges.size());
            query.allowed_iovas = reinterpret_cast<uintptr_t>(ranges.data());
            if (vfio_ioctl(iommufd_.get(), uapi::kIommuIoasIovaRanges, &query) == 0) {
                ranges.resize(query.num_iovas);
                for (const auto& r : ranges) valid_.push_back({r.start, r.last});
                if (query.out_iova_alignment != 0) page_size_ = std::max<uint64_t>(page_size_, query.out_iova_alignment);
                return;
            }
            if (errno != EMSGSIZE) throw SystemError(device_, fmt::format("IOMMU_IOAS_IOVA_RANGES of IOAS {}", ioas_), errno);
            if (query.num_iovas > 4096) {
                throw ProtocolError(device_, fmt::format("IOMMU_IOAS_IOVA_RANGES reports {} ranges", query.num_iovas));
            }
            ranges.assign(query.num_iovas, {});
        }
        throw ProtocolError(device_, "IOMMU_IOAS_IOVA_RANGES kept changing its range count");
    }

    std::string iommufd_path_;
    std::string cdev_path_;
    UniqueFd iommufd_;
    uint32_t ioas_ = 0;
};

}  // namespace

VfioHandle open_vfio_cdev(PciAddress address, const std::string& cdev, const IommuGroup& group,
                          const OpenOptions& options) {
    UniqueFd device;
    auto iommu = std::make_shared<VfioIommufd>(address, group, options, cdev, device);
    return VfioHandle{std::move(iommu), std::move(device)};
}

}  // namespace baregpu::pci
