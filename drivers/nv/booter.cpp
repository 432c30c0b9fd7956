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

    reader.expect(h.num_apps >= 1 && !h.apps.empty(), "nvfw_hs_load_header_v2 num_apps", h.header_offset + 16,
                  "at least one secure application", std::to_string(h.num_apps));
    const fw::nv::HsApp& app = h.apps[0];
    reader.expect(uint64_t{app.offset} + app.size <= image.size() && h.os_code_size <= image.size(),
                  "nvfw_hs_load_header_v2 app 0", h.header_offset + 20, "inside the data image",
                  fw::hex(app.offset) + " + " + fw::hex(app.size));
    auto padded = [](auto first, auto last) {
        std::vector<std::byte> v(first, last);
        v.resize((v.size() + 255) & ~size_t{255});
        return v;
    };
    // GA102 and later boot the booter from HS: secure app 0 alone, at IMEM physical 0 tagged with its own offset
    // (its virtual address), started there; no non-secure part (RM kernel_gsp_booter.c: imemPa 0, imemVa =
    // appCodeOffset; kernel_gsp_falcon_ga102.c: BOOTVEC = imemVa; nouveau nvkm_falcon_fw_ctor_hs_v2). The
    // non-secure split is Turing's / GA100's (BOOT_DIRECT).
    reader.expect(app.offset % 256 == 0, "nvfw_hs_load_header_v2 app 0 offset", h.header_offset + 20,
                  "256-byte aligned (its IMEM tag)", fw::hex(app.offset));
    BooterImage b;
    b.imem = padded(image.begin() + app.offset, image.begin() + app.offset + app.size);
    b.imem_dst = 0;
    b.imem_tag = app.offset;
    b.dmem = padded(image.begin() + h.os_data_offset, image.begin() + h.os_data_offset + h.os_data_size);
    b.boot_vector = app.offset;
    b.pkc_data_offset = h.patch_loc - h.os_data_offset;
    b.engine_id = h.meta->engine_id;
    b.ucode_id = h.meta->ucode_id;
    return b;
}

}  // namespace baregpu::nv
