// The LibOS radix3 page list (radix3.hpp).
#include "drivers/nv/radix3.hpp"

#include <array>
#include <cstring>

namespace baregpu::nv {
namespace {
constexpr uint64_t kEntriesPerPage = kRadix3Page / 8;
std::array<uint64_t, 4> level_pages(uint64_t image_bytes) {
    std::array<uint64_t, 4> n{};
    n[3] = (image_bytes + kRadix3Page - 1) / kRadix3Page;
    if (n[3] == 0) n[3] = 1;
    for (int i = 3; i > 0; --i) n[i - 1] = ((n[i] - 1) / kEntriesPerPage) + 1;
    return n;
}
}  // namespace

uint64_t radix3_bytes(uint64_t image_bytes) {
    const auto n = level_pages(image_bytes);
    return (n[0] + n[1] + n[2] + n[3]) * kRadix3Page;
}

BusAddress write_radix3(const pci::DmaBuffer& buffer, uint64_t offset, std::span<const std::byte> image) {
    const auto n = level_pages(image.size());
    const std::span<std::byte> cpu = buffer.cpu().subspan(offset, radix3_bytes(image.size()));
    std::memset(cpu.data(), 0, cpu.size());
    // Page index of each level's first page inside this region.
    const uint64_t first[4] = {0, n[0], n[0] + n[1], n[0] + n[1] + n[2]};
    for (int level = 0; level < 3; ++level)
        for (uint64_t e = 0; e < n[level + 1]; ++e) {
            const uint64_t bus = buffer.bus_address(offset + (first[level + 1] + e) * kRadix3Page).value();
            std::memcpy(cpu.data() + first[level] * kRadix3Page + e * 8, &bus, 8);
        }
    std::memcpy(cpu.data() + first[3] * kRadix3Page, image.data(), image.size());
    return buffer.bus_address(offset);
}

}  // namespace baregpu::nv
