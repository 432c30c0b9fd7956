// The booter's checks of GspFwWprMeta and of the radix3 page list behind it (booter.hpp).
#include "booter.hpp"

#include <fmt/format.h>

#include <cstring>
#include <vector>

namespace baregpu::sim::nvgpu {
namespace {
constexpr uint64_t kMagic = 0xdc3aae21371a60b3ull;  // GSP_FW_WPR_META_MAGIC
constexpr uint64_t kRevision = 1;                   // GSP_FW_WPR_META_REVISION
constexpr uint64_t kBooterMiB = 1ull << 20, kBooterPage = 0x1000;
constexpr const char* kSrc = "open-gpu-kernel-modules 570.144 gsp_fw_wpr_meta.h; kernel_gsp_tu102.c kgspCalculateFbLayout";
constexpr const char* kSrcRadix3 = "open-gpu-kernel-modules 570.144 kernel_gsp.c kgspCreateRadix3 (LibOS radix3, 4 KiB pages)";

uint64_t u64(const std::vector<std::byte>& b, size_t at) {
    uint64_t v;
    std::memcpy(&v, b.data() + at, 8);
    return v;
}
}  // namespace

BooterVerdict check_wpr_meta(pci::sim::SimPort& port, uint64_t meta_address, uint64_t frts_offset, uint64_t fb_size,
                             const ViolationSink& violation) {
    BooterVerdict v;
    std::vector<std::byte> m(256);
    if (meta_address == 0 || !port.dma_read(BusAddress{meta_address}, m)) {
        violation(fmt::format("booter cannot read GspFwWprMeta at {:#x} (SEC2 mailbox0/1)", meta_address),
                  "SEC2 mailbox0/1", kSrc);
        return v;
    }
    bool ok = true;
    auto need = [&](bool cond, const std::string& what) {
        if (!cond) violation("GspFwWprMeta: " + what, "GspFwWprMeta", kSrc), ok = false;
    };
    need(u64(m, 0) == kMagic, fmt::format("magic {:#x}, want {:#x}", u64(m, 0), kMagic));
    need(u64(m, 8) == kRevision, fmt::format("revision {}, want {}", u64(m, 8), kRevision));
    if (!ok) return v;
    const uint64_t radix3 = u64(m, 16), elf_size = u64(m, 24), bl_addr = u64(m, 32), bl_size = u64(m, 40);
    const uint64_t sig_addr = u64(m, 72), sig_size = u64(m, 80);
    const uint64_t non_wpr = u64(m, 96), non_wpr_size = u64(m, 104), wpr_start = u64(m, 112);
    const uint64_t heap = u64(m, 120), heap_size = u64(m, 128), fw = u64(m, 136), boot = u64(m, 144);
    const uint64_t frts = u64(m, 152), frts_size = u64(m, 160), wpr_end = u64(m, 168), fb = u64(m, 176);
    const uint64_t vga = u64(m, 184), vga_size = u64(m, 192);
    need(fb == fb_size, fmt::format("fbSize {:#x}, the chip has {:#x}", fb, fb_size));
    need(vga + vga_size <= fb && vga_size != 0, fmt::format("VGA workspace {:#x}+{:#x} past fbSize", vga, vga_size));
    need(frts == frts_offset, fmt::format("frtsOffset {:#x}, but FWSEC put FRTS at {:#x}", frts, frts_offset));
    need(frts_size == kBooterMiB && frts + frts_size <= vga, fmt::format("FRTS {:#x}+{:#x} not 1 MiB below the VGA workspace {:#x}",
                                                                   frts, frts_size, vga));
    need(boot + bl_size <= frts, fmt::format("boot binary {:#x}+{:#x} overlaps FRTS {:#x}", boot, bl_size, frts));
    need(fw % 0x10000 == 0 && fw + elf_size <= boot,
         fmt::format("GSP FW {:#x}+{:#x} not 64 KiB aligned below the boot binary {:#x}", fw, elf_size, boot));
    need(heap % kBooterMiB == 0 && heap + heap_size <= fw, fmt::format("heap {:#x}+{:#x} not 1 MiB aligned below GSP FW {:#x}",
                                                                 heap, heap_size, fw));
    need(wpr_start % kBooterMiB == 0 && wpr_start + kBooterPage <= heap,
         fmt::format("gspFwWprStart {:#x} not 1 MiB aligned below the heap {:#x} with room for the metadata", wpr_start, heap));
    need(non_wpr + non_wpr_size <= wpr_start && non_wpr_size != 0,
         fmt::format("non-WPR heap {:#x}+{:#x} overlaps gspFwWprStart {:#x}", non_wpr, non_wpr_size, wpr_start));
    // WPR2 ends where FRTS ends: RM lays FRTS at the top of WPR (kernel_gsp_tu102.c kgspCalculateFbLayout:
    // frtsOffset = gspFwWprEnd - frtsSize).
    need(wpr_end > wpr_start && wpr_end == frts + frts_size,
         fmt::format("gspFwWprEnd {:#x}: WPR2 must end where FRTS ends, {:#x} (frtsOffset + frtsSize)", wpr_end, frts + frts_size));
    need(bl_size != 0 && u64(m, 48) < bl_size && u64(m, 56) < bl_size && u64(m, 64) < bl_size,
         "bootloader code/data/manifest offsets must lie inside sizeOfBootloader");
    std::vector<std::byte> probe(8);
    need(bl_addr != 0 && port.dma_read(BusAddress{bl_addr}, probe), fmt::format("bootloader at {:#x} unreadable", bl_addr));
    need(sig_size != 0 && port.dma_read(BusAddress{sig_addr}, probe), fmt::format("signature at {:#x} unreadable", sig_addr));
    if (!ok) return v;

    // radix3: level 0 is one page whose first entry is level 1; level 2 lists the data pages. The
    // first data page of a GSP-RM .fwimage starts with an ELF header.
    std::vector<std::byte> page(kBooterPage);
    uint64_t at = radix3;
    for (int level = 0; level < 3; ++level) {
        if (!port.dma_read(BusAddress{at}, page)) {
            violation(fmt::format("radix3 level {} page at {:#x} unreadable", level, at), "GspFwWprMeta.sysmemAddrOfRadix3Elf",
                      kSrcRadix3);
            return v;
        }
        at = u64(page, 0);
    }
    std::vector<std::byte> head(4);
    if (!port.dma_read(BusAddress{at}, head) || head[0] != std::byte{0x7f} || head[1] != std::byte{'E'}) {
        violation(fmt::format("radix3 walk ends at {:#x}, which does not hold the GSP-RM ELF", at),
                  "GspFwWprMeta.sysmemAddrOfRadix3Elf", kSrcRadix3);
        return v;
    }
    v.ok = true;
    v.wpr_start = wpr_start;
    v.wpr_end = wpr_end;
    return v;
}

}  // namespace baregpu::sim::nvgpu
