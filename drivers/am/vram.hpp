// CPU access to VRAM: through BAR0 when it covers VRAM (large BAR), else through the
// MM_INDEX / MM_DATA / MM_INDEX_HI window, the only fixed register addresses besides
// RCC_CONFIG_MEMSIZE (tinygrad amdev.py AMDev._run_discovery; amdgpu_device_mm_access in amdgpu_device.c).
#pragma once

#include "drivers/am/registers.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace baregpu::am {

inline constexpr uint32_t kMmIndex = 0x0;    // mmMM_INDEX
inline constexpr uint32_t kMmData = 0x1;     // mmMM_DATA
inline constexpr uint32_t kMmIndexHi = 0x6;  // mmMM_INDEX_HI

class Vram {
public:
    // bar0 may be null or smaller than `size`: the MM_INDEX window is used then.
    Vram(Mmio& mmio, pci::MmioRegion* bar0, uint64_t size);

    uint64_t size() const { return size_; }
    bool large_bar() const { return large_bar_; }

    void read(uint64_t offset, std::span<std::byte> out);
    void write(uint64_t offset, std::span<const std::byte> data);
    void fill_zero(uint64_t offset, uint64_t bytes);
    uint32_t read32(uint64_t offset);
    void write32(uint64_t offset, uint32_t value);
    uint64_t read64(uint64_t offset);
    void write64(uint64_t offset, uint64_t value);

    // Bytes moved through BAR0 (the MM_INDEX path counts as register operations instead).
    uint64_t bytes_read() const { return bytes_read_; }
    uint64_t bytes_written() const { return bytes_written_; }

private:
    void check(uint64_t offset, uint64_t bytes) const;
    Mmio& mmio_;
    pci::MmioRegion* bar0_;
    uint64_t size_;
    bool large_bar_;
    uint64_t bytes_read_ = 0, bytes_written_ = 0;
};

}  // namespace baregpu::am
