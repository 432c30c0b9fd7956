#include "drivers/pci/bar.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

namespace baregpu::pci {

std::string format_size(uint64_t bytes) {
    static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    unsigned unit = 0;
    double value = static_cast<double>(bytes);
    while (value >= 1024 && unit + 1 < std::size(units)) {
        value /= 1024;
        ++unit;
    }
    if (value == static_cast<double>(static_cast<uint64_t>(value))) {
        return fmt::format("{} {}", static_cast<uint64_t>(value), units[unit]);
    }
    return fmt::format("{:.1f} {}", value, units[unit]);
}

std::string BarInfo::describe() const {
    switch (type) {
        case BarType::None: return fmt::format("BAR{}: unimplemented", index);
        case BarType::Io: return fmt::format("BAR{}: I/O ports, {}", index, format_size(size));
        case BarType::Memory32:
        case BarType::Memory64:
            return fmt::format("BAR{}: {}-bit {}memory, {}", index, is_64bit() ? 64 : 32,
                               prefetchable ? "prefetchable " : "", format_size(size));
    }
    return "";
}

BarInfo decode_bar(const std::string& device, unsigned index, uint32_t original_lo, uint32_t sized_lo,
                   uint32_t original_hi, uint32_t sized_hi) {
    BarInfo bar;
    bar.index = index;
    if (sized_lo == 0) return bar;

    uint64_t mask;
    if (original_lo & cfg::kBarSpaceIo) {
        bar.type = BarType::Io;
        mask = sized_lo & cfg::kBarIoAddressMask;
        // I/O BARs may implement only 16 address bits; the upper ones then read back 0
        // (Linux pci_size() treats them as set).
        if ((mask & 0xffff0000u) == 0) mask |= 0xffff0000u;
        bar.bus_base = original_lo & cfg::kBarIoAddressMask;
    } else {
        uint32_t mem_type = original_lo & cfg::kBarMemTypeMask;
        bar.prefetchable = (original_lo & cfg::kBarMemPrefetch) != 0;
        if (mem_type == cfg::kBarMemType64) {
            if (index + 1 >= kBarCount) {
                throw ProtocolError(device, fmt::format("BAR{} claims to be 64-bit but has no upper half", index));
            }
            bar.type = BarType::Memory64;
            mask = (static_cast<uint64_t>(sized_hi) << 32) | (sized_lo & cfg::kBarMemAddressMask);
            bar.bus_base = (static_cast<uint64_t>(original_hi) << 32) | (original_lo & cfg::kBarMemAddressMask);
        } else if (mem_type == cfg::kBarMemType32) {
            bar.type = BarType::Memory32;
            mask = sized_lo & cfg::kBarMemAddressMask;
            bar.bus_base = original_lo & cfg::kBarMemAddressMask;
        } else {
            throw ProtocolError(device, fmt::format("BAR{} has memory type {} (reserved; below-1MiB type 1 is not "
                                                    "supported either)",
                                                    index, mem_type >> 1));
        }
        if (bar.type == BarType::Memory32) mask |= 0xffffffff00000000ull;  // for the contiguity check below
    }
    if (bar.type == BarType::Io) mask |= 0xffffffff00000000ull;
    if (mask == 0xffffffff00000000ull) {
        // Type bits present but no writable address bit: a broken BAR, not an absent one.
        throw ProtocolError(device, fmt::format("BAR{} reads back 0x{:08x} after sizing: no address bit is writable",
                                                index, sized_lo));
    }
    // The writable address bits must run contiguously from the top down to the size bit.
    uint64_t size = mask & ~(mask - 1);
    if ((mask | (size - 1)) != ~uint64_t{0}) {
        throw ProtocolError(device, fmt::format("BAR{} sizing read-back 0x{:x} is not a contiguous address mask", index,
                                                mask));
    }
    bar.size = size;
    return bar;
}

std::array<BarInfo, kBarCount> size_bars(ConfigSpace& config) {
    std::array<BarInfo, kBarCount> bars;
    for (unsigned i = 0; i < kBarCount; ++i) bars[i].index = i;

    // A function that is gone reads all-ones everywhere (its header type too): say that.
    if (config.config_read16(cfg::kVendorId) == 0xffff) {
        throw DeviceLostError(config.config_name(), "config space reads all-ones: the device was removed or its link is down");
    }
    uint8_t header_type = config.config_read8(cfg::kHeaderType) & cfg::kHeaderTypeMask;
    if (header_type != cfg::kHeaderTypeNormal) {
        throw ProtocolError(config.config_name(),
                            fmt::format("header type {} is not a type-0 endpoint; BARs of bridges are not sized here",
                                        header_type));
    }

    uint16_t command = config.config_read16(cfg::kCommand);
    config.config_write16(cfg::kCommand, command & ~(cfg::kCommandIo | cfg::kCommandMemory));
    auto restore = [&] { config.config_write16(cfg::kCommand, command); };
    try {
        for (unsigned i = 0; i < kBarCount; ++i) {
            uint16_t reg = static_cast<uint16_t>(cfg::kBar0 + 4 * i);
            uint32_t original_lo = config.config_read32(reg);
            config.config_write32(reg, 0xffffffff);
            uint32_t sized_lo = config.config_read32(reg);
            config.config_write32(reg, original_lo);
            uint32_t original_hi = 0, sized_hi = 0;
            bool is_64bit =
                !(original_lo & cfg::kBarSpaceIo) && (original_lo & cfg::kBarMemTypeMask) == cfg::kBarMemType64;
            if (is_64bit && i + 1 < kBarCount) {
                uint16_t reg_hi = static_cast<uint16_t>(reg + 4);
                original_hi = config.config_read32(reg_hi);
                config.config_write32(reg_hi, 0xffffffff);
                sized_hi = config.config_read32(reg_hi);
                config.config_write32(reg_hi, original_hi);
            }
            bars[i] = decode_bar(config.config_name(), i, original_lo, sized_lo, original_hi, sized_hi);
            if (bars[i].is_64bit()) ++i;  // the upper half is not a BAR of its own
        }
    } catch (...) {
        restore();
        throw;
    }
    restore();
    return bars;
}

}  // namespace baregpu::pci
