#include "drivers/usb/scsi.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

#include <cstring>

namespace baregpu::usb::scsi {

namespace {
void put_le32(std::byte* p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = std::byte(v >> (8 * i));
}
uint32_t get_le32(const std::byte* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }
void check_cdb(std::span<const uint8_t> cdb) {
    if (cdb.empty() || cdb.size() > kMaxCdb) throw Error("", fmt::format("a CDB of {} bytes: 1 to 16", cdb.size()));
}
}  // namespace

std::array<std::byte, kCbwBytes> encode_cbw(uint32_t tag, uint32_t data_length, bool data_in, std::span<const uint8_t> cdb) {
    check_cdb(cdb);
    std::array<std::byte, kCbwBytes> b{};
    put_le32(&b[0], kCbwSignature);
    put_le32(&b[4], tag);
    put_le32(&b[8], data_length);
    b[12] = std::byte(data_in ? kCbwFlagIn : 0);
    b[13] = std::byte{0};  // bCBWLUN
    b[14] = std::byte(cdb.size());
    std::memcpy(&b[15], cdb.data(), cdb.size());
    return b;
}

Csw decode_csw(const std::string& device, std::span<const std::byte, kCswBytes> b, uint32_t expected_tag) {
    const uint32_t signature = get_le32(&b[0]);
    if (signature != kCswSignature) {
        throw ProtocolError(device, fmt::format("CSW signature {:#010x}, expected {:#010x} (\"USBS\")", signature, kCswSignature));
    }
    Csw c{get_le32(&b[4]), get_le32(&b[8]), static_cast<uint8_t>(b[12])};
    if (c.tag != expected_tag) throw ProtocolError(device, fmt::format("CSW tag {}, expected {} (the CBW's)", c.tag, expected_tag));
    if (c.status != 0) {
        throw ProtocolError(device, fmt::format("CSW status {} ({}), residue {}, expected 0 (command passed)", c.status,
                                                c.status == 1 ? "command failed" : c.status == 2 ? "phase error" : "reserved", c.residue));
    }
    return c;
}

std::array<std::byte, kCommandIuBytes> encode_command_iu(uint16_t tag, std::span<const uint8_t> cdb) {
    check_cdb(cdb);
    std::array<std::byte, kCommandIuBytes> b{};
    b[0] = std::byte{0x01};  // COMMAND IU
    b[2] = std::byte(tag >> 8);
    b[3] = std::byte(tag & 0xff);
    std::memcpy(&b[16], cdb.data(), cdb.size());
    return b;
}

std::array<uint8_t, 6> cdb_xdata_read(uint32_t address, uint8_t length) {
    const uint32_t a = xdata_cdb_address(address);
    return {0xE4, length, static_cast<uint8_t>(a >> 16), static_cast<uint8_t>(a >> 8), static_cast<uint8_t>(a), 0};
}

std::array<uint8_t, 6> cdb_xdata_write(uint32_t address, uint8_t value) {
    const uint32_t a = xdata_cdb_address(address);
    return {0xE5, value, static_cast<uint8_t>(a >> 16), static_cast<uint8_t>(a >> 8), static_cast<uint8_t>(a), 0};
}

std::array<uint8_t, 16> cdb_sram_write(uint64_t lba, uint32_t sectors) {
    std::array<uint8_t, 16> c{};
    c[0] = 0x8A;
    for (int i = 0; i < 8; ++i) c[2 + i] = static_cast<uint8_t>(lba >> (56 - 8 * i));  // big-endian, as SCSI
    for (int i = 0; i < 4; ++i) c[10 + i] = static_cast<uint8_t>(sectors >> (24 - 8 * i));
    return c;
}

}  // namespace baregpu::usb::scsi
