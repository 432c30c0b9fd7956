// Falcon reset, DMA and HS execution (falcon.hpp has the registers and their headers).
#include "drivers/nv/falcon.hpp"

#include "base/error.hpp"
#include "drivers/nv/wait.hpp"

#include <fmt/format.h>

namespace baregpu::nv {
namespace {
constexpr uint32_t kMailbox0 = 0x040, kMailbox1 = 0x044, kFalconRm = 0x084, kHwcfg2 = 0x0f4;
constexpr uint32_t kHwcfg2MemScrubbing = 1u << 12;  // HWCFG2.MEM_SCRUBBING 12:12
constexpr uint32_t kCpuctl = 0x100, kCpuctlStartCpu = 1u << 1, kCpuctlHalted = 1u << 4, kCpuctlAliasEn = 1u << 6;
constexpr uint32_t kBootvec = 0x104, kDmactl = 0x10c;
constexpr uint32_t kDmatrfbase = 0x110, kDmatrfmoffs = 0x114, kDmatrfcmd = 0x118, kDmatrffboffs = 0x11c,
                   kDmatrfbase1 = 0x128, kCpuctlAlias = 0x130, kEngine = 0x3c0;
// DMATRFCMD: FULL 0:0, IDLE 1:1, SEC 3:2, IMEM 4:4, WRITE 5:5, SIZE 10:8 (6 = 256 B), CTXDMA 14:12.
constexpr uint32_t kDmaFull = 1u << 0, kDmaIdle = 1u << 1, kDmaImem = 1u << 4, kDmaSize256 = 6u << 8;
constexpr uint32_t kFbifTranscfg0 = 0x600, kFbifCtl = 0x624, kFbifCtlAllowPhysNoCtx = 1u << 7;
constexpr uint32_t kFbifMemTypePhysical = 1u << 2;  // TRANSCFG.MEM_TYPE 2:2; TARGET 1:0 = 0 (local FB)
constexpr uint32_t kBromModSel = 0x1180, kBromCurrUcodeId = 0x1198, kBromEngidmask = 0x119c, kBromParaaddr0 = 0x1210;
constexpr uint32_t kBromModSelRsa3k = 1;  // NV_PFALCON2_FALCON_MOD_SEL_ALGO_RSA3K
constexpr uint32_t kRiscvCpuctl = 0x1388, kRiscvActive = 1u << 7;  // RISCV_CPUCTL.ACTIVE_STAT 7:7
constexpr uint32_t kBcrCtrl = 0x1668, kBcrValid = 1u << 0, kBcrCoreRiscv = 1u << 4, kBcrBrfetch = 1u << 8;
constexpr uint32_t kDmaBlock = 256;
}  // namespace

Falcon::Falcon(pci::PciDevice& device, std::string name, uint32_t base)
    : device_(device), name_(std::move(name)), base_(base) {}

uint32_t Falcon::read(uint32_t rel) const { return device_.bar(0).read32(BarOffset{base_ + uint64_t{rel}}); }
void Falcon::write(uint32_t rel, uint32_t value) const { device_.bar(0).write32(BarOffset{base_ + uint64_t{rel}}, value); }

void Falcon::reset(uint32_t chip_id) {
    write(kEngine, 1);
    device_.delay(std::chrono::microseconds(10));
    write(kEngine, 0);
    uint32_t last = 0;
    if (!poll_until(device_, kBootTimeout, [&] { return ((last = read(kHwcfg2)) & kHwcfg2MemScrubbing) == 0; }))
        throw TimeoutError(device_.name(), fmt::format("{} falcon: IMEM/DMEM scrubbing after reset (HWCFG2 {:#x} at BAR0 "
                                                       "{:#x}) did not finish in 10 s",
                                                       name_, last, base_ + kHwcfg2));
    write(kBcrCtrl, 0);  // CORE_SELECT = falcon
    if (!poll_until(device_, kBootTimeout, [&] { return ((last = read(kBcrCtrl)) & kBcrValid) != 0; }))
        throw TimeoutError(device_.name(), fmt::format("{} falcon: BCR_CTRL.VALID after core select (last {:#x})", name_, last));
    write(kFalconRm, chip_id);
}

void Falcon::dma_load(bool imem, uint64_t vram, uint32_t dst, uint32_t size, bool secure, uint32_t tag) {
    if (vram % kDmaBlock != 0 || size % kDmaBlock != 0 || dst % kDmaBlock != 0 || tag % kDmaBlock != 0 || tag > vram)
        throw Error(device_.name(), fmt::format("{} falcon DMA: VRAM {:#x}, size {:#x}, destination {:#x}, tag {:#x} must be "
                                                "256-byte aligned (and the tag not above the VRAM offset)",
                                                name_, vram, size, dst, tag));
    // DMATRFFBOFFS is both the source offset from DMATRFBASE and the IMEM tag of the block (the code's virtual
    // address): the base is the image less its tag (kernel_gsp_falcon_ga102.c, the GA102+ HS load).
    const uint64_t base = vram - tag;
    write(kDmatrfbase, static_cast<uint32_t>(base >> 8));
    write(kDmatrfbase1, static_cast<uint32_t>(base >> 40));
    const uint32_t cmd = kDmaSize256 | (imem ? kDmaImem : 0) | (secure ? (1u << 2) : 0);
    for (uint32_t off = 0; off < size; off += kDmaBlock) {
        uint32_t last = 0;
        if (!poll_until(device_, kBootTimeout, [&] { return ((last = read(kDmatrfcmd)) & kDmaFull) == 0; }))
            throw TimeoutError(device_.name(), fmt::format("{} falcon: DMA queue full (DMATRFCMD {:#x})", name_, last));
        write(kDmatrfmoffs, dst + off);
        write(kDmatrffboffs, tag + off);
        write(kDmatrfcmd, cmd);
    }
    uint32_t last = 0;
    if (!poll_until(device_, kBootTimeout, [&] { return ((last = read(kDmatrfcmd)) & kDmaIdle) != 0; }))
        throw TimeoutError(device_.name(), fmt::format("{} falcon: DMA idle after {} bytes to {} (DMATRFCMD {:#x})", name_,
                                                       size, imem ? "IMEM" : "DMEM", last));
}

uint32_t Falcon::execute_hs(const HsUcodeLoad& u, uint32_t mailbox0, uint32_t mailbox1) {
    write(kFbifCtl, read(kFbifCtl) | kFbifCtlAllowPhysNoCtx);
    write(kDmactl, 0);
    write(kFbifTranscfg0, kFbifMemTypePhysical);  // TARGET 0 = local FB (not in the published headers)
    if (u.nmem_size != 0) dma_load(true, u.nmem_vram, u.nmem_dst, u.nmem_size, false);
    dma_load(true, u.imem_vram, u.imem_dst, u.imem_size, true, u.imem_tag);
    dma_load(false, u.dmem_vram, 0, u.dmem_size, false);
    write(kBromParaaddr0, u.pkc_data_offset);
    write(kBromEngidmask, u.engine_id_mask);
    write(kBromCurrUcodeId, u.ucode_id);
    write(kBromModSel, kBromModSelRsa3k);
    write(kMailbox0, mailbox0);
    write(kMailbox1, mailbox1);
    write(kBootvec, u.boot_vector);
    start_cpu();
    uint32_t last = 0;
    if (!poll_until(device_, kBootTimeout, [&] { return ((last = read(kCpuctl)) & kCpuctlHalted) != 0; }))
        throw TimeoutError(device_.name(), fmt::format("{} falcon: {} did not halt in 10 s (CPUCTL {:#x}, MAILBOX0 {:#x})",
                                                       name_, u.name, last, read(kMailbox0)));
    return read(kMailbox0);
}

void Falcon::select_riscv() {
    write(kBcrCtrl, kBcrCoreRiscv | kBcrBrfetch);
    uint32_t last = 0;
    if (!poll_until(device_, kBootTimeout, [&] { return ((last = read(kBcrCtrl)) & kBcrValid) != 0; }))
        throw TimeoutError(device_.name(), fmt::format("{} falcon: BCR_CTRL.VALID after selecting RISC-V (last {:#x})", name_,
                                                       last));
}

void Falcon::set_mailboxes(uint64_t value) const {
    write(kMailbox0, static_cast<uint32_t>(value));
    write(kMailbox1, static_cast<uint32_t>(value >> 32));
}
uint32_t Falcon::mailbox0() const { return read(kMailbox0); }

void Falcon::start_cpu() const {
    if (read(kCpuctl) & kCpuctlAliasEn) write(kCpuctlAlias, kCpuctlStartCpu);
    else write(kCpuctl, kCpuctlStartCpu);
}
bool Falcon::halted() const { return (read(kCpuctl) & kCpuctlHalted) != 0; }

bool Falcon::riscv_active() const { return (read(kRiscvCpuctl) & kRiscvActive) != 0; }

}  // namespace baregpu::nv
