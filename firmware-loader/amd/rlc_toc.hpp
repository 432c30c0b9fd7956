// The RLC backdoor-autoload table of contents (gc_<ver>_toc.bin on GC 12): a common firmware
// header (read as psp_firmware_header_v1_0) whose ucode array is a list of RLC_TABLE_OF_CONTENT_V2
// entries saying where in the autoload buffer each firmware goes. This is NOT the PSP TOC (that
// one is a signed binary inside psp_<ver>_sos.bin; see psp_toc.hpp).
// Entry layout: Linux drivers/gpu/drm/amd/amdgpu/amdgpu_rlc.h (RLC_TABLE_OF_CONTENT_V2, SOC24_FIRMWARE_ID),
// amd-gfx "Add new RLC_TABLE_OF_CONTENT structure definition" / "Add RLC autoload TOC header file for
// soc24 ASIC" (Likun Gao). Units: gfx_v12_0_parse_rlc_toc (offset in 8-dword units, size in dwords,
// or in 1024-dword units when size_x16).
#pragma once

#include "firmware-loader/amd/ucode_header.hpp"

#include <vector>

namespace baregpu::fw::amd {

struct RlcTocEntry {
    uint32_t id = 0;                  // SOC24_FIRMWARE_ID; real files use ids past the enum's MAX (43)
    uint64_t offset = 0;              // bytes into the autoload buffer
    uint64_t size = 0;                // bytes
    uint32_t memory_destination = 0;
    uint32_t vfflr_image_code = 0;
};
// "RLC_G_UCODE", "RS64_MEC", ... or "id N" for ids the enum does not name.
std::string soc24_firmware_name(uint32_t id);

struct RlcToc {
    UcodeHeader header;
    uint32_t toc_version = 0;  // psp_firmware_header_v1_0.sos.fw_version (what Linux calls the TOC's fw_version)
    std::vector<RlcTocEntry> entries;  // up to (not including) the terminating id 0
};

// The entries run until an entry with id 0 or the end of the ucode array, whichever is first.
RlcToc parse_rlc_toc(const ByteReader& file);

}  // namespace baregpu::fw::amd
