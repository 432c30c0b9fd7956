#include "drivers/pci/vfio_caps.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"
#include "drivers/pci/vfio_uapi.hpp"

#include <cstring>
#include <fmt/format.h>
#include <set>

namespace baregpu::pci {

namespace {

template <typename T>
T load(std::span<const std::byte> bytes, size_t offset) {
    T value;
    std::memcpy(&value, bytes.data() + offset, sizeof value);
    return value;
}

}  // namespace

std::optional<std::span<const std::byte>> find_vfio_capability(const std::string& device,
                                                               std::span<const std::byte> info, uint32_t first,
                                                               uint16_t id, const std::string& what) {
    std::set<uint32_t> seen;
    for (uint32_t at = first; at != 0;) {
        if (!range_within(at, sizeof(vfio_info_cap_header), info.size()) || at % 4 != 0) {
            throw ProtocolError(device, fmt::format("{}: capability at offset 0x{:x} lies outside the 0x{:x}-byte info "
                                                    "buffer or is misaligned",
                                                    what, at, info.size()));
        }
        if (!seen.insert(at).second) {
            throw ProtocolError(device, fmt::format("{}: the capability chain loops back to offset 0x{:x}", what, at));
        }
        auto header = load<vfio_info_cap_header>(info, at);
        if (header.id == id) return info.subspan(at);
        at = header.next;
    }
    return std::nullopt;
}

std::vector<IovaWindow> parse_iova_range_capability(const std::string& device, std::span<const std::byte> cap) {
    constexpr size_t fixed = sizeof(vfio_iommu_type1_info_cap_iova_range);
    if (cap.size() < fixed) {
        throw ProtocolError(device, "VFIO_IOMMU_GET_INFO: the IOVA range capability is truncated");
    }
    auto header = load<vfio_iommu_type1_info_cap_iova_range>(cap, 0);
    auto bytes = checked_mul<uint64_t>(header.nr_iovas, sizeof(vfio_iova_range));
    if (!bytes || !range_within(fixed, *bytes, cap.size())) {
        throw ProtocolError(device, fmt::format("VFIO_IOMMU_GET_INFO: the IOVA range capability claims {} ranges, more "
                                                "than its buffer holds",
                                                header.nr_iovas));
    }
    std::vector<IovaWindow> windows;
    for (uint32_t i = 0; i < header.nr_iovas; ++i) {
        auto r = load<vfio_iova_range>(cap, fixed + i * sizeof(vfio_iova_range));
        if (r.end < r.start) {
            throw ProtocolError(device, fmt::format("VFIO_IOMMU_GET_INFO: IOVA range {} ends at 0x{:x} before it starts "
                                                    "at 0x{:x}",
                                                    i, r.end, r.start));
        }
        windows.push_back({r.start, r.end});
    }
    return windows;
}

std::vector<SparseArea> parse_sparse_mmap_capability(const std::string& device, std::span<const std::byte> cap,
                                                     uint64_t region_size) {
    constexpr size_t fixed = sizeof(vfio_region_info_cap_sparse_mmap);
    if (cap.size() < fixed) throw ProtocolError(device, "VFIO_DEVICE_GET_REGION_INFO: the sparse mmap capability is truncated");
    auto header = load<vfio_region_info_cap_sparse_mmap>(cap, 0);
    auto bytes = checked_mul<uint64_t>(header.nr_areas, sizeof(vfio_region_sparse_mmap_area));
    if (!bytes || !range_within(fixed, *bytes, cap.size())) {
        throw ProtocolError(device, fmt::format("VFIO_DEVICE_GET_REGION_INFO: the sparse mmap capability claims {} "
                                                "areas, more than its buffer holds",
                                                header.nr_areas));
    }
    std::vector<SparseArea> areas;
    for (uint32_t i = 0; i < header.nr_areas; ++i) {
        auto a = load<vfio_region_sparse_mmap_area>(cap, fixed + i * sizeof(vfio_region_sparse_mmap_area));
        if (!range_within(a.offset, a.size, region_size)) {
            throw ProtocolError(device, fmt::format("VFIO_DEVICE_GET_REGION_INFO: sparse mmap area {} (0x{:x}+0x{:x}) "
                                                    "lies outside the 0x{:x}-byte region",
                                                    i, a.offset, a.size, region_size));
        }
        if (a.size != 0) areas.push_back({a.offset, a.size});
    }
    return areas;
}

}  // namespace baregpu::pci
