#include "drivers/sim/amdgpu/discovery_image.hpp"

#include <cstring>

namespace baregpu::sim::amdgpu {

namespace {

class Writer {
public:
    std::vector<std::byte> bytes;
    size_t size() const { return bytes.size(); }
    void u8(uint8_t v) { bytes.push_back(std::byte{v}); }
    void u16(uint16_t v) { put(&v, 2); }
    void u32(uint32_t v) { put(&v, 4); }
    void zeros(size_t n) { bytes.insert(bytes.end(), n, std::byte{0}); }
    void put16(size_t at, uint16_t v) { std::memcpy(bytes.data() + at, &v, 2); }

private:
    void put(const void* p, size_t n) {
        const auto* b = static_cast<const std::byte*>(p);
        bytes.insert(bytes.end(), b, b + n);
    }
};

uint16_t byte_sum(const std::vector<std::byte>& bytes, size_t from, size_t n) {
    uint32_t sum = 0;
    for (size_t i = from; i < from + n; ++i) sum += static_cast<uint8_t>(bytes[i]);
    return static_cast<uint16_t>(sum);
}

}  // namespace

std::vector<std::byte> build_discovery_image(const AsicInfo& asic) {
    using namespace discovery;
    Writer w;
    // binary_header v2: signature, version_major/minor, binary_checksum, binary_size, num_tables,
    // padding, table_list[num_tables] {offset, checksum, size, padding}.
    w.u32(kBinarySignature);
    w.u16(2);
    w.u16(0);
    w.u16(0);  // binary_checksum, filled in last
    w.u16(0);  // binary_size
    w.u16(kTotalTables);
    w.u16(0);
    const size_t table_list = w.size();
    w.zeros(8 * kTotalTables);

    // ip_discovery_header (80 bytes): signature, version 4, size, id, num_dies, die_info[16],
    // then at +78 base_addr_64_bit (0: u32 bases).
    const size_t ip_table = w.size();
    w.u32(kIpTableSignature);
    w.u16(4);
    w.u16(0);  // size, below
    w.u32(0);  // id
    w.u16(1);  // num_dies
    const size_t die_info = w.size();
    w.zeros(4 * 16);
    w.u8(0);   // base_addr_64_bit = 0
    w.u8(0);
    const size_t die = w.size();
    w.put16(die_info, 0);  // die_id
    w.put16(die_info + 2, static_cast<uint16_t>(die));
    w.u16(0);  // die_header.die_id
    w.u16(static_cast<uint16_t>(asic.ips.size()));
    for (const IpBlock& ip : asic.ips) {
        // struct ip_v4: hw_id, instance_number, num_base_address, major, minor, revision,
        // sub_revision:4 | variant:4, then the bases.
        w.u16(ip.hw_id);
        w.u8(ip.instance);
        w.u8(ip.base_count);
        w.u8(ip.version.major);
        w.u8(ip.version.minor);
        w.u8(ip.version.revision);
        w.u8(0);
        for (unsigned i = 0; i < ip.base_count; ++i) w.u32(ip.bases[i]);
    }
    const size_t ip_table_size = w.size() - ip_table;
    w.put16(ip_table + 6, static_cast<uint16_t>(ip_table_size));

    // harvest_table: harvest_info_header {signature, version}, list[32] {hw_id, number_instance,
    // reserved}; an all-zero list = nothing harvested.
    const size_t harvest = w.size();
    w.u32(kHarvestSignature);
    w.u32(0);
    w.zeros(4 * 32);
    const size_t harvest_size = w.size() - harvest;

    // gc_info_v1_2: gpu_info_header {table_id, version_major 1, version_minor 2, size}, then the
    // fields in discovery.h order.
    const size_t gc = w.size();
    const GcInfo& g = asic.gc;
    w.u32(kGcTableId);
    w.u16(1);
    w.u16(2);
    w.u32(kGcInfoV12Bytes);
    for (uint32_t v : {g.num_se, g.num_wgp0_per_sa, g.num_wgp1_per_sa, g.num_rb_per_se, g.num_gl2c, g.num_gprs,
                       uint32_t{32} /*gc_num_max_gs_thds*/, uint32_t{32} /*gc_gs_table_depth*/,
                       uint32_t{1792} /*gc_gsprim_buff_depth*/, uint32_t{1024} /*gc_parameter_cache_depth*/,
                       uint32_t{1} /*gc_double_offchip_lds_buffer*/, g.wave_size, g.max_waves_per_simd,
                       g.max_scratch_slots_per_cu, g.lds_size_kib, g.num_sc_per_se, g.num_sa_per_se,
                       g.num_packer_per_sc, g.num_gl2a}) {
        w.u32(v);
    }
    while (w.size() - gc < kGcInfoV12Bytes) w.u32(0);  // v1.1/v1.2 extras: not modelled, zero
    const size_t gc_size = w.size() - gc;

    auto set_table = [&](unsigned index, size_t offset, size_t size) {
        size_t at = table_list + 8 * index;
        w.put16(at, static_cast<uint16_t>(offset));
        w.put16(at + 2, byte_sum(w.bytes, offset, size));
        w.put16(at + 4, static_cast<uint16_t>(size));
    };
    set_table(kIpDiscovery, ip_table, ip_table_size);
    set_table(kGc, gc, gc_size);
    set_table(kHarvestInfo, harvest, harvest_size);
    w.put16(10, static_cast<uint16_t>(w.size()));  // binary_size
    w.put16(8, byte_sum(w.bytes, 10, w.size() - 10));
    return w.bytes;
}

}  // namespace baregpu::sim::amdgpu
