// A PCI function's address: domain:bus:device.function, as sysfs and lspci write it.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace baregpu::pci {

struct PciAddress {
    uint32_t domain = 0;  // 16 bits on most systems; VMD domains use more
    uint8_t bus = 0;
    uint8_t device = 0;  // 5 bits
    uint8_t function = 0;  // 3 bits

    // Accepts "0000:03:00.0" and the short "03:00.0" (domain 0). nullopt on anything else.
    static std::optional<PciAddress> parse(std::string_view text);

    // Always the long form "0000:03:00.0".
    std::string to_string() const;

    auto operator<=>(const PciAddress&) const = default;
};

}  // namespace baregpu::pci
