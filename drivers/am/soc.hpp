// NBIO (Navi31) / NBIF (Navi48): the PCIe side of the chip. Bring-up enables the doorbell aperture
// (BAR2) and points the HDP flush remap at a fixed BAR5 hole so the CPU can flush the HDP by one
// write (nbio_v4_3.c / nbif_v6_3_1.c remap_hdp_registers, amdgpu_device.c MMIO_REG_HOLE_OFFSET).
#pragma once

#include "drivers/am/registers.hpp"

namespace baregpu::am {

// amdgpu.h: MMIO_REG_HOLE_OFFSET = 0x80000 - PAGE_SIZE; KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL = 0.
inline constexpr uint32_t kMmioRegHoleOffset = 0x80000 - 0x1000;

class Soc {
public:
    explicit Soc(Registers& regs) : regs_(regs) {}
    void init_hw();
    // HDP flush: write to the byte offset BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL holds.
    void flush_hdp();
    // The doorbell routes (nbio_v4_3.c / nbif_v6_3_1.c): gc_doorbell_init sends doorbells to the CP
    // (entries 0 and 3), sdma_doorbell_range the SDMA engines' window (entry 2).
    void gc_doorbell_init();
    void sdma_doorbell_range(uint32_t first_dword, uint32_t dwords);

private:
    Registers& regs_;
    uint32_t flush_offset_ = 0;
};

}  // namespace baregpu::am
