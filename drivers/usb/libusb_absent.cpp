// Built when meson did not find libusb-1.0: no real bridges, and a clear message on open.
#include "base/error.hpp"
#include "drivers/usb/libusb_backend.hpp"

namespace baregpu::usb {

bool libusb_available() { return false; }
std::vector<BridgeInfo> enumerate_bridges() { return {}; }
std::unique_ptr<UsbBackend> open_libusb(std::string_view location) {
    throw UnsupportedError("usb:" + std::string(location),
                           "this build has no libusb-1.0 (install libusb-1.0-0-dev, see bootstrap.sh, and reconfigure)");
}

}  // namespace baregpu::usb
