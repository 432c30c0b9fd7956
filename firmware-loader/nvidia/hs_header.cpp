#include "firmware-loader/nvidia/hs_header.hpp"

#include "firmware-loader/nvidia/subregion.hpp"

#include <string>

namespace baregpu::fw::nv {

HsHeaderV2 parse_hs_header_v2(const ByteReader& file) {
    HsHeaderV2 h;
    h.bin = parse_bin_header(file);
    const uint64_t at = h.bin.header_offset;
    file.region(at, kHsHeaderV2Size, "nvfw_hs_header_v2");
    h.sig_prod_offset = file.u32(at + 0x00, "nvfw_hs_header_v2.sig_prod_offset");
    h.sig_prod_size = file.u32(at + 0x04, "nvfw_hs_header_v2.sig_prod_size");
    h.patch_loc_offset = file.u32(at + 0x08, "nvfw_hs_header_v2.patch_loc");
    h.patch_sig_offset = file.u32(at + 0x0c, "nvfw_hs_header_v2.patch_sig");
    h.meta_data_offset = file.u32(at + 0x10, "nvfw_hs_header_v2.meta_data_offset");
    h.meta_data_size = file.u32(at + 0x14, "nvfw_hs_header_v2.meta_data_size");
    h.num_sig_offset = file.u32(at + 0x18, "nvfw_hs_header_v2.num_sig");
    h.header_offset = file.u32(at + 0x1c, "nvfw_hs_header_v2.header_offset");
    h.header_size = file.u32(at + 0x20, "nvfw_hs_header_v2.header_size");

    // patch_loc, patch_sig and num_sig hold the file offsets of the values (nouveau dereferences them).
    h.patch_loc = file.u32(h.patch_loc_offset, "*nvfw_hs_header_v2.patch_loc");
    h.patch_sig = file.u32(h.patch_sig_offset, "*nvfw_hs_header_v2.patch_sig");
    h.num_sig = file.u32(h.num_sig_offset, "*nvfw_hs_header_v2.num_sig");

    // nouveau splits the block evenly: signature size = sig_prod_size / num_sig.
    const Region sig_prod = file.region(h.sig_prod_offset, h.sig_prod_size, "nvfw_hs_header_v2.sig_prod_offset/size");
    file.expect(h.num_sig != 0 && h.sig_prod_size % h.num_sig == 0, "*nvfw_hs_header_v2.num_sig", h.num_sig_offset,
                "a non-zero count that divides sig_prod_size " + hex(h.sig_prod_size), hex(h.num_sig));
    h.signature_size = h.sig_prod_size / h.num_sig;
    file.expect(h.signature_size != 0, "nvfw_hs_header_v2.sig_prod_size", at + 0x04, "a non-empty signature block",
                hex(h.sig_prod_size));
    // num_sig signatures from patch_sig on (nouveau: sig_prod_offset + sig as the base).
    h.signatures = subregion(file, sig_prod, h.patch_sig, uint64_t{h.num_sig} * h.signature_size,
                             "*nvfw_hs_header_v2.patch_sig", h.patch_sig_offset);

    if (h.meta_data_size != 0) {
        const Region meta = file.region(h.meta_data_offset, h.meta_data_size, "nvfw_hs_header_v2.meta_data_offset/size");
        if (meta.size() >= 12)
            h.meta = HsMetaData{file.u32(meta.offset, "hs meta_data.fuse_ver"),
                                file.u32(meta.offset + 4, "hs meta_data.engine_id"),
                                file.u32(meta.offset + 8, "hs meta_data.ucode_id")};
    }

    // nvfw_hs_load_header_v2 and its apps must fit in header_size.
    const Region load = file.region(h.header_offset, h.header_size, "nvfw_hs_header_v2.header_offset/header_size");
    file.expect(load.size() >= kHsLoadHeaderV2Size, "nvfw_hs_header_v2.header_size", at + 0x20,
                "at least " + std::to_string(kHsLoadHeaderV2Size) + " bytes for nvfw_hs_load_header_v2",
                std::to_string(load.size()));
    const uint64_t l = load.offset;
    h.os_code_offset = file.u32(l + 0x00, "nvfw_hs_load_header_v2.os_code_offset");
    h.os_code_size = file.u32(l + 0x04, "nvfw_hs_load_header_v2.os_code_size");
    h.os_data_offset = file.u32(l + 0x08, "nvfw_hs_load_header_v2.os_data_offset");
    h.os_data_size = file.u32(l + 0x0c, "nvfw_hs_load_header_v2.os_data_size");
    h.num_apps = file.u32(l + 0x10, "nvfw_hs_load_header_v2.num_apps");
    // The loaders use app[0]; an image without one has nothing secure to run.
    const uint64_t max_apps = (load.size() - kHsLoadHeaderV2Size) / kHsLoadHeaderV2AppSize;
    file.expect(h.num_apps >= 1 && h.num_apps <= max_apps, "nvfw_hs_load_header_v2.num_apps", l + 0x10,
                "1.." + std::to_string(max_apps) + " apps (what header_size " + hex(h.header_size) + " holds)",
                std::to_string(h.num_apps));

    // Offsets in the load header count from the start of the data image.
    h.os_code = subregion(file, h.bin.data, h.os_code_offset, h.os_code_size, "nvfw_hs_load_header_v2.os_code_offset/size",
                          l + 0x00);
    h.os_data = subregion(file, h.bin.data, h.os_data_offset, h.os_data_size, "nvfw_hs_load_header_v2.os_data_offset/size",
                          l + 0x08);
    for (uint32_t i = 0; i < h.num_apps; ++i) {
        const uint64_t a = l + kHsLoadHeaderV2Size + i * kHsLoadHeaderV2AppSize;
        const std::string name = "nvfw_hs_load_header_v2.app[" + std::to_string(i) + "]";
        HsApp app;
        app.offset = file.u32(a, name + ".offset");
        app.size = file.u32(a + 4, name + ".size");
        app.code = subregion(file, h.bin.data, app.offset, app.size, name, a);
        h.apps.push_back(app);
    }

    // The falcon loader patches one signature into DMEM at patch_loc - os_data_offset, so the
    // whole signature must land inside the OS data.
    file.expect(h.patch_loc >= h.os_data_offset && h.patch_loc - h.os_data_offset <= h.os_data_size &&
                    h.signature_size <= h.os_data_size - (h.patch_loc - h.os_data_offset),
                "*nvfw_hs_header_v2.patch_loc", h.patch_loc_offset,
                "a " + hex(h.signature_size) + "-byte signature slot inside os_data [" + hex(h.os_data_offset) + ", +" +
                    hex(h.os_data_size) + ")",
                hex(h.patch_loc));
    return h;
}

}  // namespace baregpu::fw::nv
