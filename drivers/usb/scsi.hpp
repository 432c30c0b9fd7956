// The stock/patched ASM2464 firmware's SCSI protocol, wire formats only (tinygrad usb.py before
// it dropped the SCSI path in commit d6fddb066f; extra/usbgpu/patch.py): Bulk-Only Transport
// wrappers (USB Mass Storage Class Bulk-Only Transport 1.0, 5.1 CBW and 5.2 CSW), the UAS
// information units (T10 USB Attached SCSI; layouts as Linux include/linux/usb/uas.h), fixed-format
// sense data (SPC-4 4.5.3), and the vendor CDBs the firmware answers (no public source but
// tinygrad's usb.py). scsi_transport.hpp sends them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

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

// BOT 1.0 3.1: Bulk-Only Mass Storage Reset, class request to the interface (bmRequestType 0x21).
inline constexpr uint8_t kBotResetRequestType = 0x21;
inline constexpr uint8_t kBotResetRequest = 0xFF;
// bCSWStatus (BOT 1.0 5.2).
inline constexpr uint8_t kCswPassed = 0, kCswFailed = 1, kCswPhaseError = 2;
// Like decode_csw but returns a failed status instead of throwing (the caller decides).
Csw decode_csw_any_status(const std::string& device, std::span<const std::byte, kCswBytes> bytes, uint32_t expected_tag);

// UAS information units (uas.h): every IU starts with iu_id, a reserved byte and the tag (big-endian).
enum class IuId : uint8_t { Command = 0x01, Status = 0x03, Response = 0x04, TaskManagement = 0x05, ReadReady = 0x06, WriteReady = 0x07 };
// Command IU: IU ID 0x01 at 0, the tag (the stream id, 1..31) big-endian at 2, the CDB at 16.
inline constexpr size_t kCommandIuBytes = 32;
std::array<std::byte, kCommandIuBytes> encode_command_iu(uint16_t tag, std::span<const uint8_t> cdb);
// Task Management IU (uas.h task_mgmt_iu): function at 4, the managed task's tag at 6, 16 bytes.
inline constexpr size_t kTaskManagementIuBytes = 16;
inline constexpr uint8_t kTmfAbortTask = 0x01, kTmfLogicalUnitReset = 0x08;
std::array<std::byte, kTaskManagementIuBytes> encode_task_management_iu(uint16_t tag, uint8_t function, uint16_t task_tag);
// Response IU (uas.h response_iu, 8 bytes): response code at 7. TMF COMPLETE 0x00 and SUCCEEDED 0x08
// mean the device let go of the task.
inline constexpr size_t kResponseIuBytes = 8;
inline constexpr uint8_t kRcTmfComplete = 0x00, kRcInvalidIu = 0x02, kRcTmfSucceeded = 0x08, kRcOverlappedTag = 0x0a;
// Sense IU (uas.h sense_iu): status at 6, sense length (big-endian) at 14, sense data from 16.
inline constexpr size_t kSenseIuHeader = 16;
inline constexpr size_t kStatusIuMax = 64;  // what the host posts on the status pipe (tinygrad reads 64)
// SCSI status codes (SAM-5): GOOD 0x00, CHECK CONDITION 0x02.
inline constexpr uint8_t kStatusGood = 0x00, kStatusCheckCondition = 0x02;

struct Iu {
    IuId id{};
    uint16_t tag = 0;
    uint8_t status = 0;  // Sense IU
    uint8_t response = 0;  // Response IU
    std::span<const std::byte> sense;  // Sense IU, within the decoded bytes
};
// Throws ProtocolError naming `device` on an IU too short for its kind or an unknown IU ID.
Iu decode_iu(const std::string& device, std::span<const std::byte> bytes);
// The sense IU the device answers with, for the simulated bridge.
std::vector<std::byte> encode_sense_iu(uint16_t tag, uint8_t status, std::span<const std::byte> sense);
std::array<std::byte, kResponseIuBytes> encode_response_iu(uint16_t tag, uint8_t response);
std::array<std::byte, 4> encode_ready_iu(IuId id, uint16_t tag);

// Fixed-format sense data (SPC-4 4.5.3): response code 0x70, sense key at 2, ASC/ASCQ at 12/13.
inline constexpr size_t kFixedSenseBytes = 18;
struct Sense {
    uint8_t key = 0;
    uint8_t asc = 0;
    uint8_t ascq = 0;
};
std::array<std::byte, kFixedSenseBytes> encode_sense(Sense sense);
Sense decode_sense(std::span<const std::byte> bytes);
// "ILLEGAL REQUEST, asc/ascq 0x20/0x00 (invalid command operation code)": names the key and the
// additional sense codes this bridge's failures carry.
std::string describe(Sense sense);
inline constexpr uint8_t kSenseIllegalRequest = 0x05, kSenseAbortedCommand = 0x0B, kSenseUnitAttention = 0x06;

// Vendor CDBs (no public source but tinygrad). XDATA addresses are sent as (a & 0x1FFFF) | 0x500000.
inline constexpr uint32_t xdata_cdb_address(uint32_t a) { return (a & 0x1FFFF) | 0x500000; }
std::array<uint8_t, 6> cdb_xdata_read(uint32_t address, uint8_t length);  // 0xE4, length <= 0xFF
std::array<uint8_t, 6> cdb_xdata_write(uint32_t address, uint8_t value);  // 0xE5, one byte
std::array<uint8_t, 16> cdb_sram_write(uint64_t lba, uint32_t sectors);  // 0x8A WRITE(16): data lands in the bridge SRAM
inline constexpr uint8_t kOpXdataRead = 0xE4, kOpXdataWrite = 0xE5, kOpWrite16 = 0x8A;
// One WRITE(16) carries at most 64 KB (tinygrad usb.py ScsiWriteOp and the XDATA fixups after it).
inline constexpr uint32_t kMaxWriteBytes = 64 * 1024;

}  // namespace baregpu::usb::scsi
