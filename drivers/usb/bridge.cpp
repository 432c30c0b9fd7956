#include "drivers/usb/bridge.hpp"

#include "base/error.hpp"
#include "drivers/usb/asm24_controller.hpp"
#include "drivers/usb/asm24_scsi_controller.hpp"

#include <fmt/format.h>

namespace baregpu::usb {

uint8_t Bridge::xdata_read8(uint16_t address) {
    std::byte b{};
    xdata_read(address, std::span(&b, 1));
    return static_cast<uint8_t>(b);
}

uint32_t Bridge::config_read(uint8_t bus, uint8_t device, uint8_t function, uint16_t reg, unsigned size) {
    const unsigned shift = 8 * (reg & 3);
    tlp::Request r{tlp::config_fmt_type(false, bus), tlp::byte_enables(size, reg & 3), tlp::Mode::Single,
                   tlp::config_address(bus, device, function, reg), 0};
    const uint32_t dword = single_tlp(r);
    return size == 4 ? dword : (dword >> shift) & ((1u << (8 * size)) - 1);
}

void Bridge::config_write(uint8_t bus, uint8_t device, uint8_t function, uint16_t reg, unsigned size, uint32_t value) {
    tlp::Request r{tlp::config_fmt_type(true, bus), tlp::byte_enables(size, reg & 3), tlp::Mode::Single,
                   tlp::config_address(bus, device, function, reg), value << (8 * (reg & 3))};
    // Config writes are non-posted (PCIe 2.4.1): the completion says whether it landed.
    single_tlp(r);
}

std::unique_ptr<Bridge> open_bridge(std::unique_ptr<UsbBackend> usb) {
    const std::optional<BridgeProtocol> protocol = detect_protocol(usb->descriptor());
    if (protocol == BridgeProtocol::Uas || protocol == BridgeProtocol::Bot) return std::make_unique<Asm24ScsiController>(std::move(usb), *protocol);
    return std::make_unique<Asm24Controller>(std::move(usb));  // the custom firmware, or the refusal naming what it is
}

}  // namespace baregpu::usb
