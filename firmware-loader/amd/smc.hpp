// The SMU's firmware (smu_<ver>.bin): smc_firmware_header v1.0 (code), v2.0 (+ one soft PPTable),
// v2.1 (+ a table of soft PPTables by id).
// Layout: Linux drivers/gpu/drm/amd/amdgpu/amdgpu_ucode.h (smc_firmware_header_v1_0/v2_0/v2_1,
// smc_soft_pptable_entry), torvalds/linux d754ed2821fd. PPTable offsets are absolute file offsets
// (true of smu_13_0_0.bin and smu_14_0_3.bin), which is how amdgpu_smu's smu_v13_0_init_microcode reads them.
#pragma once

#include "firmware-loader/amd/ucode_header.hpp"

#include <vector>

namespace baregpu::fw::amd {

struct SmcPptable {
    uint32_t id = 0;   // the board's pptable id (v2.1); 0 for the single v2.0 table
    Region bytes;
};

struct SmcFirmware {
    UcodeHeader header;
    uint32_t ucode_start_addr = 0;   // where the SMU runs the code from (its own address space)
    Region code;                     // the ucode array
    std::vector<SmcPptable> pptables;
};

SmcFirmware parse_smc(const ByteReader& file);

}  // namespace baregpu::fw::amd
