// SDMA0 queue 0 as a kernel ring, started and stopped the way Linux's sdma_v6_0_gfx_resume_instance /
// sdma_v7_0_gfx_resume_instance and sdma_v6_0_gfx_stop do it, with the engine's own setup on the way
// (the S2A doorbell route, the hang watchdog, UTCL1, the un-halt). The HCQ copy queue (copy_queue) and
// the USB bridge's SRAM copier (sram_copy) both run on it.
#pragma once

#include <cstdint>

namespace baregpu::am {

class AmDevice;

// amdgpu_doorbell.h AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0; GC 12 keeps the Navi10 assignment
// (soc24.c soc24_init_doorbell_index, as soc21.c for GC 11).
inline constexpr uint32_t kDoorbellSdmaEngine0 = 0x100;

// Points the ring at [ring, ring + ring_bytes) with its read pointer written back to `rptr` and its
// write pointer polled at `wptr` (GPU VAs), then enables it. ring_bytes: a power of two.
void sdma0_queue0_start(AmDevice& chip, uint64_t ring, uint64_t ring_bytes, uint64_t rptr, uint64_t wptr);
// RB_ENABLE and IB_ENABLE cleared, the doorbell off; never throws (the device may be gone).
void sdma0_queue0_stop(AmDevice& chip) noexcept;

}  // namespace baregpu::am
