// The LibOS "radix3" page list GSP-RM's ELF is handed over behind: three levels of 4 KiB pages of
// 8-byte bus addresses over the image's 4 KiB data pages. Level 0 is one page, level 1 holds
// ceil(level2 / 512) pages, level 2 ceil(data pages / 512): npages[i-1] = ((npages[i] - 1) >> 9) + 1.
// Source: open-gpu-kernel-modules 570.144 src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c
// (kgspCreateRadix3, LIBOS_MEMORY_REGION_RADIX_PAGE_SIZE = 4 KiB).
#pragma once

#include "drivers/pci/dma_buffer.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace baregpu::nv {

inline constexpr uint64_t kRadix3Page = 0x1000;

// Bytes a buffer needs for the radix3 of an image of image_bytes (tables + data pages).
uint64_t radix3_bytes(uint64_t image_bytes);
// Writes tables and image into `buffer` from byte `offset` (page aligned); returns the bus address
// of level 0, what GspFwWprMeta.sysmemAddrOfRadix3Elf takes.
BusAddress write_radix3(const pci::DmaBuffer& buffer, uint64_t offset, std::span<const std::byte> image);

}  // namespace baregpu::nv
