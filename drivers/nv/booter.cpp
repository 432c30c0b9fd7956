// The booter's signature patch and IMEM/DMEM split (booter.hpp).
#include "drivers/nv/booter.hpp"

#include "base/error.hpp"
#include "firmware-loader/nvidia/hs_header.hpp"

#include <fmt/format.h>

#include <cstring>

namespace baregpu::nv {

BooterImage prepare_booter(std::span<const std::byte> file, const std::string& name) {
    const fw::ByteReader reader(file, name);
    const fw::nv::HsHeaderV2 h = fw::nv::parse_hs_header_v2(reader);
    const auto data = h.bin.data.bytes;
    std::vector<std::byte> image(data.begin(), data.end());
    const fw::Region sig = h.signature(0);
    reader.expect(uint64_t{h.patch_loc} + sig.size() <= image.size(), "nvfw_hs_header_v2 patch_loc", h.patch_loc_offset,
                  "a signature slot inside the data image (" + fw::hex(image.size()) + " bytes)", fw::hex(h.patch_loc));
    reader.expect(h.os_data_offset <= h.patch_loc && h.patch_loc - h.os_data_offset < h.os_data_size,
                  "nvfw_hs_header_v2 patch_loc", h.patch_loc_offset,
                  "inside the OS data (" + fw::hex(h.os_data_offset) + " + " + fw::hex(h.os_data_size) + ")",
                  fw::hex(h.patch_loc));
    reader.expect(h.meta.has_value(), "nvfw_hs_header_v2 meta_data", h.meta_data_offset,
                  "engine and ucode ids (12 bytes)", "none");
    std::memcpy(image.data() + h.patch_loc, sig.bytes.data(), sig.size());

    BooterImage b;
    b.imem.assign(image.begin() + h.os_code_offset, image.begin() + h.os_data_offset);
    b.dmem.assign(image.begin() + h.os_data_offset, image.begin() + h.os_data_offset + h.os_data_size);
    b.imem.resize((b.imem.size() + 255) & ~size_t{255});
    b.dmem.resize((b.dmem.size() + 255) & ~size_t{255});
    b.pkc_data_offset = h.patch_loc - h.os_data_offset;
    b.engine_id = h.meta->engine_id;
    b.ucode_id = h.meta->ucode_id;
    return b;
}

}  // namespace baregpu::nv
