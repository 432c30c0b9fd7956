// The FSP COT message encoder (fsp_cot.hpp has the layouts).
#include "drivers/nv/fsp_cot.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

#include <cstring>

namespace baregpu::nv {
namespace {
template <typename T>
void put_at(std::vector<std::byte>& b, size_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof(T));
}
void put_bytes(std::vector<std::byte>& b, size_t at, std::span<const std::byte> v, size_t want, const char* field) {
    if (v.size() != want)
        throw Error("", fmt::format("FSP COT payload: {} is {} bytes, NVDM_PAYLOAD_COT holds {}", field, v.size(), want));
    std::memcpy(b.data() + at, v.data(), want);
}
constexpr uint32_t kMctpSom = 1u << 31, kMctpEom = 1u << 30;
constexpr uint32_t kMctpTypeVendorPci = 0x7e, kVendorNv = 0x10de;
}  // namespace

std::vector<std::byte> encode_fsp_cot_message(const FspCotPayload& p) {
    std::vector<std::byte> m(8 + kNvdmPayloadCotSize);
    put_at<uint32_t>(m, 0, kMctpSom | kMctpEom);  // one packet: SOM and EOM, SEQ 0, TAG 0
    put_at<uint32_t>(m, 4, kMctpTypeVendorPci | (kVendorNv << 8) | (uint32_t{kNvdmTypeCot} << 24));
    const size_t b = 8;
    put_at<uint16_t>(m, b + 0, p.version);
    put_at<uint16_t>(m, b + 2, static_cast<uint16_t>(kNvdmPayloadCotSize));
    put_at<uint64_t>(m, b + 4, p.gsp_fmc_sysmem_offset);
    put_at<uint64_t>(m, b + 12, p.frts_sysmem_offset);
    put_at<uint32_t>(m, b + 20, p.frts_sysmem_size);
    put_at<uint64_t>(m, b + 24, p.frts_vidmem_offset);
    put_at<uint32_t>(m, b + 32, p.frts_vidmem_size);
    put_bytes(m, b + 36, p.hash384, 48, "hash384");
    put_bytes(m, b + 84, p.public_key, 384, "publicKey");
    put_bytes(m, b + 468, p.signature, 384, "signature");
    put_at<uint64_t>(m, b + 852, p.gsp_boot_args_sysmem_offset);
    static_assert(8 + kNvdmPayloadCotSize <= kFspEmemChannelBytes);
    return m;
}

}  // namespace baregpu::nv
