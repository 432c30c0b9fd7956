#include "drivers/pci/config_space.hpp"

#include "base/error.hpp"

#include <charconv>
#include <fmt/format.h>
#include <set>

namespace baregpu::pci {

void ConfigSpace::check_config_access(uint16_t offset, unsigned width) const {
    if ((width != 1 && width != 2 && width != 4) || offset % width != 0 ||
        static_cast<unsigned>(offset) + width > config_size()) {
        throw Error(config_name(), fmt::format("config access of {} bytes at 0x{:x} is not a naturally aligned "
                                               "access inside the {}-byte config space",
                                               width, offset, config_size()));
    }
}

std::vector<Capability> ConfigSpace::capabilities() {
    std::vector<Capability> out;
    if ((config_read16(cfg::kStatus) & cfg::kStatusCapList) == 0) return out;
    std::set<uint16_t> seen;
    uint16_t pos = config_read8(cfg::kCapabilityList) & ~3u;
    while (pos >= cfg::kCapabilityListStart) {
        if (!seen.insert(pos).second) {
            throw ProtocolError(config_name(), fmt::format("capability list loops back to offset 0x{:02x}", pos));
        }
        uint16_t header = config_read16(pos);
        if (header == 0xffff) {
            throw DeviceLostError(config_name(),
                                  fmt::format("capability header at 0x{:02x} reads all-ones: the function is gone", pos));
        }
        out.push_back({static_cast<uint16_t>(header & 0xff), 0, pos});
        pos = static_cast<uint16_t>((header >> 8) & ~3u);
    }
    return out;
}

std::vector<Capability> ConfigSpace::extended_capabilities() {
    std::vector<Capability> out;
    if (config_size() < cfg::kConfigSizeExtended) return out;
    std::set<uint16_t> seen;
    uint16_t pos = cfg::kExtCapabilityListStart;
    while (pos >= cfg::kExtCapabilityListStart) {
        if (!seen.insert(pos).second) {
            throw ProtocolError(config_name(), fmt::format("extended capability list loops back to offset 0x{:03x}", pos));
        }
        uint32_t header = config_read32(pos);
        if (header == 0xffffffff) {
            throw DeviceLostError(config_name(), fmt::format("extended capability header at 0x{:03x} reads all-ones: "
                                                             "the function is gone",
                                                             pos));
        }
        // An all-zero header at 0x100 means "no extended capabilities" (PCIe spec 7.6.3).
        if (header == 0) break;
        out.push_back({static_cast<uint16_t>(header & 0xffff), static_cast<uint8_t>((header >> 16) & 0xf), pos});
        pos = static_cast<uint16_t>((header >> 20) & ~3u);
    }
    return out;
}

std::optional<uint16_t> ConfigSpace::find_capability(uint8_t id) {
    for (const Capability& cap : capabilities()) {
        if (cap.id == id) return cap.offset;
    }
    return std::nullopt;
}

std::optional<uint16_t> ConfigSpace::find_extended_capability(uint16_t id) {
    for (const Capability& cap : extended_capabilities()) {
        if (cap.id == id) return cap.offset;
    }
    return std::nullopt;
}

ConfigSpaceImage::ConfigSpaceImage(std::string name, std::vector<uint8_t> bytes)
    : name_(std::move(name)), bytes_(std::move(bytes)) {
    if (bytes_.size() != cfg::kConfigSizeLegacy && bytes_.size() != cfg::kConfigSizeExtended) {
        throw Error(name_, fmt::format("a config space image is 256 or 4096 bytes, not {}", bytes_.size()));
    }
}

uint32_t ConfigSpaceImage::config_read(uint16_t offset, unsigned width) {
    check_config_access(offset, width);
    uint32_t value = 0;
    for (unsigned i = 0; i < width; ++i) value |= static_cast<uint32_t>(bytes_[offset + i]) << (8 * i);
    return value;
}

void ConfigSpaceImage::config_write(uint16_t offset, unsigned width, uint32_t value) {
    check_config_access(offset, width);
    for (unsigned i = 0; i < width; ++i) bytes_[offset + i] = static_cast<uint8_t>(value >> (8 * i));
}

ConfigSpaceImage ConfigSpaceImage::from_lspci_dump(std::string name, std::string_view text) {
    std::vector<uint8_t> bytes(cfg::kConfigSizeExtended, 0);
    std::vector<bool> filled(cfg::kConfigSizeExtended, false);
    size_t highest = 0;
    unsigned line_no = 0;
    while (!text.empty()) {
        size_t eol = text.find('\n');
        std::string_view line = text.substr(0, eol);
        text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
        ++line_no;
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
        while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        if (line.empty()) continue;
        size_t colon = line.find(": ");
        // A data line is "OOO: hh hh ..."; anything else (the device header line) is skipped.
        bool is_data = colon != std::string_view::npos && colon >= 2 && colon <= 3;
        for (size_t i = 0; is_data && i < colon; ++i) is_data = std::isxdigit(static_cast<unsigned char>(line[i])) != 0;
        if (!is_data) continue;
        auto fail = [&](const std::string& why) {
            throw ProtocolError(name, fmt::format("lspci dump line {}: {}: \"{}\"", line_no, why, line));
        };
        unsigned offset = 0;
        std::from_chars(line.data(), line.data() + colon, offset, 16);
        if (offset % 16 != 0 || offset >= cfg::kConfigSizeExtended) fail("offset is not a 16-byte row inside 4 KiB");
        std::string_view rest = line.substr(colon + 2);
        unsigned count = 0;
        while (!rest.empty()) {
            while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
            if (rest.empty()) break;
            unsigned byte = 0;
            auto [end, ec] = std::from_chars(rest.data(), rest.data() + std::min<size_t>(2, rest.size()), byte, 16);
            if (ec != std::errc() || end != rest.data() + 2) fail("expected two hex digits per byte");
            if (count >= 16) fail("more than 16 bytes on one row");
            bytes[offset + count] = static_cast<uint8_t>(byte);
            filled[offset + count] = true;
            ++count;
            rest.remove_prefix(2);
        }
        if (count != 16) fail("expected 16 bytes");
        highest = std::max<size_t>(highest, offset + 16);
    }
    size_t size = highest <= cfg::kConfigSizeLegacy ? cfg::kConfigSizeLegacy : cfg::kConfigSizeExtended;
    for (size_t i = 0; i < size; ++i) {
        if (!filled[i]) {
            throw ProtocolError(name, fmt::format("lspci dump has no row for offset 0x{:03x} (a {}-byte dump needs "
                                                  "every row)",
                                                  i & ~size_t{15}, size));
        }
    }
    bytes.resize(size);
    return ConfigSpaceImage(std::move(name), std::move(bytes));
}

std::string_view capability_name(uint8_t id) {
    switch (id) {
        case cfg::kCapPowerManagement: return "Power Management";
        case 0x02: return "AGP";
        case 0x03: return "VPD";
        case 0x04: return "Slot ID";
        case cfg::kCapMsi: return "MSI";
        case 0x06: return "CompactPCI Hot Swap";
        case 0x07: return "PCI-X";
        case 0x08: return "HyperTransport";
        case cfg::kCapVendor: return "Vendor Specific";
        case 0x0a: return "Debug Port";
        case 0x0b: return "CompactPCI Resource Control";
        case 0x0c: return "Hot Plug";
        case 0x0d: return "Bridge Subsystem Vendor ID";
        case 0x0e: return "AGP 8x";
        case 0x0f: return "Secure Device";
        case cfg::kCapPciExpress: return "PCI Express";
        case cfg::kCapMsix: return "MSI-X";
        case 0x12: return "SATA";
        case 0x13: return "Advanced Features";
        case 0x14: return "Enhanced Allocation";
        case 0x15: return "Flattening Portal Bridge";
        default: return "Unknown";
    }
}

std::string_view extended_capability_name(uint16_t id) {
    switch (id) {
        case cfg::kExtCapAer: return "Advanced Error Reporting";
        case cfg::kExtCapVirtualChannel: return "Virtual Channel";
        case cfg::kExtCapSerialNumber: return "Device Serial Number";
        case cfg::kExtCapPowerBudget: return "Power Budgeting";
        case 0x0005: return "Root Complex Link Declaration";
        case 0x0006: return "Root Complex Internal Link Control";
        case 0x0007: return "Root Complex Event Collector Endpoint Association";
        case 0x0008: return "Multi-Function VC Arbitration";
        case 0x0009: return "Virtual Channel (MFVC)";
        case 0x000a: return "Root Complex Register Block";
        case cfg::kExtCapVendor: return "Vendor Specific";
        case 0x000c: return "Configuration Access Correlation";
        case cfg::kExtCapAcs: return "Access Control Services";
        case cfg::kExtCapAri: return "Alternative Routing-ID Interpretation";
        case cfg::kExtCapAts: return "Address Translation Services";
        case cfg::kExtCapSriov: return "Single Root I/O Virtualization";
        case 0x0011: return "Multi-Root I/O Virtualization";
        case 0x0012: return "Multicast";
        case 0x0013: return "Page Request Interface";
        case 0x0014: return "AMD Reserved";
        case cfg::kExtCapResizableBar: return "Resizable BAR";
        case 0x0016: return "Dynamic Power Allocation";
        case 0x0017: return "TPH Requester";
        case cfg::kExtCapLtr: return "Latency Tolerance Reporting";
        case cfg::kExtCapSecondaryPcie: return "Secondary PCI Express";
        case 0x001a: return "Protocol Multiplexing";
        case cfg::kExtCapPasid: return "Process Address Space ID";
        case 0x001c: return "LN Requester";
        case 0x001d: return "Downstream Port Containment";
        case cfg::kExtCapL1Substates: return "L1 PM Substates";
        case 0x001f: return "Precision Time Measurement";
        case 0x0023: return "Designated Vendor-Specific";
        case 0x0024: return "VF Resizable BAR";
        case cfg::kExtCapDataLinkFeature: return "Data Link Feature";
        case cfg::kExtCapPhysicalLayer16: return "Physical Layer 16.0 GT/s";
        case 0x0027: return "Lane Margining at the Receiver";
        case 0x002a: return "Physical Layer 32.0 GT/s";
        default: return "Unknown";
    }
}

}  // namespace baregpu::pci
