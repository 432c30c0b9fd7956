// What the simulated booter (SEC2, booter_load) checks before it hands the chip to GSP-RM: the
// GspFwWprMeta the CPU prepared, read through the device's DMA path. Offsets of GspFwWprMeta
// (256 bytes, all NvU64 up to bootCount): open-gpu-kernel-modules 570.144
// src/nvidia/arch/nvalloc/common/inc/gsp/gsp_fw_wpr_meta.h — magic +0 (GSP_FW_WPR_META_MAGIC
// 0xdc3aae21371a60b3), revision +8 (1), sysmemAddrOfRadix3Elf +16, sizeOfRadix3Elf +24,
// sysmemAddrOfBootloader +32, sizeOfBootloader +40, bootloaderCode/Data/ManifestOffset +48/56/64,
// sysmemAddrOfSignature +72, sizeOfSignature +80, gspFwRsvdStart +88, nonWprHeapOffset +96,
// nonWprHeapSize +104, gspFwWprStart +112, gspFwHeapOffset +120, gspFwHeapSize +128, gspFwOffset +136,
// bootBinOffset +144, frtsOffset +152, frtsSize +160, gspFwWprEnd +168, fbSize +176,
// vgaWorkspaceOffset +184, vgaWorkspaceSize +192, bootCount +200.
#pragma once

#include "drivers/pci/sim_device_model.hpp"
#include "falcon.hpp"

#include <cstdint>

namespace baregpu::sim::nvgpu {

struct BooterVerdict {
    bool ok = false;
    uint64_t wpr_start = 0, wpr_end = 0;  // the WPR2 the booter raises over GSP-RM
};

// frts_offset: where FWSEC put FRTS (the booter insists the metadata agrees); fb_size: VRAM bytes.
BooterVerdict check_wpr_meta(pci::sim::SimPort& port, uint64_t meta_address, uint64_t frts_offset, uint64_t fb_size,
                             const ViolationSink& violation);

}  // namespace baregpu::sim::nvgpu
