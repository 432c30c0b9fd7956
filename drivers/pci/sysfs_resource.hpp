// The sysfs `resource` file of a PCI function: one line per resource, "0x<start> 0x<end> 0x<flags>"
// (drivers/pci/pci-sysfs.c resource_show), lines 0..5 the BARs, line 6 the expansion ROM. The
// addresses are the ones the kernel assigned (CPU physical; equal to bus addresses on x86).
#pragma once

#include "drivers/pci/bar.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::pci {

// Resource flags, include/linux/ioport.h (IORESOURCE_*). The low byte carries the BAR's own
// low bits (pci_parse_bar).
namespace ioresource {
inline constexpr uint64_t kIo = 0x00000100;
inline constexpr uint64_t kMem = 0x00000200;
inline constexpr uint64_t kPrefetch = 0x00002000;
inline constexpr uint64_t kMem64 = 0x00100000;
inline constexpr uint64_t kUnset = 0x20000000;  // no address assigned
inline constexpr uint64_t kDisabled = 0x10000000;
}  // namespace ioresource

struct ResourceLine {
    uint64_t start = 0;
    uint64_t end = 0;  // inclusive; start == end == 0 for an unused resource
    uint64_t flags = 0;

    bool used() const { return flags != 0 || end != 0; }
    uint64_t size() const { return used() ? end - start + 1 : 0; }
};

// Parses the whole file. Throws ProtocolError naming `path` and the line on anything else than
// three hexadecimal numbers per line or an end below its start.
std::vector<ResourceLine> parse_resource_file(const std::string& device, const std::string& path,
                                              std::string_view text);

// The six BARs as the kernel sees them: type from the flags (IO, MEM, MEM_64), prefetchable,
// size from end - start + 1 (a power of two, else ProtocolError), bus_base from start (0 when
// the kernel left it unassigned). The upper half of a 64-bit BAR reads as unused.
std::array<BarInfo, kBarCount> bars_from_resources(const std::string& device, const std::string& path,
                                                   const std::vector<ResourceLine>& lines);

}  // namespace baregpu::pci
