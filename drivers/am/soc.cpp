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

void Soc::gc_doorbell_init() {
    // nbio_v4_3_gc_doorbell_init and nbif_v6_3_1_gc_doorbell_init write these two constants:
    // ENABLE, AWID 3 / 6, AWADDR_31_28_VALUE 3, no range (field::s2a_entry gives the same words).
    static_assert(field::s2a_entry(0x3, 0, 0, 0x3) == 0x30000007 && field::s2a_entry(0x6, 0, 0, 0x3) == 0x3000000d);
    const RegisterTable& t = regs_.table();
    regs_.write(t.s2a_doorbell_entry0_ctrl, 0x30000007);
    regs_.write(t.s2a_doorbell_entry3_ctrl, 0x3000000d);
}

void Soc::sdma_doorbell_range(uint32_t first_dword, uint32_t dwords) {
    // nbio_v4_3_sdma_doorbell_range / nbif_v6_3_1_sdma_doorbell_range (instance 0), read-modify-write:
    // ENABLE, AWID 0xe, RANGE_OFFSET = the ring's doorbell index (dwords), RANGE_SIZE, AWADDR 3.
    const RegisterTable& t = regs_.table();
    const uint32_t set = field::s2a_entry(0x1f, 0x3ff, 0xff, 0xf);  // the fields written; the others are kept
    const uint32_t old = regs_.read(t.s2a_doorbell_entry2_ctrl);
    regs_.write(t.s2a_doorbell_entry2_ctrl, (old & ~set) | field::s2a_entry(0xe, first_dword, dwords, 0x3));
}

void Soc::flush_hdp() {
    if (flush_offset_ == 0) flush_offset_ = regs_.read(regs_.table().remap_hdp_mem_flush_cntl);
    if (flush_offset_ == 0) return;  // not remapped yet (before init_hw on a cold chip): nothing cached to flush
    regs_.mmio().write(flush_offset_ / 4, 0);
}

}  // namespace baregpu::am
