// The SEC2 booter (booter_load-<version>.bin): its data image with the production signature
// patched in, split into what goes to IMEM and DMEM. Container layouts are firmware-loader's
// (nvfw_bin_hdr, nvfw_hs_header_v2, nvfw_hs_load_header_v2: nouveau include/nvfw/hs.h); the split
// follows nouveau nvkm_falcon_fw_ctor_hs_v2 (nvkm/falcon/fw.c): non-secure code = image[0,
// non_sec_code_size) at IMEM non_sec_code_off; secure code = app 0 at IMEM align(app offset, 256);
// DMEM = image[data_dma_base, + data_size) at DMEM 0, the signature at patch_loc − data_dma_base;
// the boot vector is non_sec_code_off.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace baregpu::nv {

struct BooterImage {
    std::vector<std::byte> nmem, imem, dmem;  // non-secure code (none from GA102 on), secure code (app 0), data; padded
    uint32_t nmem_dst = 0, imem_dst = 0;      // IMEM offsets (physical)
    uint32_t imem_tag = 0;                    // app 0's virtual address: its IMEM tag
    uint32_t boot_vector = 0;
    uint32_t pkc_data_offset = 0;       // patch_loc - os_data_offset
    uint32_t engine_id = 0, ucode_id = 0;  // from the header's meta data
};

// file: the booter's bytes; name: what errors call it. Throws FirmwareError for a bad file.
BooterImage prepare_booter(std::span<const std::byte> file, const std::string& name);

}  // namespace baregpu::nv
