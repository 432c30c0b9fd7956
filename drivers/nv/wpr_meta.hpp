// GspFwWprMeta: what the booter reads (SEC2 mailbox0/1 hold its bus address) to place GSP-RM in
// WPR2, and the Ampere/Ada layout of the top of VRAM it describes.
// Layout: open-gpu-kernel-modules 570.144 src/nvidia/arch/nvalloc/common/inc/gsp/gsp_fw_wpr_meta.h
// (256 bytes; every field up to bootCount an NvU64, in the order below; GSP_FW_WPR_META_MAGIC,
// GSP_FW_WPR_META_REVISION). The layout top-down: kernel_gsp_tu102.c kgspCalculateFbLayout_TU102
// (and tinygrad nv/ip.py NV_GSP): VGA workspace 1 MiB at the top, FRTS 1 MiB below it, the boot
// binary below, GSP FW 64 KiB aligned below that, the WPR heap 1 MiB aligned below, the metadata
// page, gspFwWprStart 1 MiB aligned, the non-WPR heap 1 MiB below.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace baregpu::nv {

inline constexpr uint64_t kGspFwWprMetaMagic = 0xdc3aae21371a60b3ull;
inline constexpr uint64_t kGspFwWprMetaRevision = 1;
inline constexpr uint64_t kGspFwWprMetaSize = 256;
inline constexpr uint64_t kGspFwHeapSizeAda = 0x8100000;  // tinygrad / RM default WPR heap for a non-vGPU Ada
inline constexpr uint64_t kNonWprHeapSize = 1ull << 20;

struct GspFwWprMeta {
    uint64_t magic = kGspFwWprMetaMagic;
    uint64_t revision = kGspFwWprMetaRevision;
    uint64_t sysmemAddrOfRadix3Elf = 0, sizeOfRadix3Elf = 0;
    uint64_t sysmemAddrOfBootloader = 0, sizeOfBootloader = 0;
    uint64_t bootloaderCodeOffset = 0, bootloaderDataOffset = 0, bootloaderManifestOffset = 0;
    uint64_t sysmemAddrOfSignature = 0, sizeOfSignature = 0;
    uint64_t gspFwRsvdStart = 0, nonWprHeapOffset = 0, nonWprHeapSize = 0;
    uint64_t gspFwWprStart = 0, gspFwHeapOffset = 0, gspFwHeapSize = 0;
    uint64_t gspFwOffset = 0, bootBinOffset = 0, frtsOffset = 0, frtsSize = 0, gspFwWprEnd = 0, fbSize = 0;
    uint64_t vgaWorkspaceOffset = 0, vgaWorkspaceSize = 0, bootCount = 0;

    std::array<std::byte, kGspFwWprMetaSize> encode() const;
};

// Fills the FB layout fields for Ampere/Ada from the VRAM size and the two image sizes (bytes).
// Throws Error naming the sizes when they do not fit in fb_size.
void layout_ada(GspFwWprMeta& meta, uint64_t fb_size, uint64_t bootloader_bytes, uint64_t gsp_elf_bytes);

}  // namespace baregpu::nv
