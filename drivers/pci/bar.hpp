// Base address registers: what a BAR is (type, width, prefetchable, size) and the sizing
// rules of PCI Local Bus Specification 3.0 section 6.2.5.1.
#pragma once

#include "drivers/pci/config_space.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace baregpu::pci {

inline constexpr unsigned kBarCount = 6;

enum class BarType {
    None,  // not implemented: reads back 0 after sizing
    Memory32,
    Memory64,  // occupies this BAR and the next one (the upper half)
    Io,
};

struct BarInfo {
    unsigned index = 0;
    BarType type = BarType::None;
    bool prefetchable = false;
    uint64_t size = 0;  // bytes
    uint64_t bus_base = 0;  // address assigned on the bus (what a peer DMAs to); 0 if unassigned

    bool is_memory() const { return type == BarType::Memory32 || type == BarType::Memory64; }
    bool is_64bit() const { return type == BarType::Memory64; }
    // "BAR0: 64-bit prefetchable memory, 256 MiB"
    std::string describe() const;
};

// Decodes one BAR from the value it held and the value read back after all-ones was written
// to it. For a 64-bit memory BAR pass the upper register's original and read-back values too.
// A BAR that reads back 0 is unimplemented (BarType::None). Throws ProtocolError when the
// read-back is impossible (address bits that are not a contiguous run from the top, a 64-bit
// type in BAR5, the reserved memory type 0b11).
BarInfo decode_bar(const std::string& device, unsigned index, uint32_t original_lo, uint32_t sized_lo,
                   uint32_t original_hi = 0, uint32_t sized_hi = 0);

// Sizes all six BARs of a type-0 function through its config space: memory and I/O decode
// are turned off while each BAR holds all-ones (so the device cannot claim a bogus window),
// then every register and the command register are restored.
std::array<BarInfo, kBarCount> size_bars(ConfigSpace& config);

// "256 MiB", "4 KiB", "1.5 GiB"
std::string format_size(uint64_t bytes);

}  // namespace baregpu::pci
