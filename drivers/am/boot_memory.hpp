// Where every boot-time object lives in VRAM. The same addresses in every process, in a fixed
// order inside the first 32 MiB (tinygrad amdev.py AMDev, memory.py MemoryManager), so a later process can take over a chip a
// previous one initialised (warm start) without re-creating the PSP ring, IH ring or SMU table.
// Any change to this layout must change kLayoutMagic, which warm start compares with SCRATCH_REG7.
#pragma once

#include "drivers/am/asic.hpp"

#include <cstdint>
#include <vector>

namespace baregpu::am {

// SCRATCH_REG7 value meaning "initialised by drivers/am with this layout". tinygrad's is
// 0xA0000008; ours differs so the two never mistake each other's layouts.
inline constexpr uint32_t kLayoutMagic = 0xBA5E0003;  // 2: + driver state (pinned clocks); 3: + the gfx stage (a chip booted without it must boot again)

inline constexpr uint64_t kBootMemorySize = 32 << 20;
inline constexpr uint64_t kPsp1MiB = 1 << 20;            // amdgpu_psp.h PSP_1_MEG
inline constexpr uint64_t kPspCmdBufferSize = 0x1000;     // PSP_CMD_BUFFER_SIZE
inline constexpr uint64_t kPspFenceBufferSize = 0x1000;   // PSP_FENCE_BUFFER_SIZE
inline constexpr uint64_t kPspRingSize = 0x10000;         // psp_v13_0_ring_create: 64 KiB
inline constexpr uint64_t kPspTmrMax = 0x1300000;         // tinygrad's bound on resp.tmr_size
inline constexpr uint64_t kIhRingSize = 256 << 10;
inline constexpr uint64_t kSmuDriverTableSize = 16 << 10;
// Page tables beyond the root come from here (after boot memory).
inline constexpr uint64_t kPageTablePoolStart = 32 << 20;
inline constexpr uint64_t kPageTablePoolSize = 16 << 20;

struct BootAllocation {
    const char* name;
    uint64_t offset;  // FB-relative VRAM address
    uint64_t size;
};

struct BootLayout {
    uint64_t root_pt, gmc_scratch, gmc_dummy, ih_ring, ih_wptr, psp_msg1, psp_cmd, psp_fence, psp_ring, psp_tmr,
        smu_table, driver_state;
    bool has_tmr = false;
    std::vector<BootAllocation> allocations;  // in allocation order, for tests and `amctl info`
};

// Pure: the same input gives the same layout. Throws if it does not fit in boot memory.
BootLayout make_boot_layout(const AsicInfo& asic);

}  // namespace baregpu::am
