#include "drivers/pci/resizable_bar.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

namespace baregpu::pci {

std::vector<ResizableBar> read_resizable_bars(ConfigSpace& config) {
    std::vector<ResizableBar> bars;
    std::optional<uint16_t> cap = config.find_extended_capability(cfg::kExtCapResizableBar);
    if (!cap) return bars;

    uint32_t first_control = config.config_read32(static_cast<uint16_t>(*cap + rebar::kControl));
    unsigned count = (first_control & rebar::kCtrlBarCountMask) >> rebar::kCtrlBarCountShift;
    if (count == 0 || count > 6) {
        throw ProtocolError(config.config_name(),
                            fmt::format("Resizable BAR capability at 0x{:03x}: control register 0x{:08x} says {} "
                                        "resizable BARs; the specification allows 1 to 6",
                                        *cap, first_control, count));
    }
    // The last entry's control register must lie inside config space.
    unsigned last_control = *cap + rebar::kControl + (count - 1) * rebar::kEntryStride;
    if (last_control + 4 > config.config_size()) {
        throw ProtocolError(config.config_name(),
                            fmt::format("Resizable BAR capability at 0x{:03x} with {} entries runs past the end of "
                                        "config space",
                                        *cap, count));
    }
    for (unsigned i = 0; i < count; ++i) {
        auto entry = static_cast<uint16_t>(*cap + i * rebar::kEntryStride);
        uint32_t capability = config.config_read32(static_cast<uint16_t>(entry + rebar::kCapability));
        uint32_t control = config.config_read32(static_cast<uint16_t>(entry + rebar::kControl));
        ResizableBar bar;
        bar.bar = control & rebar::kCtrlBarIndexMask;
        if (bar.bar > 5) {
            throw ProtocolError(config.config_name(),
                                fmt::format("Resizable BAR entry {} (control 0x{:08x} at 0x{:03x}) names BAR {}; "
                                            "a function has BARs 0 to 5",
                                            i, control, entry + rebar::kControl, bar.bar));
        }
        unsigned size_log2_mib = (control & rebar::kCtrlBarSizeMask) >> rebar::kCtrlBarSizeShift;
        bar.current_size = uint64_t{1} << (20 + size_log2_mib);
        uint32_t sizes = capability & rebar::kCapSizesMask;
        for (unsigned bit = 4; bit < 32; ++bit) {
            if (sizes & (uint32_t{1} << bit)) bar.supported_sizes.push_back(uint64_t{1} << (20 + bit - 4));
        }
        bars.push_back(std::move(bar));
    }
    return bars;
}

}  // namespace baregpu::pci
