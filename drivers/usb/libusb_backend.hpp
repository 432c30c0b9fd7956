// Real devices through libusb-1.0. Compiled from libusb_backend.cpp when meson finds libusb,
// from libusb_absent.cpp otherwise (then enumeration finds nothing and opening says why).
#pragma once

#include "drivers/usb/detect.hpp"
#include "drivers/usb/usb_backend.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::usb {

struct BridgeInfo {
    std::string location;  // "3-2": bus number, port path joined by '.'
    uint16_t vendor_id = 0;
    uint16_t product_id = 0;
    // What its descriptors say it speaks (detect_protocol): nullopt when they say nothing we know.
    std::optional<BridgeProtocol> protocol;
};

bool libusb_available();
// ASM24xx bridges on this machine (any of the IDs in asm24_protocol.hpp); empty without libusb.
std::vector<BridgeInfo> enumerate_bridges();
// Opens the bridge at `location` ("3-2"). DeviceLostError when nothing is there, UnsupportedError
// without libusb, SystemError-like errors naming libusb's code otherwise.
std::unique_ptr<UsbBackend> open_libusb(std::string_view location);

}  // namespace baregpu::usb
