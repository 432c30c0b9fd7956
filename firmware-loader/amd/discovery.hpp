// The IP discovery binary: which IP blocks (GC, SDMA, MP0/PSP, MP1/SMU, ...) a chip has, their
// versions and their register base addresses. RDNA3/RDNA4 keep it in the top of VRAM (the AM driver
// reads it from there); older chips ship it as amdgpu/<chip>_ip_discovery.bin. Same format both ways.
// Layout: Linux drivers/gpu/drm/amd/include/discovery.h (binary_header, table_info,
// ip_discovery_header, die_header, ip / ip_v3 / ip_v4), torvalds/linux 02e778f12359; checksums
// (16-bit sums of bytes) as amdgpu_discovery_init checks them; hw ids: include/soc15_hw_ip.h.
#pragma once

#include "firmware-loader/byte_reader.hpp"

#include <string>
#include <vector>

namespace baregpu::fw::amd {

struct DiscoveredIp {
    uint16_t hw_id = 0;            // soc15_hw_ip.h: GC 11, SDMA0 42, MP0 255, MP1 1, ...
    uint8_t instance = 0;
    uint8_t major = 0, minor = 0, revision = 0;
    uint8_t harvest_or_subrevision = 0;  // harvest bits (table v1/v2) or sub_revision (v3/v4)
    uint8_t variant = 0;                 // v3/v4 only
    std::vector<uint64_t> base_addresses;  // register bases, in dwords (as the table gives them)

    std::string version() const;   // "11.0.0"
};
// "GC", "SDMA0", "MP0", ... or "HWID N".
std::string hw_id_name(uint16_t hw_id);

struct DiscoveryDie {
    uint16_t die_id = 0;
    std::vector<DiscoveredIp> ips;
};

struct Discovery {
    static constexpr uint32_t kBinarySignature = 0x28211407;  // BINARY_SIGNATURE
    static constexpr uint32_t kTableSignature = 0x53445049;   // DISCOVERY_TABLE_SIGNATURE, "IPDS"

    uint16_t version_major = 0, version_minor = 0;  // binary_header
    uint16_t binary_size = 0;
    uint16_t table_version = 0;                      // ip_discovery_header.version (1-4)
    Region ip_table;
    std::vector<DiscoveryDie> dies;

    // The first instance of hw_id on any die, or nullptr.
    const DiscoveredIp* find(uint16_t hw_id, uint8_t instance = 0) const;
};

// Checks both signatures, binary_size against the bytes given, the binary and IP-table
// checksums, and that every die, IP entry and base-address list lies inside the IP table.
Discovery parse_discovery(const ByteReader& file);

}  // namespace baregpu::fw::amd
