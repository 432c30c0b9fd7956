// RM_RISCV_UCODE_DESC: the descriptor in the GSP bootloader files (nvfw_bin_hdr containers). It
// splits the data image into the manifest, the monitor's code and data and, on Ada, the
// bootloader that loads GSP-RM.
#pragma once

#include "firmware-loader/byte_reader.hpp"
#include "firmware-loader/nvidia/bin_header.hpp"

#include <cstdint>
#include <optional>

namespace baregpu::fw::nv {

// Layout: NVIDIA/open-gpu-kernel-modules src/nvidia/arch/nvalloc/common/inc/rmRiscvUcode.h
// (commit 90eb10774f1c53d2364eacf9fa8f0c7a92b1b824): 21 u32s. Older trees (1739a20e…) end after
// swbromDataSize (19 u32s) and lack fbReservedSize and bSignedAsCode.
inline constexpr uint64_t kRiscvUcodeDescSize = 84;
inline constexpr uint64_t kRiscvUcodeDescShortSize = 76;

struct RiscvUcodeDesc {
    BinHeader bin;
    uint32_t version = 0;
    uint32_t bootloaderOffset = 0;
    uint32_t bootloaderSize = 0;
    uint32_t bootloaderParamOffset = 0;
    uint32_t bootloaderParamSize = 0;
    uint32_t riscvElfOffset = 0;
    uint32_t riscvElfSize = 0;
    uint32_t appVersion = 0;
    uint32_t manifestOffset = 0;
    uint32_t manifestSize = 0;
    uint32_t monitorDataOffset = 0;
    uint32_t monitorDataSize = 0;
    uint32_t monitorCodeOffset = 0;
    uint32_t monitorCodeSize = 0;
    uint32_t bIsMonitorEnabled = 0;
    uint32_t swbromCodeOffset = 0;
    uint32_t swbromCodeSize = 0;
    uint32_t swbromDataOffset = 0;
    uint32_t swbromDataSize = 0;
    std::optional<uint32_t> fbReservedSize;  // absent in the 76-byte layout
    std::optional<uint32_t> bSignedAsCode;
    // Each (offset, size) pair as a region of the file; all lie inside the data image. A pair of
    // zeros (gb202 has no bootloader) is an empty region at the start of the image.
    Region bootloader, bootloader_param, riscv_elf, manifest, monitor_data, monitor_code, swbrom_code, swbrom_data;
};

// The descriptor's size is the gap between nvfw_bin_hdr.header_offset and data_offset (84 in
// every real file); 76 selects the older layout.
RiscvUcodeDesc parse_riscv_ucode_desc(const ByteReader& file);

}  // namespace baregpu::fw::nv
