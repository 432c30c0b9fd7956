#include "drivers/pci/dma_buffer.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

namespace baregpu::pci {

DmaBuffer::DmaBuffer(std::string owner, std::span<std::byte> cpu, PageSize page_size, std::vector<BusAddress> pages,
                     std::function<void()> release)
    : owner_(std::move(owner)), cpu_(cpu), page_size_(page_size), pages_(std::move(pages)),
      release_(std::move(release)) {
    if (pages_.empty()) throw Error(owner_, "a DMA buffer needs at least one bus address");
}

DmaBuffer::~DmaBuffer() {
    if (release_) release_();
}

BusAddress DmaBuffer::bus_address(uint64_t offset) const {
    if (offset >= cpu_.size()) {
        throw Error(owner_, fmt::format("offset 0x{:x} is outside the 0x{:x}-byte DMA buffer", offset, cpu_.size()));
    }
    if (contiguous()) return pages_[0] + offset;
    return pages_[offset / page_bytes()] + offset % page_bytes();
}

}  // namespace baregpu::pci
