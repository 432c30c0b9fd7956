// CPU data-cache maintenance for memory the GPU will read through KGSL user-memory imports.
// On arm64 the GPU is not coherent with the CPU's caches for such pages: dirty lines are cleaned
// to the point of coherency first (DC CVAC per line, then DSB SY; Arm ARM, "Data cache
// maintenance instructions"), the step tinygrad's from_blob performs with a small CPU kernel.
// On x86-64 (the simulator's host) caches are coherent with device access: a full fence suffices.
#pragma once

#include <cstdint>

namespace baregpu::qcom {

// Clean [address, address + bytes) from the data cache (line by line; CTR_EL0 gives the line size).
void clean_dcache(const void* address, uint64_t bytes) noexcept;

}  // namespace baregpu::qcom
