// The RLC's firmware (gc_<ver>_rlc.bin): rlc_firmware_header v1.0 and v2.0-v2.5 — the RLC_G
// ucode, its register save/restore lists, and from v2.1 on the save/restore list machines (CNTL,
// GPM, SRM), from v2.2 the IRAM/DRAM images, from v2.3 the RLCP and RLCV cores, v2.4 the tap-delay
// tables, v2.5 (which extends v2.2, not v2.4) the second core's IRAM/DRAM.
// Layout: Linux drivers/gpu/drm/amd/amdgpu/amdgpu_ucode.h (rlc_firmware_header_v1_0..v2_4),
// torvalds/linux d754ed2821fd; v2.5: amd-gfx "drm/amdgpu: Add rlcv firmware for frontdoor loading"
// (2025-11-18). Every list and image offset is absolute in the file, and a zero-size region may
// sit at the end of the ucode (both true of gc_11_0_0_rlc.bin and gc_12_0_1_rlc.bin).
#pragma once

#include "firmware-loader/amd/ucode_header.hpp"

#include <string>
#include <vector>

namespace baregpu::fw::amd {

struct RlcRegion {
    std::string name;       // "RLC_G", "reg_list_format", "save_restore_list_cntl", "IRAM", "RLCP", ...
    uint32_t version = 0;   // where the header gives one (the list machines, RLCP, RLCV)
    uint32_t feature_version = 0;
    Region bytes;
};

struct RlcFirmware {
    UcodeHeader header;
    uint32_t ucode_feature_version = 0;
    // v2.x scalar fields the RLC is programmed with (amdgpu_gfx_rlc_init_microcode).
    uint32_t save_and_restore_offset = 0;
    uint32_t clear_state_descriptor_offset = 0;
    uint32_t avail_scratch_ram_locations = 0;
    uint32_t reg_restore_list_size = 0;
    uint32_t reg_list_format_start = 0;
    uint32_t reg_list_format_separate_start = 0;
    uint32_t starting_offsets_start = 0;
    uint32_t reg_list_format_direct_reg_list_length = 0;  // v2.1+
    std::vector<RlcRegion> regions;                        // RLC_G first, then in header order

    const RlcRegion* find(std::string_view name) const;
};

RlcFirmware parse_rlc(const ByteReader& file);

}  // namespace baregpu::fw::amd
