// A mapped BAR (or any MMIO window): typed volatile accessors with bounds and alignment checks.
//
// A region is either a direct CPU mapping of the BAR (vfio, sysfs: loads and stores go straight
// to the device) or backed by an MmioHandler that turns each access into a transaction (the
// simulated bus, the USB bridge). Callers cannot tell which, except by speed.
#pragma once

#include "base/address.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace baregpu::pci {

// Carries accesses to a region that is not directly mapped. Offsets are checked by MmioRegion
// before they arrive here; width is 1, 2, 4 or 8 and the offset is aligned to it.
class MmioHandler {
public:
    virtual ~MmioHandler() = default;
    virtual uint64_t mmio_read(uint64_t offset, unsigned width) = 0;
    virtual void mmio_write(uint64_t offset, unsigned width, uint64_t value) = 0;
    // Bulk copies (firmware into VRAM, page tables). The default splits into 4-byte accesses
    // after aligning; handlers that can move blocks faster override these.
    virtual void mmio_read_block(uint64_t offset, std::span<std::byte> out);
    virtual void mmio_write_block(uint64_t offset, std::span<const std::byte> data);
};

class MmioRegion {
public:
    MmioRegion() = default;
    // A direct mapping: `base` points at `size` bytes of device memory. Not owned.
    MmioRegion(std::string name, volatile std::byte* base, uint64_t size);
    // Accesses go to `handler` (not owned; it outlives the region).
    MmioRegion(std::string name, MmioHandler* handler, uint64_t size);

    // "0000:03:00.0 BAR5"
    const std::string& name() const { return name_; }
    uint64_t size() const { return size_; }
    bool valid() const { return size_ != 0; }
    // The CPU mapping for code that must hand the BAR to memcpy-like routines; nullptr when the
    // region is handler-backed.
    volatile std::byte* direct() const { return base_; }

    uint8_t read8(BarOffset offset) const { return static_cast<uint8_t>(read(offset, 1)); }
    uint16_t read16(BarOffset offset) const { return static_cast<uint16_t>(read(offset, 2)); }
    uint32_t read32(BarOffset offset) const { return static_cast<uint32_t>(read(offset, 4)); }
    uint64_t read64(BarOffset offset) const { return read(offset, 8); }
    void write8(BarOffset offset, uint8_t v) const { write(offset, 1, v); }
    void write16(BarOffset offset, uint16_t v) const { write(offset, 2, v); }
    void write32(BarOffset offset, uint32_t v) const { write(offset, 4, v); }
    void write64(BarOffset offset, uint64_t v) const { write(offset, 8, v); }

    void read_block(BarOffset offset, std::span<std::byte> out) const;
    void write_block(BarOffset offset, std::span<const std::byte> data) const;

private:
    uint64_t read(BarOffset offset, unsigned width) const {
        check(offset.value(), width);
        if (base_ != nullptr) [[likely]] {
            volatile std::byte* p = base_ + offset.value();
            switch (width) {
                case 1: return *reinterpret_cast<volatile uint8_t*>(p);
                case 2: return *reinterpret_cast<volatile uint16_t*>(p);
                case 4: return *reinterpret_cast<volatile uint32_t*>(p);
                default: return *reinterpret_cast<volatile uint64_t*>(p);
            }
        }
        return handler_->mmio_read(offset.value(), width);
    }

    void write(BarOffset offset, unsigned width, uint64_t value) const {
        check(offset.value(), width);
        if (base_ != nullptr) [[likely]] {
            volatile std::byte* p = base_ + offset.value();
            switch (width) {
                case 1: *reinterpret_cast<volatile uint8_t*>(p) = static_cast<uint8_t>(value); return;
                case 2: *reinterpret_cast<volatile uint16_t*>(p) = static_cast<uint16_t>(value); return;
                case 4: *reinterpret_cast<volatile uint32_t*>(p) = static_cast<uint32_t>(value); return;
                default: *reinterpret_cast<volatile uint64_t*>(p) = value; return;
            }
        }
        handler_->mmio_write(offset.value(), width, value);
    }

    void check(uint64_t offset, unsigned width) const {
        if (offset >= size_ || size_ - offset < width || offset % width != 0) [[unlikely]] {
            out_of_bounds(offset, width);
        }
    }
    [[noreturn]] void out_of_bounds(uint64_t offset, uint64_t width) const;

    std::string name_;
    volatile std::byte* base_ = nullptr;
    MmioHandler* handler_ = nullptr;
    uint64_t size_ = 0;
};

}  // namespace baregpu::pci
