#include "drivers/usb/detect.hpp"

#include "drivers/usb/asm24_protocol.hpp"

namespace baregpu::usb {

namespace {
// USB Mass Storage Class Specification Overview 1.4: class 0x08, subclass 0x06 (SCSI transparent),
// protocol 0x50 (BOT) and 0x62 (UAS).
constexpr uint8_t kMassStorage = 0x08;
constexpr uint8_t kScsiTransparent = 0x06;
constexpr uint8_t kProtocolBot = 0x50;
constexpr uint8_t kProtocolUas = 0x62;
}  // namespace

std::string_view to_string(BridgeProtocol protocol) {
    switch (protocol) {
        case BridgeProtocol::CustomFirmware: return "custom firmware (vendor requests)";
        case BridgeProtocol::Uas: return "SCSI over UAS (stock/patched firmware)";
        case BridgeProtocol::Bot: return "SCSI over BOT (stock/patched firmware)";
    }
    return "?";
}

std::optional<BridgeProtocol> detect_protocol(const DeviceDescriptor& d) {
    const bool custom_ids =
        (d.vendor_id == asm24::kCustomVendor || d.vendor_id == asm24::kCustomVendorOld) && d.product_id == asm24::kCustomProduct;
    // tinygrad asserts the product string starts with "custom" (or "AS2462"): other firmware
    // with the same IDs is not the protocol we speak.
    if (custom_ids && (d.product.starts_with("custom") || d.product.starts_with("AS2462"))) return BridgeProtocol::CustomFirmware;
    const bool asmedia = d.vendor_id == asm24::kAsmediaVendor &&
                         (d.product_id == asm24::kStockProduct2464 || d.product_id == asm24::kStockProduct2463);
    // A patched stock firmware re-enumerates under tinygrad's IDs (extra/usbgpu/patch.py) and keeps
    // its mass-storage interfaces; accept either ID pair when the interfaces say mass storage.
    if (!asmedia && !custom_ids) return std::nullopt;
    bool uas = false, bot = false;
    for (const InterfaceDescriptor& i : d.interfaces) {
        if (i.interface_class != kMassStorage || i.interface_subclass != kScsiTransparent) continue;
        uas |= i.interface_protocol == kProtocolUas;
        bot |= i.interface_protocol == kProtocolBot;
    }
    if (uas) return BridgeProtocol::Uas;  // UAS is preferred when both alt settings exist
    if (bot) return BridgeProtocol::Bot;
    return std::nullopt;
}

}  // namespace baregpu::usb
