// Strong types for the kinds of address a driver juggles. A bus address is never a CPU
// pointer, a BAR offset is never a GPU virtual address; mixing them is a compile error.
// CPU memory is always std::byte* / std::span<std::byte>, which no integer converts to.
#pragma once

#include <compare>
#include <cstdint>
#include <string>

namespace baregpu {

template <typename Tag>
class Address {
public:
    constexpr Address() = default;
    constexpr explicit Address(uint64_t value) : value_(value) {}

    constexpr uint64_t value() const { return value_; }

    constexpr Address operator+(uint64_t offset) const { return Address(value_ + offset); }
    constexpr Address& operator+=(uint64_t offset) {
        value_ += offset;
        return *this;
    }
    // Distance between two addresses of the same kind, in bytes.
    constexpr uint64_t operator-(Address other) const { return value_ - other.value_; }

    constexpr bool is_aligned(uint64_t alignment) const { return alignment != 0 && value_ % alignment == 0; }

    constexpr auto operator<=>(const Address&) const = default;

    std::string hex() const {
        static constexpr char digits[] = "0123456789abcdef";
        std::string out = "0x";
        bool started = false;
        for (int shift = 60; shift >= 0; shift -= 4) {
            unsigned nibble = static_cast<unsigned>(value_ >> shift) & 0xfu;
            if (nibble != 0 || started || shift == 0) {
                out += digits[nibble];
                started = true;
            }
        }
        return out;
    }

private:
    uint64_t value_ = 0;
};

// An address as a device sees host memory on the bus: an IOVA behind an IOMMU, the
// physical address without one.
using BusAddress = Address<struct BusAddressTag>;

// A byte offset inside one BAR (one MMIO region).
using BarOffset = Address<struct BarOffsetTag>;

// An address in a GPU's own virtual address space.
using GpuVirtualAddress = Address<struct GpuVirtualAddressTag>;

}  // namespace baregpu
