#include "drivers/pci/pci_address.hpp"

#include <charconv>
#include <cstdio>

namespace baregpu::pci {

namespace {

std::optional<uint32_t> parse_hex(std::string_view text, size_t max_digits) {
    if (text.empty() || text.size() > max_digits) return std::nullopt;
    uint32_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

}  // namespace

std::optional<PciAddress> PciAddress::parse(std::string_view text) {
    PciAddress out;
    size_t first_colon = text.find(':');
    if (first_colon == std::string_view::npos) return std::nullopt;
    if (text.find(':', first_colon + 1) != std::string_view::npos) {
        auto domain = parse_hex(text.substr(0, first_colon), 8);
        if (!domain) return std::nullopt;
        out.domain = *domain;
        text.remove_prefix(first_colon + 1);
    }
    // Now "BB:DD.F".
    size_t colon = text.find(':');
    size_t dot = text.find('.');
    if (colon == std::string_view::npos || dot == std::string_view::npos || dot < colon) return std::nullopt;
    auto bus = parse_hex(text.substr(0, colon), 2);
    auto device = parse_hex(text.substr(colon + 1, dot - colon - 1), 2);
    auto function = parse_hex(text.substr(dot + 1), 1);
    if (!bus || !device || !function || *device > 0x1f || *function > 7) return std::nullopt;
    out.bus = static_cast<uint8_t>(*bus);
    out.device = static_cast<uint8_t>(*device);
    out.function = static_cast<uint8_t>(*function);
    return out;
}

std::string PciAddress::to_string() const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", domain, bus, device, function);
    return buf;
}

}  // namespace baregpu::pci
