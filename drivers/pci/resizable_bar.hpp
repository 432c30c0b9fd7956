// The Resizable BAR extended capability (PCI Express Base Specification 4.0, section 7.8.6;
// register layout as Linux include/uapi/linux/pci_regs.h PCI_REBAR_*): which BARs of a function
// can be resized, to which sizes, and what size each has now. A GPU driver reads it to learn
// whether all of VRAM can be mapped through one BAR.
#pragma once

#include "drivers/pci/config_space.hpp"

#include <cstdint>
#include <vector>

namespace baregpu::pci {

namespace rebar {
// Offsets from the capability header; entry i's registers sit 8 * i further on.
inline constexpr uint16_t kCapability = 0x04;  // PCI_REBAR_CAP
inline constexpr uint16_t kControl = 0x08;  // PCI_REBAR_CTRL
inline constexpr uint16_t kEntryStride = 8;
inline constexpr uint32_t kCapSizesMask = 0xfffffff0;  // bit n (n >= 4): 2^(n-4) MiB supported
inline constexpr uint32_t kCtrlBarIndexMask = 0x00000007;
inline constexpr uint32_t kCtrlBarCountMask = 0x000000e0;  // first entry only: number of entries
inline constexpr unsigned kCtrlBarCountShift = 5;
inline constexpr uint32_t kCtrlBarSizeMask = 0x00003f00;  // current size: 2^n MiB
inline constexpr unsigned kCtrlBarSizeShift = 8;
}  // namespace rebar

struct ResizableBar {
    unsigned bar = 0;  // BAR index 0..5
    uint64_t current_size = 0;  // bytes
    std::vector<uint64_t> supported_sizes;  // bytes, ascending (from the Capability register)
};

// The resizable BARs described by the function's Resizable BAR capability, in entry order;
// empty when it has none. Throws ProtocolError naming the register when the capability is
// malformed (an entry count of 0 or above 6, a BAR index above 5).
std::vector<ResizableBar> read_resizable_bars(ConfigSpace& config);

}  // namespace baregpu::pci
