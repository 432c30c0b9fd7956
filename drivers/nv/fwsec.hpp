// FWSEC-FRTS: the VBIOS's FWSEC ucode, patched (in a copy) to run the FRTS command, which carves
// the 1 MiB FRTS region below the VGA workspace at the top of VRAM and raises WPR2 over it.
// Layouts: open-gpu-kernel-modules 570.144 src/nvidia/src/kernel/gpu/gsp/arch/turing/kernel_gsp_frts_tu102.c
//   FALCON_APPLICATION_INTERFACE_HEADER_V1 {version u8, headerSize u8, entrySize u8, entryCount u8}
//   FALCON_APPLICATION_INTERFACE_ENTRY_V1 {id u32, dmemOffset u32}; ENTRY_ID_DMEMMAPPER = 0x4
//   FALCON_APPLICATION_INTERFACE_DMEM_MAPPER_V3 (64 bytes): cmd_in_buffer_offset +8, cmd_in_buffer_size +12,
//     init_cmd +44; _CMD_FRTS = 0x15
//   FWSECLIC_READ_VBIOS_DESC {version, size, gfwImageOffset u64, gfwImageSize, flags} (24 bytes), flags = 2
//   FWSECLIC_FRTS_REGION_DESC {version, size, frtsRegionOffset4K, frtsRegionSize, frtsRegionMediaType} (20 bytes),
//     size 0x100 (1 MiB in 4 KiB units), media FB = 2; FWSECLIC_FRTS_CMD = both (48 bytes with padding).
#pragma once

#include "firmware-loader/nvidia/vbios.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace baregpu::nv {

inline constexpr uint64_t kFrtsSize = 1ull << 20;         // FRTS region: 1 MiB
inline constexpr uint64_t kVgaWorkspaceSize = 1ull << 20; // at the very top of VRAM

struct FwsecFrts {
    std::vector<std::byte> imem;  // IMEM image, padded to 256 bytes
    std::vector<std::byte> dmem;  // patched DMEM copy, padded to 256 bytes
    uint32_t pkc_data_offset = 0, engine_id_mask = 0, ucode_id = 0, imem_virt_base = 0;
    uint64_t frts_offset = 0;     // VRAM byte offset of FRTS
};

// Patches a copy of the FWSEC ucode in `vbios` for FRTS at fb_size - 2 MiB. Throws FirmwareError
// (naming the VBIOS and the field) when the interface table has no DMEMMAPPER entry or the command
// buffer is too small. `file`: the name errors carry.
FwsecFrts prepare_fwsec_frts(const fw::nv::Vbios& vbios, uint64_t fb_size, const std::string& file);

}  // namespace baregpu::nv
