// The IP discovery binary: which IP blocks (GC, SDMA, MP0/PSP, MP1/SMU, ...) a chip has, their
// versions and their register base addresses. RDNA3/RDNA4 keep it in the top of VRAM (the AM driver
// reads it from there); older chips ship it as amdgpu/<chip>_ip_discovery.bin. Same format both ways.
// Layout: Linux drivers/gpu/drm/amd/include/discovery.h (binary_header, table_info,
// ip_discovery_header, die_header, ip / ip_v3 / ip_v4), torvalds/linux 02e778f12359; checksums
// (16-bit sums of bytes) as amdgpu_discovery_init checks them; hw ids: include/soc15_hw_ip.h.
#pragma once

#include "firmware-loader/byte_reader.hpp"

#include <optional>
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

// harvest_info (discovery.h): an IP instance fused off on this board.
struct HarvestedIp {
    uint16_t hw_id = 0;
    uint8_t instance = 0;
};

// gc_info_v1_x (discovery.h, RDNA): the shader array shape. v2_x (CDNA) is not decoded.
struct GcInfo {
    uint16_t version_major = 0, version_minor = 0;
    uint32_t num_se = 0, num_wgp0_per_sa = 0, num_wgp1_per_sa = 0, num_rb_per_se = 0, num_gl2c = 0, num_gprs = 0;
    uint32_t wave_size = 0, max_waves_per_simd = 0, max_scratch_slots_per_cu = 0, lds_size = 0;
    uint32_t num_sc_per_se = 0, num_sa_per_se = 0, num_packer_per_sc = 0, num_gl2a = 0;
    // Compute units: 2 per WGP.
    uint32_t compute_units() const { return num_se * num_sa_per_se * (num_wgp0_per_sa + num_wgp1_per_sa) * 2; }
};

struct Discovery {
    static constexpr uint32_t kBinarySignature = 0x28211407;  // BINARY_SIGNATURE
    static constexpr uint32_t kTableSignature = 0x53445049;   // DISCOVERY_TABLE_SIGNATURE, "IPDS"
    static constexpr uint32_t kHarvestSignature = 0x56524148; // HARVEST_TABLE_SIGNATURE, "HARV"
    static constexpr uint32_t kGcTableId = 0x4347;            // GC_TABLE_ID, "GC"

    uint16_t version_major = 0, version_minor = 0;  // binary_header
    uint16_t binary_size = 0;
    uint16_t table_version = 0;                      // ip_discovery_header.version (1-4)
    Region ip_table;
    std::vector<DiscoveryDie> dies;
    // table_list[HARVEST_INFO] and table_list[GC], when the binary has them (offset != 0): each
    // checked against its table checksum and signature.
    bool has_harvest_table = false;
    std::vector<HarvestedIp> harvested;  // the non-empty entries
    std::optional<GcInfo> gc_info;

    // The first instance of hw_id on any die, or nullptr.
    const DiscoveredIp* find(uint16_t hw_id, uint8_t instance = 0) const;
};

// Checks both signatures, binary_size against the bytes given, the binary and IP-table
// checksums, and that every die, IP entry and base-address list lies inside the IP table. The
// harvest and GC tables, when present, are checked the same way (signature, checksum, bounds).
Discovery parse_discovery(const ByteReader& file);

}  // namespace baregpu::fw::amd
