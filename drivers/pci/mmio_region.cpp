#include "drivers/pci/mmio_region.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"
#include "drivers/pci/bar.hpp"

#include <cstring>
#include <fmt/format.h>

namespace baregpu::pci {

void MmioHandler::mmio_read_block(uint64_t offset, std::span<std::byte> out) {
    size_t done = 0;
    while (done < out.size()) {
        uint64_t at = offset + done;
        unsigned width = (at % 4 == 0 && out.size() - done >= 4) ? 4 : 1;
        uint64_t v = mmio_read(at, width);
        std::memcpy(out.data() + done, &v, width);  // little-endian host
        done += width;
    }
}

void MmioHandler::mmio_write_block(uint64_t offset, std::span<const std::byte> data) {
    size_t done = 0;
    while (done < data.size()) {
        uint64_t at = offset + done;
        unsigned width = (at % 4 == 0 && data.size() - done >= 4) ? 4 : 1;
        uint64_t v = 0;
        std::memcpy(&v, data.data() + done, width);
        mmio_write(at, width, v);
        done += width;
    }
}

MmioRegion::MmioRegion(std::string name, volatile std::byte* base, uint64_t size)
    : name_(std::move(name)), base_(base), size_(size) {}

MmioRegion::MmioRegion(std::string name, MmioHandler* handler, uint64_t size)
    : name_(std::move(name)), handler_(handler), size_(size) {}

void MmioRegion::out_of_bounds(uint64_t offset, uint64_t width) const {
    if (size_ == 0) throw Error(name_, "MMIO access through a region that was never mapped");
    if (width != 0 && width <= 8 && offset % width != 0 && offset < size_) {
        throw Error(name_, fmt::format("{}-byte MMIO access at offset 0x{:x} is not {}-byte aligned", width, offset,
                                       width));
    }
    throw Error(name_, fmt::format("{}-byte MMIO access at offset 0x{:x} is outside the {} region (0x{:x} bytes)",
                                   width, offset, format_size(size_), size_));
}

void MmioRegion::read_block(BarOffset offset, std::span<std::byte> out) const {
    if (!range_within(offset.value(), out.size(), size_)) [[unlikely]] {
        out_of_bounds(offset.value(), out.size());
    }
    if (out.empty()) return;
    if (base_ == nullptr) {
        handler_->mmio_read_block(offset.value(), out);
        return;
    }
    // memcpy on device memory may use any access width, which BAR memory (VRAM) tolerates;
    // register BARs are read with read32().
    std::memcpy(out.data(), const_cast<const std::byte*>(base_ + offset.value()), out.size());
}

void MmioRegion::write_block(BarOffset offset, std::span<const std::byte> data) const {
    if (!range_within(offset.value(), data.size(), size_)) [[unlikely]] {
        out_of_bounds(offset.value(), data.size());
    }
    if (data.empty()) return;
    if (base_ == nullptr) {
        handler_->mmio_write_block(offset.value(), data);
        return;
    }
    std::memcpy(const_cast<std::byte*>(base_ + offset.value()), data.data(), data.size());
}

}  // namespace baregpu::pci
