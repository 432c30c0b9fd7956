// VFIO's info capability chains (include/uapi/linux/vfio.h, struct vfio_info_cap_header): an
// INFO ioctl that sets its CAPS flag appends capabilities after the fixed structure, each
// {u16 id, u16 version, u32 next}, `next` an offset from the start of the info buffer, 0 at the
// end. The buffer comes from the kernel but is parsed as untrusted: every offset is bounds
// checked and a chain that loops is an error.
#pragma once

#include "drivers/pci/iova_ranges.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace baregpu::pci {

// The bytes of capability `id` (from its header to the end of the buffer), nullopt when the
// chain starting at `first` (0: no chain) does not hold it. `what` names the ioctl for errors.
std::optional<std::span<const std::byte>> find_vfio_capability(const std::string& device,
                                                               std::span<const std::byte> info, uint32_t first,
                                                               uint16_t id, const std::string& what);

// VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE (struct vfio_iommu_type1_info_cap_iova_range).
std::vector<IovaWindow> parse_iova_range_capability(const std::string& device, std::span<const std::byte> cap);

// VFIO_REGION_INFO_CAP_SPARSE_MMAP (struct vfio_region_info_cap_sparse_mmap): the parts of a
// region that may be mmapped. Areas must lie inside `region_size`, else ProtocolError.
struct SparseArea {
    uint64_t offset;
    uint64_t size;
};
std::vector<SparseArea> parse_sparse_mmap_capability(const std::string& device, std::span<const std::byte> cap,
                                                     uint64_t region_size);

}  // namespace baregpu::pci
