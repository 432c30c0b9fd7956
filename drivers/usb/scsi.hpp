// The stock/patched ASM2464 firmware's SCSI protocol, wire formats only (tinygrad usb.py before
// it dropped the SCSI path in commit d6fddb066f; extra/usbgpu/patch.py): Bulk-Only Transport
// wrappers (USB Mass Storage Class Bulk-Only Transport 1.0, 5.1 CBW and 5.2 CSW), the UAS command IU (T10 USB Attached SCSI, 6.2.2), and the vendor CDBs the firmware
// answers (no public source but tinygrad's usb.py). The transport that sends them is not written:
// Asm24Controller refuses SCSI bridges with UnsupportedError (drivers/usb/README.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace baregpu::usb::scsi {

// BOT 1.0 5.1: dCBWSignature "USBC", 31 bytes; 5.2: dCSWSignature "USBS", 13 bytes. Little-endian.
inline constexpr uint32_t kCbwSignature = 0x43425355;
inline constexpr uint32_t kCswSignature = 0x53425355;
inline constexpr size_t kCbwBytes = 31;
inline constexpr size_t kCswBytes = 13;
inline constexpr uint8_t kCbwFlagIn = 0x80;  // bmCBWFlags bit 7: data from the device
inline constexpr size_t kMaxCdb = 16;

std::array<std::byte, kCbwBytes> encode_cbw(uint32_t tag, uint32_t data_length, bool data_in, std::span<const uint8_t> cdb);

struct Csw {
    uint32_t tag = 0;
    uint32_t residue = 0;
    uint8_t status = 0;  // 0 passed, 1 failed, 2 phase error
};
// Throws ProtocolError naming `device` on a bad signature, a tag other than `expected_tag`, or a
// status other than 0 (BOT 1.0, 5.2 bCSWStatus and 6.3.1 valid CSW).
Csw decode_csw(const std::string& device, std::span<const std::byte, kCswBytes> bytes, uint32_t expected_tag);

// T10 UAS command IU: IU ID 0x01 at 0, the tag (the stream id, 1..31) big-endian at 2, the CDB at 16.
inline constexpr size_t kCommandIuBytes = 32;
std::array<std::byte, kCommandIuBytes> encode_command_iu(uint16_t tag, std::span<const uint8_t> cdb);

// Vendor CDBs (no public source but tinygrad). XDATA addresses are sent as (a & 0x1FFFF) | 0x500000.
inline constexpr uint32_t xdata_cdb_address(uint32_t a) { return (a & 0x1FFFF) | 0x500000; }
std::array<uint8_t, 6> cdb_xdata_read(uint32_t address, uint8_t length);  // 0xE4, length <= 0xFF
std::array<uint8_t, 6> cdb_xdata_write(uint32_t address, uint8_t value);  // 0xE5, one byte
std::array<uint8_t, 16> cdb_sram_write(uint64_t lba, uint32_t sectors);  // 0x8A WRITE(16): data lands in the 0xF000 window

}  // namespace baregpu::usb::scsi
