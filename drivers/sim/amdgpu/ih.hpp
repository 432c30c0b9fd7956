// OSSSYS, the interrupt handler: ring 0 only. The driver programs IH_RB_BASE/_HI (MC >> 8),
// IH_RB_CNTL (RB_SIZE = log2(ring bytes / 4), RB_ENABLE, ENABLE_INTR, WPTR_OVERFLOW_ENABLE) and the
// write-pointer write-back address IH_RB_WPTR_ADDR_LO/HI; IH_RB_WPTR and IH_RB_RPTR carry BYTE
// offsets in bits 2-17 (osssys_6_0_0_sh_mask.h, Linux ih_v6_0.c / ih_v7_0.c). The model writes
// 32-byte entries in the soc15_int.h layout (amdkfd/soc15_int.h, amdgpu_irq.h amdgpu_iv_entry) at
// the ring's MC address in VRAM, advances WPTR, writes it back and raises MSI vector 0. A full
// ring drops the entry and sets RB_OVERFLOW (when enabled) until WPTR_OVERFLOW_CLEAR.
#pragma once

#include "drivers/sim/amdgpu/chip.hpp"

#include <array>

namespace baregpu::sim::amdgpu {

struct IhEntry {
    uint8_t client_id = 0, source_id = 0, ring_id = 0, vmid = 0;
    uint16_t pasid = 0;
    uint8_t node_id = 0;
    std::array<uint32_t, 4> src_data{};
};

class Ih {
public:
    explicit Ih(Chip& chip) : chip_(chip) {}

    bool read(uint32_t address, uint32_t& value);
    bool write(uint32_t address, uint32_t value);
    // Delivers one interrupt; false when it was dropped (ring disabled or full).
    bool push(const IhEntry& entry);

private:
    static bool mc_space_ok(uint32_t cntl);
    uint64_t ring_mc();
    uint32_t ring_bytes();

    Chip& chip_;
};

}  // namespace baregpu::sim::amdgpu
