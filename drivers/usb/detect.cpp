#include "drivers/usb/detect.hpp"

#include "base/error.hpp"
#include "drivers/usb/asm24_protocol.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

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

std::vector<UsbId> parse_usb_ids(std::string_view text) {
    std::vector<UsbId> ids;
    auto hex16 = [&](std::string_view part) {
        unsigned v = 0;
        auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v, 16);
        if (part.empty() || ec != std::errc{} || end != part.data() + part.size() || v > 0xffff) {
            throw Error(kUserIdsVariable, fmt::format("\"{}\" is not a list of VID:PID pairs in hex (e.g. 174c:2464,add1:0001)", text));
        }
        return static_cast<uint16_t>(v);
    };
    while (!text.empty()) {
        const size_t comma = text.find(',');
        const std::string_view pair = text.substr(0, comma);
        const size_t colon = pair.find(':');
        if (colon == std::string_view::npos) hex16({});
        ids.push_back({hex16(pair.substr(0, colon)), hex16(pair.substr(colon + 1))});
        if (comma == std::string_view::npos) break;
        text.remove_prefix(comma + 1);
    }
    return ids;
}

std::vector<UsbId> user_bridge_ids() {
    const char* v = std::getenv(kUserIdsVariable);
    return v == nullptr ? std::vector<UsbId>{} : parse_usb_ids(v);
}

namespace {
bool user_named(uint16_t vendor, uint16_t product) {
    for (const UsbId& id : user_bridge_ids())
        if (id == UsbId{vendor, product}) return true;
    return false;
}
}  // namespace

bool is_bridge_id(uint16_t vendor, uint16_t product) {
    using namespace asm24;
    return (vendor == kAsmediaVendor && (product == kStockProduct2464 || product == kStockProduct2463)) ||
           ((vendor == kCustomVendor || vendor == kCustomVendorOld) && product == kCustomProduct) || user_named(vendor, product);
}

std::optional<BridgeProtocol> detect_protocol(const DeviceDescriptor& d) {
    const bool custom_ids =
        ((d.vendor_id == asm24::kCustomVendor || d.vendor_id == asm24::kCustomVendorOld) && d.product_id == asm24::kCustomProduct) ||
        user_named(d.vendor_id, d.product_id);
    // tinygrad asserts the product string starts with "custom" (or "AS2462"): other firmware
    // with the same IDs is not the protocol we speak.
    if (custom_ids && (d.product.starts_with("custom") || d.product.starts_with("AS2462"))) return BridgeProtocol::CustomFirmware;
    const bool asmedia = d.vendor_id == asm24::kAsmediaVendor &&
                         (d.product_id == asm24::kStockProduct2464 || d.product_id == asm24::kStockProduct2463);
    // A patched stock firmware re-enumerates under tinygrad's IDs (extra/usbgpu/patch.py) and keeps
    // its mass-storage interfaces; accept either ID pair when the interfaces say mass storage.
    if (!asmedia && !custom_ids) return std::nullopt;  // (a user-named ID counts as custom: it may run either firmware)
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
