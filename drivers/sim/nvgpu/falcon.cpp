// The falcon engine model (falcon.hpp); register fields from registers.hpp.
#include "falcon.hpp"

#include "registers.hpp"

#include <fmt/format.h>

#include <cstring>

namespace baregpu::sim::nvgpu {
namespace {
constexpr size_t kImemBytes = 0x40000, kDmemBytes = 0x20000;  // room for the booter's images
constexpr const char* kFalconSrc = "open-gpu-kernel-modules 570.144 dev_falcon_v4.h; kernel_falcon_ga102.c / kflcnReset";
}  // namespace

void FalconModel::power_on() {
    driver_reset_ = false;
    in_reset_ = false;
    scrub_reads_left_ = 0;
    bcr_ = reg::kBcrValid;
    fbif_ctl_ = 0, fbif_transcfg_ = 0, dmactl_ = 1;  // see the ENGINE reset below
    trfbase_ = trfbase1_ = trfmoffs_ = trffboffs_ = 0;
    paraaddr0_ = engidmask_ = ucode_id_ = mod_sel_ = bootvec_ = 0;
    mailbox_[0] = mailbox_[1] = 0;
    os_ = rm_ = 0;
    halted_ = started_ = riscv_active_ = false;
    imem_.assign(kImemBytes, std::byte{0});
    dmem_.assign(kDmemBytes, std::byte{0});
    imem_loaded_ = dmem_loaded_ = 0;
    imem_tags_.clear();
}

uint32_t FalconModel::read(uint32_t rel) {
    switch (rel) {
    case reg::kMailbox0: return mailbox_[0];
    case reg::kMailbox1: return mailbox_[1];
    case reg::kFalconOs: return os_;
    case reg::kFalconRm: return rm_;
    case reg::kHwcfg2: {
        uint32_t v = reg::kHwcfg2Riscv;
        if (in_reset_ || scrub_reads_left_ > 0) v |= reg::kHwcfg2MemScrubbing;
        if (!in_reset_ && scrub_reads_left_ > 0) --scrub_reads_left_;
        return v;
    }
    case reg::kCpuctl: return halted_ ? reg::kCpuctlHalted : 0;  // ALIAS_EN clear: CPUCTL itself starts the CPU
    case reg::kBootvec: return bootvec_;
    case reg::kDmactl: return dmactl_;
    case reg::kDmatrfcmd: return reg::kDmaIdle;  // transfers complete at once; FULL never set
    case reg::kEngine: return in_reset_ ? 1 : 0;
    case reg::kFbifCtl: return fbif_ctl_;
    case reg::kFbifTranscfg0: return fbif_transcfg_;
    case reg::kBromParaaddr0: return paraaddr0_;
    case reg::kBromEngidmask: return engidmask_;
    case reg::kBromCurrUcodeId: return ucode_id_;
    case reg::kBromModSel: return mod_sel_;
    case reg::kRiscvCpuctl: return riscv_active_ ? reg::kRiscvCpuctlActive : 0;
    case reg::kRiscvBcrCtrl: return bcr_;
    default: return 0;
    }
}

FalconModel::Event FalconModel::write(uint32_t rel, uint32_t value, std::span<const std::byte> vram,
                                      const ViolationSink& violation) {
    const std::string where = fmt::format("{} falcon +{:#x}", name_, rel);
    switch (rel) {
    case reg::kEngine:
        if (value & 1) {
            in_reset_ = true;
            halted_ = started_ = riscv_active_ = false;
            std::memset(imem_.data(), 0, imem_.size());
            std::memset(dmem_.data(), 0, dmem_.size());
            imem_loaded_ = dmem_loaded_ = 0;
            imem_tags_.clear();
            paraaddr0_ = engidmask_ = ucode_id_ = mod_sel_ = 0;
            bcr_ = reg::kBcrValid;
            // FBIF and DMACTL come back in states a driver must overwrite before DMA (the model's
            // choice of reset values: DMACTL set, no physical access allowed, virtual mem type).
            fbif_ctl_ = 0, fbif_transcfg_ = 0, dmactl_ = 1;
        } else if (in_reset_) {
            in_reset_ = false;
            driver_reset_ = true;
            scrub_reads_left_ = 2;  // IMEM/DMEM scrubbing takes a while after reset
        }
        return Event::None;
    case reg::kMailbox0: mailbox_[0] = value; return Event::None;
    case reg::kMailbox1: mailbox_[1] = value; return Event::None;
    case reg::kFalconOs: os_ = value; return Event::None;
    case reg::kFalconRm: rm_ = value; return Event::None;
    case reg::kRiscvBcrCtrl: bcr_ = (value & ~reg::kBcrValid) | reg::kBcrValid; return Event::None;
    case reg::kFbifCtl: fbif_ctl_ = value; return Event::None;
    case reg::kFbifTranscfg0: fbif_transcfg_ = value; return Event::None;
    case reg::kDmactl: dmactl_ = value; return Event::None;
    case reg::kDmatrfbase: trfbase_ = value; return Event::None;
    case reg::kDmatrfbase1: trfbase1_ = value; return Event::None;
    case reg::kDmatrfmoffs: trfmoffs_ = value; return Event::None;
    case reg::kDmatrffboffs: trffboffs_ = value; return Event::None;
    case reg::kDmatrfcmd: dma(value, vram, violation); return Event::None;
    case reg::kBromParaaddr0: paraaddr0_ = value; return Event::None;
    case reg::kBromEngidmask: engidmask_ = value; return Event::None;
    case reg::kBromCurrUcodeId: ucode_id_ = value; return Event::None;
    case reg::kBromModSel: mod_sel_ = value; return Event::None;
    case reg::kBootvec: bootvec_ = value; return Event::None;
    case reg::kCpuctl:
    case reg::kCpuctlAlias:
        if (!(value & reg::kCpuctlStartCpu)) return Event::None;
        if (!driver_reset_ || in_reset_) {
            violation("falcon CPU started without an engine reset first (or while still in reset)", where, kFalconSrc);
            return Event::None;
        }
        if (riscv_selected()) {
            violation("falcon CPUCTL.STARTCPU with the RISC-V core selected (BCR_CTRL.CORE_SELECT)", where, kFalconSrc);
            return Event::None;
        }
        if (engidmask_ == 0 || mod_sel_ == 0) {
            violation("HS ucode started without BROM parameters (ENGIDMASK, MOD_SEL)", where,
                      "open-gpu-kernel-modules 570.144 kernel_gsp_falcon_ga102.c / kflcnSetupBootromArgs");
            return Event::None;
        }
        started_ = true;
        halted_ = false;
        return Event::StartHs;
    case reg::kRiscvCpuctl:
        if (!(value & reg::kRiscvCpuctlStart)) return Event::None;
        if (!riscv_selected()) {
            violation("RISC-V started without BCR_CTRL.CORE_SELECT = RISC-V", where, "dev_riscv_pri.h");
            return Event::None;
        }
        return Event::StartRiscv;
    default: return Event::None;
    }
}

void FalconModel::dma(uint32_t cmd, std::span<const std::byte> vram, const ViolationSink& violation) {
    const std::string where = fmt::format("{} falcon DMATRFCMD", name_);
    if (!driver_reset_ || in_reset_) {
        violation("falcon DMA before the engine was reset (ENGINE.RESET pulse, then scrubbing)", where, kFalconSrc);
        return;
    }
    if (scrub_reads_left_ > 0) {
        violation("falcon DMA while IMEM/DMEM scrubbing is still running (HWCFG2.MEM_SCRUBBING)", where, kFalconSrc);
        return;
    }
    if (dmactl_ != 0 || !(fbif_ctl_ & reg::kFbifCtlAllowPhysNoCtx)) {
        violation(fmt::format("falcon DMA without DMACTL = 0 and FBIF_CTL.ALLOW_PHYS_NO_CTX (DMACTL {:#x}, FBIF_CTL {:#x})",
                              dmactl_, fbif_ctl_),
                  where, kFalconSrc);
        return;
    }
    if ((fbif_transcfg_ & 3) != 0 || !(fbif_transcfg_ & (1u << 2))) {
        violation(fmt::format("falcon DMA with FBIF_TRANSCFG(0) {:#x}: want TARGET local FB (0) and MEM_TYPE physical",
                              fbif_transcfg_),
                  where, "dev_fbif_v4.h NV_PFALCON_FBIF_TRANSCFG; kernel_falcon_ga102.c");
        return;
    }
    if (((cmd >> reg::kDmaSizeShift) & 7) != reg::kDmaSize256 || (cmd & reg::kDmaWrite)) {
        violation(fmt::format("falcon DMA command {:#x}: only 256-byte reads from FB are modelled", cmd), where, kFalconSrc);
        return;
    }
    const uint64_t src = ((uint64_t{trfbase1_} << 32 | trfbase_) << 8) + trffboffs_;
    const bool to_imem = (cmd & reg::kDmaImem) != 0;
    std::vector<std::byte>& dst = to_imem ? imem_ : dmem_;
    if (src + 256 > vram.size() || uint64_t{trfmoffs_} + 256 > dst.size()) {
        violation(fmt::format("falcon DMA out of range: FB {:#x}, {} offset {:#x}", src, to_imem ? "IMEM" : "DMEM", trfmoffs_),
                  where, kFalconSrc);
        return;
    }
    std::memcpy(dst.data() + trfmoffs_, vram.data() + src, 256);
    if (to_imem) {
        if (imem_tags_.size() <= trfmoffs_ / 256) imem_tags_.resize(trfmoffs_ / 256 + 1);
        imem_tags_[trfmoffs_ / 256] = trffboffs_;
    }
    size_t& loaded = to_imem ? imem_loaded_ : dmem_loaded_;
    loaded = std::max<size_t>(loaded, trfmoffs_ + 256);
}

}  // namespace baregpu::sim::nvgpu
