// The heavy-secure (HS) falcon images NVIDIA ships as nvfw_bin_hdr containers: booter_load,
// booter_unload and scrubber. nvfw_hs_header_v2 locates the production signatures and the
// nvfw_hs_load_header_v2, which splits the data image into the non-secure OS code, the OS data
// and the secure applications.
#pragma once

#include "firmware-loader/byte_reader.hpp"
#include "firmware-loader/nvidia/bin_header.hpp"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

namespace baregpu::fw::nv {

// Layouts: nouveau drivers/gpu/drm/nouveau/include/nvfw/hs.h (torvalds/linux
// 254a142007114cad7b0a901215c1558e4315d46f): struct nvfw_hs_header_v2 (nine u32s) and
// struct nvfw_hs_load_header_v2 (five u32s, then num_apps {offset, size} pairs).
inline constexpr uint64_t kHsHeaderV2Size = 36;
inline constexpr uint64_t kHsLoadHeaderV2Size = 20;
inline constexpr uint64_t kHsLoadHeaderV2AppSize = 8;

struct HsApp {
    uint32_t offset = 0;  // in the data image
    uint32_t size = 0;
    Region code;  // the app's code, as a region of the file
};

// The meta data nouveau's ga102_gsp_booter_ctor() reads as three u32s: the fuse version the
// signatures are for, the engine id and the ucode id.
struct HsMetaData {
    uint32_t fuse_ver = 0;
    uint32_t engine_id = 0;
    uint32_t ucode_id = 0;
};

struct HsHeaderV2 {
    BinHeader bin;
    // nvfw_hs_header_v2 as stored.
    uint32_t sig_prod_offset = 0;
    uint32_t sig_prod_size = 0;
    uint32_t patch_loc_offset = 0;  // the file offset of patch_loc, not patch_loc itself
    uint32_t patch_sig_offset = 0;  // the file offset of patch_sig
    uint32_t meta_data_offset = 0;
    uint32_t meta_data_size = 0;
    uint32_t num_sig_offset = 0;  // the file offset of num_sig
    uint32_t header_offset = 0;   // the file offset of nvfw_hs_load_header_v2
    uint32_t header_size = 0;
    // The values those three offsets point at (nouveau dereferences them the same way).
    uint32_t patch_loc = 0;  // where in the data image the chosen signature is patched
    uint32_t patch_sig = 0;  // byte offset of the first signature inside the signature block
    uint32_t num_sig = 0;
    uint32_t signature_size = 0;  // sig_prod_size / num_sig
    std::optional<HsMetaData> meta;
    Region signatures;  // num_sig signatures of signature_size bytes, from sig_prod_offset + patch_sig
    // The index-th of them; the loader picks one by fuse version. An index past num_sig is a
    // caller's bug, not a bad file.
    Region signature(uint32_t index) const {
        if (index >= num_sig) throw std::out_of_range("nvfw_hs_header_v2 signature index past num_sig");
        const uint64_t at = uint64_t{index} * signature_size;
        return Region{signatures.offset + at, signatures.bytes.subspan(at, signature_size)};
    }
    // nvfw_hs_load_header_v2.
    uint32_t os_code_offset = 0;
    uint32_t os_code_size = 0;
    uint32_t os_data_offset = 0;
    uint32_t os_data_size = 0;
    uint32_t num_apps = 0;
    std::vector<HsApp> apps;
    Region os_code;  // non-secure code
    Region os_data;  // data, into which the signature is patched
};

HsHeaderV2 parse_hs_header_v2(const ByteReader& file);

}  // namespace baregpu::fw::nv
