// LibOS arguments and RMARGS (libos_args.hpp has the layouts).
#include "drivers/nv/libos_args.hpp"

#include <cstring>

namespace baregpu::nv {
namespace {
template <typename T>
void put(std::span<std::byte> out, size_t at, T v) {
    std::memcpy(out.data() + at, &v, sizeof(T));
}
constexpr uint8_t kKindContiguous = 1, kLocSysmem = 1;
}  // namespace

uint64_t libos_id8(std::string_view name) {
    uint64_t v = 0;
    for (char c : name) v = (v << 8) | static_cast<uint8_t>(c);
    return v;
}

void encode_libos_args(std::span<std::byte> out, std::span<const LibosRegion> regions) {
    std::memset(out.data(), 0, out.size());
    for (size_t i = 0; i < regions.size(); ++i) {
        const size_t at = i * kLibosArgSize;
        put(out, at, libos_id8(regions[i].name));
        put(out, at + 8, regions[i].pa);
        put(out, at + 16, regions[i].size);
        put(out, at + 24, kKindContiguous);
        put(out, at + 25, kLocSysmem);
    }
}

void encode_gsp_arguments_cached(std::span<std::byte> out, const MessageQueueInitArguments& mq) {
    std::memset(out.data(), 0, kGspArgumentsCachedSize);
    put(out, 0, mq.shared_mem_phys_addr);
    put(out, 8, mq.page_table_entry_count);
    put(out, 16, mq.cmd_queue_offset);
    put(out, 24, mq.stat_queue_offset);
    put(out, 48, uint8_t{1});  // bDmemStack
}

uint64_t queue_page_list_bytes(uint64_t queue_bytes) {
    // n pages of queues plus p pages of list, p = ceil((n + p) * 8 / 4096).
    const uint64_t n = queue_bytes / 0x1000;
    uint64_t p = 1;
    while ((n + p) * 8 > p * 0x1000) ++p;
    return p * 0x1000;
}

}  // namespace baregpu::nv
