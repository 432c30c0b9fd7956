// GspFwWprMeta encoding and the Ada FB layout (wpr_meta.hpp).
#include "drivers/nv/wpr_meta.hpp"

#include "base/error.hpp"
#include "drivers/nv/fwsec.hpp"

#include <fmt/format.h>

#include <cstring>

namespace baregpu::nv {
namespace {
constexpr uint64_t kMiB = 1ull << 20;
uint64_t down(uint64_t v, uint64_t a) { return v / a * a; }
}  // namespace

std::array<std::byte, kGspFwWprMetaSize> GspFwWprMeta::encode() const {
    // Field order of gsp_fw_wpr_meta.h; bootCount ends at +208, the rest (partition union,
    // gspFwHeapVfPartitionCount, flags, pmuReservedSize, verified) stays 0.
    const uint64_t fields[] = {magic, revision, sysmemAddrOfRadix3Elf, sizeOfRadix3Elf, sysmemAddrOfBootloader,
                               sizeOfBootloader, bootloaderCodeOffset, bootloaderDataOffset, bootloaderManifestOffset,
                               sysmemAddrOfSignature, sizeOfSignature, gspFwRsvdStart, nonWprHeapOffset, nonWprHeapSize,
                               gspFwWprStart, gspFwHeapOffset, gspFwHeapSize, gspFwOffset, bootBinOffset, frtsOffset,
                               frtsSize, gspFwWprEnd, fbSize, vgaWorkspaceOffset, vgaWorkspaceSize, bootCount};
    static_assert(sizeof(fields) == 208);
    std::array<std::byte, kGspFwWprMetaSize> out{};
    std::memcpy(out.data(), fields, sizeof(fields));
    return out;
}

void layout_ada(GspFwWprMeta& m, uint64_t fb_size, uint64_t bootloader_bytes, uint64_t gsp_elf_bytes) {
    const uint64_t need = kVgaWorkspaceSize + kFrtsSize + bootloader_bytes + gsp_elf_bytes + kGspFwHeapSizeAda +
                          kNonWprHeapSize + 8 * kMiB;
    if (fb_size < need)
        throw Error("", fmt::format("GSP WPR layout: {:#x} bytes of VRAM cannot hold the {:#x} the Ada layout needs "
                                    "(heap {:#x}, boot binary {:#x}, GSP-RM {:#x})",
                                    fb_size, need, kGspFwHeapSizeAda, bootloader_bytes, gsp_elf_bytes));
    m.fbSize = fb_size;
    m.vgaWorkspaceSize = kVgaWorkspaceSize;
    m.vgaWorkspaceOffset = fb_size - kVgaWorkspaceSize;
    m.frtsSize = kFrtsSize;
    m.frtsOffset = m.vgaWorkspaceOffset - kFrtsSize;  // must equal what FWSEC-FRTS was told
    m.sizeOfBootloader = bootloader_bytes;
    m.bootBinOffset = down(m.frtsOffset - bootloader_bytes, 0x1000);
    m.sizeOfRadix3Elf = gsp_elf_bytes;
    m.gspFwOffset = down(m.bootBinOffset - gsp_elf_bytes, 0x10000);
    m.gspFwHeapSize = kGspFwHeapSizeAda;
    m.gspFwHeapOffset = down(m.gspFwOffset - kGspFwHeapSizeAda, kMiB);
    m.gspFwWprStart = down(m.gspFwHeapOffset - 0x1000, kMiB);  // the metadata page sits right below the heap
    m.nonWprHeapSize = kNonWprHeapSize;
    m.nonWprHeapOffset = m.gspFwWprStart - kNonWprHeapSize;
    m.gspFwRsvdStart = m.nonWprHeapOffset;
    // FRTS lies inside WPR2, at its top: RM derives frtsOffset = gspFwWprEnd - frtsSize (kernel_gsp_tu102.c
    // kgspCalculateFbLayout); tinygrad's nv/ip.py sets gspFwWprEnd to the VGA workspace, FRTS right below it.
    m.gspFwWprEnd = m.frtsOffset + m.frtsSize;
}

}  // namespace baregpu::nv
