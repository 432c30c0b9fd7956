// Where the GPU writes to start a bridge SRAM read (the ASM2464 custom firmware: a device write near
// 0x822000, pci::LinkCapabilities::Window::read_trigger, releases the SRAM to the host's bulk IN).
// Both SRAM paths (sram_copy: tinygrad's sentinel pipeline; sram_staging: HCQ copy_out) write the
// same place: 12 bytes past the trigger, as tinygrad ops_amd.py AMDAllocator._copyout writes
// `cq_buf + 12`.
#pragma once

#include <cstdint>

namespace baregpu::am {

inline constexpr uint64_t kBridgeTriggerOffset = 12;

}  // namespace baregpu::am
