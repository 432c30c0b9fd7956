#include "drivers/usb/scsi.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

#include <algorithm>
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

Csw decode_csw_any_status(const std::string& device, std::span<const std::byte, kCswBytes> b, uint32_t expected_tag) {
    const uint32_t signature = get_le32(&b[0]);
    if (signature != kCswSignature) {
        throw ProtocolError(device, fmt::format("CSW signature {:#010x}, expected {:#010x} (\"USBS\")", signature, kCswSignature));
    }
    Csw c{get_le32(&b[4]), get_le32(&b[8]), static_cast<uint8_t>(b[12])};
    if (c.tag != expected_tag) throw ProtocolError(device, fmt::format("CSW tag {}, expected {} (the CBW's)", c.tag, expected_tag));
    return c;
}

Csw decode_csw(const std::string& device, std::span<const std::byte, kCswBytes> b, uint32_t expected_tag) {
    const Csw c = decode_csw_any_status(device, b, expected_tag);
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

std::array<std::byte, kTaskManagementIuBytes> encode_task_management_iu(uint16_t tag, uint8_t function, uint16_t task_tag) {
    std::array<std::byte, kTaskManagementIuBytes> b{};
    b[0] = std::byte(IuId::TaskManagement);
    b[2] = std::byte(tag >> 8), b[3] = std::byte(tag & 0xff);
    b[4] = std::byte(function);
    b[6] = std::byte(task_tag >> 8), b[7] = std::byte(task_tag & 0xff);
    return b;
}

Iu decode_iu(const std::string& device, std::span<const std::byte> b) {
    if (b.size() < 4) throw ProtocolError(device, fmt::format("UAS IU of {} bytes: shorter than the 4-byte IU header", b.size()));
    Iu iu;
    iu.id = IuId(b[0]);
    iu.tag = static_cast<uint16_t>(uint16_t(b[2]) << 8 | uint16_t(b[3]));
    switch (iu.id) {
        case IuId::Status: {
            if (b.size() < kSenseIuHeader) throw ProtocolError(device, fmt::format("sense IU of {} bytes: shorter than 16", b.size()));
            iu.status = static_cast<uint8_t>(b[6]);
            const size_t len = size_t(b[14]) << 8 | size_t(b[15]);
            iu.sense = b.subspan(kSenseIuHeader, std::min(len, b.size() - kSenseIuHeader));
            return iu;
        }
        case IuId::Response:
            if (b.size() < kResponseIuBytes) throw ProtocolError(device, fmt::format("response IU of {} bytes: shorter than 8", b.size()));
            iu.response = static_cast<uint8_t>(b[7]);
            return iu;
        case IuId::ReadReady:
        case IuId::WriteReady: return iu;
        default: throw ProtocolError(device, fmt::format("UAS IU ID {:#04x} on the status pipe: not a sense, response or ready IU", uint8_t(b[0])));
    }
}

std::vector<std::byte> encode_sense_iu(uint16_t tag, uint8_t status, std::span<const std::byte> sense) {
    std::vector<std::byte> b(kSenseIuHeader + sense.size());
    b[0] = std::byte(IuId::Status);
    b[2] = std::byte(tag >> 8), b[3] = std::byte(tag & 0xff);
    b[6] = std::byte(status);
    b[14] = std::byte(sense.size() >> 8), b[15] = std::byte(sense.size() & 0xff);
    if (!sense.empty()) std::memcpy(b.data() + kSenseIuHeader, sense.data(), sense.size());
    return b;
}

std::array<std::byte, kResponseIuBytes> encode_response_iu(uint16_t tag, uint8_t response) {
    std::array<std::byte, kResponseIuBytes> b{};
    b[0] = std::byte(IuId::Response);
    b[2] = std::byte(tag >> 8), b[3] = std::byte(tag & 0xff);
    b[7] = std::byte(response);
    return b;
}

std::array<std::byte, 4> encode_ready_iu(IuId id, uint16_t tag) { return {std::byte(id), std::byte{0}, std::byte(tag >> 8), std::byte(tag & 0xff)}; }

std::array<std::byte, kFixedSenseBytes> encode_sense(Sense s) {
    std::array<std::byte, kFixedSenseBytes> b{};
    b[0] = std::byte{0x70};  // current error, fixed format
    b[2] = std::byte(s.key & 0x0f);
    b[7] = std::byte(kFixedSenseBytes - 8);  // additional sense length
    b[12] = std::byte(s.asc);
    b[13] = std::byte(s.ascq);
    return b;
}

Sense decode_sense(std::span<const std::byte> b) {
    if (b.size() < 14 || (uint8_t(b[0]) & 0x7e) != 0x70) return {};  // not fixed format: nothing to name
    return {static_cast<uint8_t>(uint8_t(b[2]) & 0x0f), static_cast<uint8_t>(b[12]), static_cast<uint8_t>(b[13])};
}

std::string describe(Sense s) {
    // SPC-4 Table 28 (sense keys) and Annex D (the additional sense codes named here).
    static constexpr const char* kKeys[16] = {"NO SENSE",       "RECOVERED ERROR", "NOT READY",       "MEDIUM ERROR",
                                              "HARDWARE ERROR", "ILLEGAL REQUEST", "UNIT ATTENTION",  "DATA PROTECT",
                                              "BLANK CHECK",    "VENDOR SPECIFIC", "COPY ABORTED",    "ABORTED COMMAND",
                                              "reserved (0xC)", "VOLUME OVERFLOW", "MISCOMPARE",      "reserved (0xF)"};
    const char* what = "";
    const uint16_t code = static_cast<uint16_t>(s.asc << 8 | s.ascq);
    switch (code) {
        case 0x2000: what = " (invalid command operation code)"; break;
        case 0x2100: what = " (logical block address out of range)"; break;
        case 0x2400: what = " (invalid field in CDB)"; break;
        case 0x2900: what = " (power on, reset, or bus device reset occurred)"; break;
        case 0x4700: what = " (SCSI parity error: data phase of the wrong length)"; break;
        case 0x4b00: what = " (data phase error)"; break;
        case 0x2c00: what = " (command sequence error)"; break;
        default: break;
    }
    return fmt::format("{}, asc/ascq {:#04x}/{:#04x}{}", kKeys[s.key & 0x0f], s.asc, s.ascq, what);
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
