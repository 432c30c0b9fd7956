// The SEC2 booter (booter_load-<version>.bin): its data image with the production signature
// patched in, split into what goes to IMEM and DMEM. Container layouts are firmware-loader's
// (nvfw_bin_hdr, nvfw_hs_header_v2, nvfw_hs_load_header_v2: nouveau include/nvfw/hs.h); the
// split follows nouveau ga102_gsp_booter_ctor / nvkm_falcon_fw_boot: the signature chosen by
// patch_sig goes to patch_loc of the data image, IMEM gets the code before os_data_offset, DMEM
// gets the OS data, and the BROM's PKC parameter is patch_loc relative to DMEM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace baregpu::nv {

struct BooterImage {
    std::vector<std::byte> imem, dmem;  // padded to 256 bytes
    uint32_t pkc_data_offset = 0;       // patch_loc - os_data_offset
    uint32_t engine_id = 0, ucode_id = 0;  // from the header's meta data
};

// file: the booter's bytes; name: what errors call it. Throws FirmwareError for a bad file.
BooterImage prepare_booter(std::span<const std::byte> file, const std::string& name);

}  // namespace baregpu::nv
