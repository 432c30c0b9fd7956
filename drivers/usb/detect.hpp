// Which protocol a bridge speaks, decided from its descriptors alone (nothing is sent to it):
// tinygrad's custom firmware (vendor requests, tinygrad usb.py) or the stock/patched firmware's
// USB mass storage over UAS or BOT.
#pragma once

#include "drivers/usb/usb_backend.hpp"

#include <optional>
#include <string_view>

namespace baregpu::usb {

enum class BridgeProtocol {
    CustomFirmware,  // vendor requests 0xE4/E5/F0/F2/F3, bulk 0x02 / 0x81
    Uas,  // SCSI over USB Attached SCSI (mass storage, protocol 0x62)
    Bot,  // SCSI over Bulk-Only Transport (mass storage, protocol 0x50)
};

std::string_view to_string(BridgeProtocol protocol);

// nullopt: not an ASM24xx bridge we know.
std::optional<BridgeProtocol> detect_protocol(const DeviceDescriptor& descriptor);

}  // namespace baregpu::usb
