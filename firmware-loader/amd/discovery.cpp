#include "firmware-loader/amd/discovery.hpp"

#include "base/checked.hpp"

#include <array>

namespace baregpu::fw::amd {

namespace {

constexpr uint64_t kBinaryChecksumEnd = 10;  // the sum covers the bytes after binary_checksum (u16 at 8)
constexpr uint64_t kTableList = 12;          // binary_header.table_list[]
constexpr uint64_t kIpHeaderBytes = 80;      // ip_discovery_header with die_info[16] and its padding
constexpr uint16_t kMaxDies = 16;

// [offset, offset + size) must lie inside the binary (binary_size), not just the bytes given.
void binary_region(const ByteReader& file, const Region& binary, uint64_t offset, uint64_t size, const std::string& what,
                   uint64_t at) {
    file.expect(range_within(offset, size, binary.size()), what, at,
                std::to_string(size) + " bytes inside the binary (binary_size " + std::to_string(binary.size()) + ")",
                "offset " + std::to_string(offset));
}

uint16_t byte_sum(std::span<const std::byte> bytes) {
    uint32_t sum = 0;
    for (std::byte b : bytes) sum += static_cast<uint8_t>(b);
    return static_cast<uint16_t>(sum);
}

}  // namespace

std::string DiscoveredIp::version() const {
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(revision);
}

std::string hw_id_name(uint16_t hw_id) {
    struct Name {
        uint16_t id;
        const char* name;
    };
    static constexpr Name kNames[] = {
        {1, "MP1"},      {2, "MP2"},      {3, "THM"},       {4, "SMUIO"},   {5, "FUSE"},     {6, "CLKA"},
        {10, "PWR"},     {11, "GC"},      {12, "UVD/VCN"},  {13, "AUDIO_AZ"}, {14, "ACP"},   {15, "DCI"},
        {16, "DCO"},     {17, "XDMA"},    {18, "DCEAZ"},    {19, "SDPMUX"}, {20, "NTB"},     {24, "IOHC"},
        {28, "L2IMU"},   {32, "VCE"},     {34, "MMHUB"},    {35, "ATHUB"},  {36, "DBGU_NBIO"}, {37, "DFX"},
        {38, "DBGU0"},   {39, "DBGU1"},   {40, "OSSSYS"},   {41, "HDP"},    {42, "SDMA0"},   {43, "SDMA1"},
        {44, "ISP"},     {45, "DBGU_IO"}, {46, "DF"},       {47, "CLKB"},   {48, "FCH"},     {49, "DFX_DAP"},
        {50, "L1IMU_PCIE"}, {51, "L1IMU_NBIF"}, {52, "L1IMU_IOAGR"}, {66, "WAFLC"}, {67, "FCH_USB_PD"},
        {68, "SDMA2"},   {69, "SDMA3"},   {70, "PCIE"},     {80, "PCS"},    {89, "DDCL"},    {90, "SST"},
        {100, "IOAGR"},  {108, "NBIF"},   {124, "IOAPIC"},  {128, "SYSTEMHUB"}, {144, "NTBCCP"}, {150, "UMC"},
        {168, "SATA"},   {170, "USB"},    {176, "CCXSEC"},  {200, "XGMI"},  {216, "XGBE"},   {255, "MP0"},
        {271, "DMU"},    {272, "DIO"},    {274, "DAZ"},
    };
    for (const Name& n : kNames)
        if (n.id == hw_id) return n.name;
    if (hw_id >= 53 && hw_id <= 65) return "L1IMU" + std::to_string(hw_id - 50);
    return "HWID " + std::to_string(hw_id);
}

const DiscoveredIp* Discovery::find(uint16_t hw_id, uint8_t instance) const {
    for (const DiscoveryDie& die : dies)
        for (const DiscoveredIp& ip : die.ips)
            if (ip.hw_id == hw_id && ip.instance == instance) return &ip;
    return nullptr;
}

Discovery parse_discovery(const ByteReader& file) {
    Discovery d;
    file.expect_eq(file.u32(0, "binary_signature"), Discovery::kBinarySignature, "binary_signature", 0);
    d.version_major = file.u16(4, "version_major");
    d.version_minor = file.u16(6, "version_minor");
    file.expect(d.version_major == 1 || d.version_major == 2, "binary_header.version_major", 4, "1 or 2",
                std::to_string(d.version_major));
    uint16_t checksum = file.u16(8, "binary_checksum");
    d.binary_size = file.u16(10, "binary_size");
    file.expect(d.binary_size >= kBinaryChecksumEnd && d.binary_size <= file.size(), "binary_size", 10,
                "10 to " + std::to_string(file.size()) + " (the bytes given)", std::to_string(d.binary_size));
    Region summed = file.region(kBinaryChecksumEnd, d.binary_size - kBinaryChecksumEnd, "binary (binary_size)");
    uint16_t sum = byte_sum(summed.bytes);
    file.expect(sum == checksum, "binary_checksum", 8, hex(checksum) + " (the byte sum of the binary)", hex(sum));

    // table_list[IP_DISCOVERY] (v1) or the first of num_tables entries (v2 adds num_tables, padding).
    uint64_t list = d.version_major == 2 ? kTableList + 4 : kTableList;
    if (d.version_major == 2)
        file.expect(file.u16(kTableList, "num_tables") >= 1, "num_tables", kTableList, "at least 1", "0");
    uint16_t table_offset = file.u16(list, "table_list[IP_DISCOVERY].offset");
    uint16_t table_checksum = file.u16(list + 2, "table_list[IP_DISCOVERY].checksum");
    Region binary = file.region(0, d.binary_size, "binary (binary_size)");
    file.expect(table_offset < binary.size(), "table_list[IP_DISCOVERY].offset", list,
                "an offset inside the binary (< " + std::to_string(binary.size()) + ")", std::to_string(table_offset));
    file.expect_eq(file.u32(table_offset, "ip_discovery_header.signature"), Discovery::kTableSignature,
                   "ip_discovery_header.signature (\"IPDS\")", table_offset);
    d.table_version = file.u16(table_offset + 4, "ip_discovery_header.version");
    file.expect(d.table_version >= 1 && d.table_version <= 4, "ip_discovery_header.version", table_offset + 4, "1 to 4",
                std::to_string(d.table_version));
    uint16_t table_size = file.u16(table_offset + 6, "ip_discovery_header.size");
    file.expect(table_size >= kIpHeaderBytes && table_size <= binary.size() - table_offset, "ip_discovery_header.size",
                table_offset + 6, "80 to " + std::to_string(binary.size() - table_offset) + " (inside the binary)",
                std::to_string(table_size));
    d.ip_table = file.region(table_offset, table_size, "IP discovery table");
    uint16_t table_sum = byte_sum(d.ip_table.bytes);
    file.expect(table_sum == table_checksum, "table_list[IP_DISCOVERY].checksum", list + 2,
                hex(table_checksum) + " (the byte sum of the IP discovery table)", hex(table_sum));

    uint16_t num_dies = file.u16(table_offset + 12, "ip_discovery_header.num_dies");
    file.expect(num_dies >= 1 && num_dies <= kMaxDies, "ip_discovery_header.num_dies", table_offset + 12, "1 to 16",
                std::to_string(num_dies));
    bool wide = d.table_version == 4 && (file.u8(table_offset + 78, "ip_discovery_header.base_addr_64_bit") & 1);
    const uint64_t address_bytes = wide ? 8 : 4;
    for (uint16_t i = 0; i < num_dies; ++i) {
        uint64_t info = table_offset + 14 + 4u * i;
        DiscoveryDie die;
        die.die_id = file.u16(info, "die_info[].die_id");
        uint16_t die_offset = file.u16(info + 2, "die_info[].die_offset");
        binary_region(file, binary, die_offset, 4, "die_header (die_info[].die_offset)", info + 2);
        uint16_t num_ips = file.u16(die_offset + 2, "die_header.num_ips");
        uint64_t at = die_offset + 4u;
        for (uint16_t n = 0; n < num_ips; ++n) {
            // Each entry is at least 8 bytes, so num_ips is bounded by the binary's size.
            binary_region(file, binary, at, 8, "ip entry " + std::to_string(n) + " of die " + std::to_string(die.die_id), at);
            DiscoveredIp ip;
            ip.hw_id = file.u16(at, "ip.hw_id");
            ip.instance = file.u8(at + 2, "ip.number_instance");
            uint8_t bases = file.u8(at + 3, "ip.num_base_address");
            ip.major = file.u8(at + 4, "ip.major");
            ip.minor = file.u8(at + 5, "ip.minor");
            ip.revision = file.u8(at + 6, "ip.revision");
            uint8_t last = file.u8(at + 7, "ip.harvest/sub_revision");
            ip.harvest_or_subrevision = last & 0xf;
            ip.variant = d.table_version >= 3 ? last >> 4 : 0;
            binary_region(file, binary, at + 8, bases * address_bytes, "ip.base_address[num_base_address]", at + 3);
            for (uint8_t b = 0; b < bases; ++b)
                ip.base_addresses.push_back(wide ? file.u64(at + 8 + 8u * b, "ip.base_address_64")
                                                 : file.u32(at + 8 + 4u * b, "ip.base_address"));
            at += 8 + bases * address_bytes;
            die.ips.push_back(std::move(ip));
        }
        d.dies.push_back(std::move(die));
    }

    // The other tables of table_list[] (discovery.h: IP_DISCOVERY 0, GC 1, HARVEST_INFO 2, ...).
    uint16_t num_tables = d.version_major == 2 ? file.u16(kTableList, "num_tables") : 6;
    auto table = [&](unsigned index, const char* name) -> std::optional<Region> {
        if (index >= num_tables) return std::nullopt;
        uint64_t entry = list + 8u * index;
        uint16_t offset = file.u16(entry, "table_list[].offset");
        if (offset == 0) return std::nullopt;
        uint16_t expected_sum = file.u16(entry + 2, "table_list[].checksum");
        uint16_t size = file.u16(entry + 4, "table_list[].size");
        std::string field = std::string("table_list[") + name + "]";
        binary_region(file, binary, offset, size, field, entry);
        Region r = file.region(offset, size, field);
        uint16_t got = byte_sum(r.bytes);
        file.expect(got == expected_sum, field + ".checksum", entry + 2, hex(expected_sum) + " (the byte sum of the table)",
                    hex(got));
        return r;
    };
    if (auto h = table(2, "HARVEST_INFO")) {
        // harvest_info_header {signature, version}, then harvest_info list[32] {hw_id u16, number_instance u8, reserved u8}.
        file.expect(h->size() >= 8 + 4 * 32, "harvest table size", h->offset, "at least 136 bytes", std::to_string(h->size()));
        file.expect_eq(file.u32(h->offset, "harvest_info_header.signature"), Discovery::kHarvestSignature,
                       "harvest_info_header.signature (\"HARV\")", h->offset);
        d.has_harvest_table = true;
        for (unsigned i = 0; i < 32; ++i) {
            uint64_t at = h->offset + 8 + 4u * i;
            uint16_t id = file.u16(at, "harvest_info.hw_id");
            if (id == 0) continue;
            d.harvested.push_back({id, file.u8(at + 2, "harvest_info.number_instance")});
        }
    }
    if (auto g = table(1, "GC")) {
        // gpu_info_header {table_id u32, version_major u16, version_minor u16, size u32}, then gc_info_v1_x.
        file.expect_eq(file.u32(g->offset, "gpu_info_header.table_id"), Discovery::kGcTableId,
                       "gpu_info_header.table_id (GC_TABLE_ID)", g->offset);
        uint16_t major = file.u16(g->offset + 4, "gpu_info_header.version_major");
        if (major == 1) {
            file.expect(g->size() >= 12 + 19 * 4, "gc_info_v1_0 size", g->offset, "at least 88 bytes", std::to_string(g->size()));
            GcInfo gc;
            gc.version_major = major;
            gc.version_minor = file.u16(g->offset + 6, "gpu_info_header.version_minor");
            auto f = [&](unsigned n, const char* name) { return file.u32(g->offset + 12 + 4u * n, name); };
            gc.num_se = f(0, "gc_num_se");
            gc.num_wgp0_per_sa = f(1, "gc_num_wgp0_per_sa");
            gc.num_wgp1_per_sa = f(2, "gc_num_wgp1_per_sa");
            gc.num_rb_per_se = f(3, "gc_num_rb_per_se");
            gc.num_gl2c = f(4, "gc_num_gl2c");
            gc.num_gprs = f(5, "gc_num_gprs");
            gc.wave_size = f(11, "gc_wave_size");
            gc.max_waves_per_simd = f(12, "gc_max_waves_per_simd");
            gc.max_scratch_slots_per_cu = f(13, "gc_max_scratch_slots_per_cu");
            gc.lds_size = f(14, "gc_lds_size");
            gc.num_sc_per_se = f(15, "gc_num_sc_per_se");
            gc.num_sa_per_se = f(16, "gc_num_sa_per_se");
            gc.num_packer_per_sc = f(17, "gc_num_packer_per_sc");
            gc.num_gl2a = f(18, "gc_num_gl2a");
            d.gc_info = gc;
        }
    }
    return d;
}

}  // namespace baregpu::fw::amd
