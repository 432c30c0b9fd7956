// The IP discovery binary the chip keeps at the top of VRAM (VRAM − 64 KiB), built from the ASIC
// table. Layout: Linux include/discovery.h — binary_header (version 2: num_tables, then
// table_info[6]), ip_discovery_header version 4 with one die and u32 bases, die_header, ip_v4
// entries, a HARVEST_INFO table (harvest_table, nothing harvested) and a GC table (gc_info_v1_2).
// Checksums: 16-bit byte sums, as amdgpu_discovery.c (amdgpu_discovery_verify_checksum) checks
// them — the binary's over everything after binary_checksum, each table's over the table.
#pragma once

#include "drivers/sim/amdgpu/asic.hpp"

#include <cstddef>
#include <vector>

namespace baregpu::sim::amdgpu {

namespace discovery {
inline constexpr uint32_t kBinarySignature = 0x28211407;  // BINARY_SIGNATURE
inline constexpr uint32_t kIpTableSignature = 0x53445049;  // DISCOVERY_TABLE_SIGNATURE "IPDS"
inline constexpr uint32_t kHarvestSignature = 0x56524148;  // HARVEST_TABLE_SIGNATURE "HARV"
inline constexpr uint32_t kGcTableId = 0x4347;             // GC_TABLE_ID
// table_info indices (enum table in discovery.h).
inline constexpr unsigned kIpDiscovery = 0, kGc = 1, kHarvestInfo = 2, kTotalTables = 6;
inline constexpr unsigned kGcInfoV12Bytes = 132;  // sizeof(struct gc_info_v1_2)
}  // namespace discovery

std::vector<std::byte> build_discovery_image(const AsicInfo& asic);

}  // namespace baregpu::sim::amdgpu
