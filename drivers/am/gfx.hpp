// The GC's compute side once the RLC autoload has booted it (Linux gfx_v11_0_hw_init /
// gfx_v12_0_hw_init for PSP-loaded firmware, tinygrad AM_GFX.init_hw): the MEC's start address and
// a pipe reset so it takes effect, the shader memory config of VMID 0, the CP doorbell route in
// NBIO/NBIF, the MEC's doorbell window, and the MEC un-halted. Everything a compute queue needs
// before its HQD can be activated; the queues themselves are compute_queue's.
#pragma once

#include "drivers/am/registers.hpp"
#include "drivers/am/skip_step.hpp"

#include <cstdint>

namespace baregpu::am {

class Soc;

class Gfx {
public:
    Gfx(Registers& regs, Soc& soc, unsigned gc_generation) : regs_(regs), soc_(soc), gc_generation_(gc_generation) {}
    // mec_ucode_start: the MEC firmware header's ucode_start_addr (hi << 32 | lo, a byte address).
    void init_hw(uint64_t mec_ucode_start, SkipStep skip = SkipStep::none);

    // gfx_v11_0.c DEFAULT_SH_MEM_CONFIG: ADDRESS_MODE_64 (0), ALIGNMENT_MODE_UNALIGNED (3, soc21_enum.h
    // SH_MEM_ALIGNMENT_MODE_UNALIGNED), INITIAL_INST_PREFETCH 3. gfx_v12_0.c uses the same value.
    static constexpr uint32_t kShMemConfig = 3u << field::kShMemAlignmentModeShift | 3u << field::kShMemInitialInstPrefetchShift;
    // SH_MEM_BASES as Linux programs it for the VMIDs user code runs in (gfx_v11_0_constants_init,
    // i != 0): PRIVATE_BASE = private_aperture_start >> 48, SHARED_BASE = shared_aperture_start >> 48
    // with gmc_v11_0.c's apertures 0x1000'0000'0000'0000 and 0x2000'0000'0000'0000. drivers/am runs
    // user kernels in VMID 0, so VMID 0 gets them: flat LDS/scratch apertures far from our VAs.
    static constexpr uint32_t kShMemBases = 0x1000u | 0x2000u << 16;
    // gfx_v11_0_cp_set_doorbell_range: LOWER = (kiq * 2) << 2, UPPER = (userqueue_end * 2) << 2 with
    // amdgpu_doorbell.h AMDGPU_NAVI10_DOORBELL_KIQ 0x000 and _USERQUEUE_END 0x08A (byte offsets).
    static constexpr uint32_t kMecDoorbellLower = (0x000 * 2) << 2, kMecDoorbellUpper = (0x08A * 2) << 2;

private:
    void config_mec(uint64_t mec_ucode_start, SkipStep skip);
    Registers& regs_;
    Soc& soc_;
    unsigned gc_generation_;
};

}  // namespace baregpu::am
