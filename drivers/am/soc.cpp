#include "drivers/am/soc.hpp"

namespace baregpu::am {

void Soc::init_hw() {
    const RegisterTable& t = regs_.table();
    // nbio_v4_3_init_registers (NBIO 4.3.0) and nbif_v6_3_1_init_registers (NBIF 6.3.1) both clear
    // STRAP_NO_SOFT_RESET_DEV0_F2, read-modify-write; the register sits past BAR5 on both.
    uint32_t strap = regs_.read(t.rcc_dev0_epf2_strap2);
    regs_.write(t.rcc_dev0_epf2_strap2, strap & ~field::kStrapNoSoftResetDev0F2);
    regs_.write(t.remap_hdp_mem_flush_cntl, kMmioRegHoleOffset);
    regs_.write(t.doorbell_aper_en, 1);  // RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN.BIF_DOORBELL_APER_EN
    flush_offset_ = kMmioRegHoleOffset;
}

void Soc::flush_hdp() {
    if (flush_offset_ == 0) flush_offset_ = regs_.read(regs_.table().remap_hdp_mem_flush_cntl);
    if (flush_offset_ == 0) return;  // not remapped yet (before init_hw on a cold chip): nothing cached to flush
    regs_.mmio().write(flush_offset_ / 4, 0);
}

}  // namespace baregpu::am
