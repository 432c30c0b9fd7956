#include "drivers/sim/edu.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

namespace baregpu::sim {

namespace {
constexpr const char* kSpec = "QEMU docs/specs/edu.rst";
}

EduDevice::EduDevice(Options options) : options_(options) {
    if (options_.function_level_reset && !options_.pci_express) {
        throw Error("edu model", "function-level reset needs the PCI Express option");
    }
}

pci::sim::DeviceSpec EduDevice::spec() const {
    pci::sim::DeviceSpec spec;
    spec.identity.vendor_id = edu::kVendorId;
    spec.identity.device_id = edu::kDeviceId;
    spec.identity.subsystem_vendor_id = 0x1af4;  // what QEMU puts there (Red Hat)
    spec.identity.subsystem_id = 0x1100;
    spec.identity.revision = 0x10;
    spec.identity.class_code = 0x00ff00;  // "unclassified device", as QEMU's edu
    spec.bars.push_back({0, edu::kBar0Size, false, false, pci::sim::BarSpec::Kind::Registers});
    if (options_.memory_bar_bytes != 0) {
        spec.bars.push_back({2, options_.memory_bar_bytes, true, true, pci::sim::BarSpec::Kind::Memory});
    }
    spec.msi_vectors = 1;
    if (options_.msix_vectors != 0) {
        spec.msix = {options_.msix_vectors, 0, edu::kMsixTableOffset, 0, edu::kMsixPbaOffset};
    }
    spec.pci_express = options_.pci_express;
    spec.function_level_reset = options_.function_level_reset;
    return spec;
}

bool EduDevice::width_allowed(uint64_t offset, unsigned width, const char* access) {
    // "Only size == 4 accesses are allowed for addresses < 0x80. size == 4 or size == 8 for the rest."
    bool ok = offset < 0x80 ? width == 4 : (width == 4 || width == 8);
    if (!ok) {
        port().violation(fmt::format("{}-byte {}", width, access), fmt::format("BAR0+0x{:x}", offset), kSpec);
    }
    return ok;
}

uint64_t EduDevice::mmio_read(unsigned bar, uint64_t offset, unsigned width) {
    uint64_t all_ones = width == 8 ? ~uint64_t{0} : ((uint64_t{1} << (8 * width)) - 1);
    if (bar != 0 || !width_allowed(offset, width, "read")) return all_ones;
    std::lock_guard lock(mutex_);
    switch (offset) {
        case edu::kRegId: return edu::kIdValue;
        case edu::kRegLiveness: return ~liveness_;
        case edu::kRegFactorial: return factorial_;
        case edu::kRegStatus: return status_;
        case edu::kRegInterruptStatus: return irq_status_;
        case edu::kRegDmaSource: return width == 8 ? dma_source_ : static_cast<uint32_t>(dma_source_);
        case edu::kRegDmaSource + 4: return static_cast<uint32_t>(dma_source_ >> 32);
        case edu::kRegDmaDestination: return width == 8 ? dma_destination_ : static_cast<uint32_t>(dma_destination_);
        case edu::kRegDmaDestination + 4: return static_cast<uint32_t>(dma_destination_ >> 32);
        case edu::kRegDmaCount: return width == 8 ? dma_count_ : static_cast<uint32_t>(dma_count_);
        case edu::kRegDmaCommand: return width == 8 ? dma_command_ : static_cast<uint32_t>(dma_command_);
        default: return all_ones;  // QEMU's edu answers ~0 outside its registers
    }
}

void EduDevice::mmio_write(unsigned bar, uint64_t offset, unsigned width, uint64_t value) {
    if (bar != 0 || !width_allowed(offset, width, "write")) return;
    auto set_low_or_all = [&](uint64_t& reg) {
        reg = width == 8 ? value : ((reg & 0xffffffff00000000ull) | static_cast<uint32_t>(value));
    };
    auto set_high = [&](uint64_t& reg) { reg = (reg & 0xffffffffull) | (value << 32); };
    std::unique_lock lock(mutex_);
    switch (offset) {
        case edu::kRegLiveness: liveness_ = static_cast<uint32_t>(value); return;
        case edu::kRegFactorial: {
            if (status_ & edu::kStatusComputing) return;  // ignored while busy
            uint32_t n = static_cast<uint32_t>(value);
            uint32_t result = 1;
            for (uint32_t i = 2; i <= n; ++i) result *= i;  // wraps like the C original's u32
            factorial_ = result;
            if (status_ & edu::kStatusIrqOnFactorial) {
                lock.unlock();
                raise(edu::kIrqFactorial, 0);
            }
            return;
        }
        case edu::kRegStatus:
            // Only the interrupt-enable bit is writable; "computing" is read-only.
            status_ = (status_ & ~edu::kStatusIrqOnFactorial) | (static_cast<uint32_t>(value) & edu::kStatusIrqOnFactorial);
            return;
        case edu::kRegInterruptRaise:
            lock.unlock();
            raise(static_cast<uint32_t>(value), 0);
            return;
        case edu::kRegInterruptAck: irq_status_ &= ~static_cast<uint32_t>(value); return;
        case edu::kRegDmaSource: set_low_or_all(dma_source_); return;
        case edu::kRegDmaSource + 4: set_high(dma_source_); return;
        case edu::kRegDmaDestination: set_low_or_all(dma_destination_); return;
        case edu::kRegDmaDestination + 4: set_high(dma_destination_); return;
        case edu::kRegDmaCount: set_low_or_all(dma_count_); return;
        case edu::kRegDmaCommand:
            if (dma_command_ & edu::kDmaStart) return;  // a transfer is in flight
            set_low_or_all(dma_command_);
            if (dma_command_ & edu::kDmaStart) {
                lock.unlock();
                run_dma();
            }
            return;
        default:
            port().violation(fmt::format("write of 0x{:x} to an unimplemented register", value),
                             fmt::format("BAR0+0x{:x}", offset), kSpec);
            return;
    }
}

uint64_t EduDevice::clamp_dma_address(uint64_t address, const char* which) {
    uint64_t mask = options_.dma_bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << options_.dma_bits) - 1;
    if ((address & mask) != address) {
        // QEMU's edu clamps and logs a guest error; so do we, and record it.
        port().violation(fmt::format("DMA {} address 0x{:x} is wider than the {}-bit DMA mask; clamped to 0x{:x}",
                                     which, address, options_.dma_bits, address & mask),
                         "DMA registers", kSpec);
    }
    return address & mask;
}

void EduDevice::run_dma() {
    uint64_t source, destination, count, command;
    {
        std::lock_guard lock(mutex_);
        source = dma_source_;
        destination = dma_destination_;
        count = dma_count_;
        command = dma_command_;
    }
    bool to_ram = (command & edu::kDmaToRam) != 0;
    uint64_t buffer_side = to_ram ? source : destination;
    uint64_t ram_side = clamp_dma_address(to_ram ? destination : source, to_ram ? "destination" : "source");
    bool in_range = buffer_side >= edu::kBufferAddress && count <= edu::kBufferSize &&
                    buffer_side - edu::kBufferAddress <= edu::kBufferSize - count;
    if (!in_range) {
        // QEMU's edu aborts the whole VM here (hw_error); we refuse the command instead.
        port().violation(fmt::format("DMA of {} bytes at edu address 0x{:x} leaves the 4 KiB buffer at 0x40000", count,
                                     buffer_side),
                         "BAR0+0x98 (DMA command)", kSpec);
    } else {
        size_t at = buffer_side - edu::kBufferAddress;
        std::span<std::byte> window(buffer_.data() + at, count);
        std::array<std::byte, edu::kBufferSize> staging{};
        if (to_ram) {
            {
                std::lock_guard lock(mutex_);
                std::copy(window.begin(), window.end(), staging.begin());
            }
            port().dma_write(BusAddress(ram_side), std::span<const std::byte>(staging.data(), count));
        } else if (port().dma_read(BusAddress(ram_side), std::span<std::byte>(staging.data(), count))) {
            std::lock_guard lock(mutex_);
            std::copy(staging.begin(), staging.begin() + static_cast<ptrdiff_t>(count), window.begin());
        }
    }
    {
        std::lock_guard lock(mutex_);
        dma_command_ &= ~uint64_t{edu::kDmaStart};
    }
    if (command & edu::kDmaIrqOnDone) raise(edu::kIrqDma, dma_vector());
}

void EduDevice::raise(uint32_t cause, unsigned vector) {
    {
        std::lock_guard lock(mutex_);
        irq_status_ |= cause;
    }
    port().raise_interrupt(vector);
}

void EduDevice::function_reset() {
    std::lock_guard lock(mutex_);
    liveness_ = factorial_ = status_ = irq_status_ = 0;
    dma_source_ = dma_destination_ = dma_count_ = dma_command_ = 0;
    buffer_.fill(std::byte{0});
}

std::array<std::byte, edu::kBufferSize> EduDevice::buffer() const {
    std::lock_guard lock(mutex_);
    return buffer_;
}

}  // namespace baregpu::sim
