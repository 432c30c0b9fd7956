#include "drivers/am/vram.hpp"

#include "base/error.hpp"
#include "drivers/pci/mmio_region.hpp"
#include "drivers/pci/pci_device.hpp"

#include <cstring>
#include <fmt/format.h>
#include <vector>

namespace baregpu::am {

Vram::Vram(Mmio& mmio, pci::MmioRegion* bar0, uint64_t size)
    : mmio_(mmio), bar0_(bar0), size_(size), large_bar_(bar0 != nullptr && bar0->size() >= size) {}

void Vram::check(uint64_t offset, uint64_t bytes) const {
    if (offset > size_ || bytes > size_ - offset) {
        throw Error(mmio_.device().name(), fmt::format("VRAM access [{:#x}, +{:#x}) outside VRAM ({:#x} bytes)", offset,
                                                       bytes, size_));
    }
}

void Vram::read(uint64_t offset, std::span<std::byte> out) {
    check(offset, out.size());
    if (large_bar_) {
        bar0_->read_block(BarOffset(offset), out);
        bytes_read_ += out.size();
        return;
    }
    if (offset % 4 != 0 || out.size() % 4 != 0) throw Error(mmio_.device().name(), "MM_INDEX access must be dword-aligned");
    for (uint64_t i = 0; i < out.size(); i += 4) {
        uint32_t v = read32(offset + i);
        std::memcpy(out.data() + i, &v, 4);
    }
}

void Vram::write(uint64_t offset, std::span<const std::byte> data) {
    check(offset, data.size());
    if (large_bar_) {
        bar0_->write_block(BarOffset(offset), data);
        bytes_written_ += data.size();
        return;
    }
    if (offset % 4 != 0 || data.size() % 4 != 0) throw Error(mmio_.device().name(), "MM_INDEX access must be dword-aligned");
    for (uint64_t i = 0; i < data.size(); i += 4) {
        uint32_t v;
        std::memcpy(&v, data.data() + i, 4);
        write32(offset + i, v);
    }
}

void Vram::fill_zero(uint64_t offset, uint64_t bytes) {
    std::vector<std::byte> zeros(std::min<uint64_t>(bytes, 1 << 20));
    while (bytes != 0) {
        uint64_t n = std::min<uint64_t>(bytes, zeros.size());
        write(offset, std::span<const std::byte>(zeros.data(), n));
        offset += n;
        bytes -= n;
    }
}

uint32_t Vram::read32(uint64_t offset) {
    check(offset, 4);
    if (large_bar_) {
        bytes_read_ += 4;
        return bar0_->read32(BarOffset(offset));
    }
    // amdgpu_device_mm_access: MM_INDEX = (addr & 0x7fffffff) | 0x80000000, MM_INDEX_HI = addr >> 31.
    mmio_.write(kMmIndexHi, static_cast<uint32_t>(offset >> 31));
    mmio_.write(kMmIndex, static_cast<uint32_t>(offset & 0x7fffffff) | 0x80000000u);
    return mmio_.read(kMmData, "MM_DATA");
}

void Vram::write32(uint64_t offset, uint32_t value) {
    check(offset, 4);
    if (large_bar_) {
        bytes_written_ += 4;
        bar0_->write32(BarOffset(offset), value);
        return;
    }
    mmio_.write(kMmIndexHi, static_cast<uint32_t>(offset >> 31));
    mmio_.write(kMmIndex, static_cast<uint32_t>(offset & 0x7fffffff) | 0x80000000u);
    mmio_.write(kMmData, value);
}

uint64_t Vram::read64(uint64_t offset) { return read32(offset) | (uint64_t{read32(offset + 4)} << 32); }

void Vram::write64(uint64_t offset, uint64_t value) {
    write32(offset, static_cast<uint32_t>(value));
    write32(offset + 4, static_cast<uint32_t>(value >> 32));
}

}  // namespace baregpu::am
