// Which protocol a bridge speaks, decided from its descriptors alone (nothing is sent to it):
// tinygrad's custom firmware (vendor requests, tinygrad usb.py) or the stock/patched firmware's
// USB mass storage over UAS or BOT.
#pragma once

#include "drivers/usb/usb_backend.hpp"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace baregpu::usb {

enum class BridgeProtocol {
    CustomFirmware,  // vendor requests 0xE4/E5/F0/F2/F3, bulk 0x02 / 0x81
    Uas,  // SCSI over USB Attached SCSI (mass storage, protocol 0x62)
    Bot,  // SCSI over Bulk-Only Transport (mass storage, protocol 0x50)
};

std::string_view to_string(BridgeProtocol protocol);

// nullopt: not an ASM24xx bridge we know.
std::optional<BridgeProtocol> detect_protocol(const DeviceDescriptor& descriptor);

// USB IDs the user names for a bridge that enumerates under its own (an enclosure maker's
// VID:PID, or custom firmware built with other IDs): the environment variable
// BAREGPU_USB_BRIDGE_IDS="VID:PID[,VID:PID...]" in hex, as the firmware's flash.py takes USBDEV.
inline constexpr const char* kUserIdsVariable = "BAREGPU_USB_BRIDGE_IDS";
struct UsbId {
    uint16_t vendor = 0;
    uint16_t product = 0;
    bool operator==(const UsbId&) const = default;
};
// Throws baregpu::Error naming the text when it is not a list of VID:PID pairs.
std::vector<UsbId> parse_usb_ids(std::string_view text);
std::vector<UsbId> user_bridge_ids();
// ASMedia's stock IDs, tinygrad's custom-firmware IDs, or one the user named.
bool is_bridge_id(uint16_t vendor, uint16_t product);

}  // namespace baregpu::usb
