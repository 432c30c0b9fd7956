#include "drivers/pci/sysfs_resource.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"

#include <charconv>
#include <fmt/format.h>

namespace baregpu::pci {

namespace {

bool parse_hex(std::string_view& rest, uint64_t& out) {
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    if (!rest.starts_with("0x")) return false;
    rest.remove_prefix(2);
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), out, 16);
    if (ec != std::errc() || end == rest.data()) return false;
    rest.remove_prefix(static_cast<size_t>(end - rest.data()));
    return true;
}

}  // namespace

std::vector<ResourceLine> parse_resource_file(const std::string& device, const std::string& path,
                                              std::string_view text) {
    std::vector<ResourceLine> lines;
    unsigned number = 0;
    while (!text.empty()) {
        ++number;
        auto nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        if (line.empty()) continue;
        ResourceLine r;
        std::string_view rest = line;
        if (!parse_hex(rest, r.start) || !parse_hex(rest, r.end) || !parse_hex(rest, r.flags) ||
            rest.find_first_not_of(" \t") != std::string_view::npos) {
            throw ProtocolError(device, fmt::format("{} line {}: expected \"0x<start> 0x<end> 0x<flags>\", found \"{}\"",
                                                    path, number, line));
        }
        if (r.used() && r.end < r.start) {
            throw ProtocolError(device, fmt::format("{} line {}: end 0x{:x} is below start 0x{:x}", path, number, r.end,
                                                    r.start));
        }
        lines.push_back(r);
    }
    return lines;
}

std::array<BarInfo, kBarCount> bars_from_resources(const std::string& device, const std::string& path,
                                                   const std::vector<ResourceLine>& lines) {
    if (lines.size() < kBarCount) {
        throw ProtocolError(device, fmt::format("{} has {} lines; a PCI function has at least {} (BAR0..BAR5)", path,
                                                lines.size(), kBarCount));
    }
    std::array<BarInfo, kBarCount> bars{};
    for (unsigned i = 0; i < kBarCount; ++i) {
        BarInfo& bar = bars[i];
        bar.index = i;
        const ResourceLine& r = lines[i];
        if (!r.used() || (r.flags & (ioresource::kIo | ioresource::kMem)) == 0) continue;
        uint64_t size = r.size();
        if (size == 0 || !is_power_of_two(size)) {
            throw ProtocolError(device, fmt::format("{}: BAR{} spans 0x{:x}..0x{:x}, {} bytes: a BAR's size is a power "
                                                    "of two",
                                                    path, i, r.start, r.end, size));
        }
        bar.size = size;
        bool unassigned = (r.flags & ioresource::kUnset) != 0;
        bar.bus_base = unassigned ? 0 : r.start;
        if (r.flags & ioresource::kIo) {
            bar.type = BarType::Io;
            continue;
        }
        bar.prefetchable = (r.flags & ioresource::kPrefetch) != 0;
        if (r.flags & ioresource::kMem64) {
            if (i + 1 >= kBarCount) {
                throw ProtocolError(device, fmt::format("{}: BAR{} is 64-bit but has no upper half", path, i));
            }
            bar.type = BarType::Memory64;
            ++i;  // the upper half is no BAR of its own (the kernel lists it as unused)
            bars[i].index = i;
        } else {
            bar.type = BarType::Memory32;
        }
    }
    return bars;
}

}  // namespace baregpu::pci
