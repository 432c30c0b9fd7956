// A model of QEMU's `edu` educational PCI device (QEMU docs/specs/edu.rst): an ID register, a
// liveness register, a factorial unit, an interrupt controller and a DMA engine with a 4 KiB
// internal buffer. Modelling the real register map means the code that drives this model also
// drives QEMU's own edu under a real kernel (tests/qemu).
//
// Options add what edu lacks but the bus must be tested with: a PCI Express capability with
// function-level reset, MSI-X, and a memory BAR.
#pragma once

#include "drivers/pci/sim_device_model.hpp"

#include <array>
#include <cstdint>
#include <mutex>

namespace baregpu::sim {

// Register map (docs/specs/edu.rst, "MMIO area spec").
namespace edu {
inline constexpr uint16_t kVendorId = 0x1234;  // PCI_VENDOR_ID_QEMU
inline constexpr uint16_t kDeviceId = 0x11e8;
inline constexpr uint64_t kBar0Size = 1u << 20;
inline constexpr uint64_t kRegId = 0x00;  // RO: 0xRRrr00ed
inline constexpr uint64_t kRegLiveness = 0x04;  // reads back the bitwise inverse
inline constexpr uint64_t kRegFactorial = 0x08;
inline constexpr uint64_t kRegStatus = 0x20;
inline constexpr uint64_t kRegInterruptStatus = 0x24;
inline constexpr uint64_t kRegInterruptRaise = 0x60;
inline constexpr uint64_t kRegInterruptAck = 0x64;
inline constexpr uint64_t kRegDmaSource = 0x80;
inline constexpr uint64_t kRegDmaDestination = 0x88;
inline constexpr uint64_t kRegDmaCount = 0x90;
inline constexpr uint64_t kRegDmaCommand = 0x98;

inline constexpr uint32_t kIdValue = 0x010000ed;  // version 1.0
inline constexpr uint32_t kStatusComputing = 0x01;
inline constexpr uint32_t kStatusIrqOnFactorial = 0x80;
inline constexpr uint32_t kDmaStart = 0x01;
inline constexpr uint32_t kDmaToRam = 0x02;  // direction: 0 RAM -> edu, 1 edu -> RAM
inline constexpr uint32_t kDmaIrqOnDone = 0x04;
inline constexpr uint32_t kIrqFactorial = 0x001;
inline constexpr uint32_t kIrqDma = 0x100;
inline constexpr uint64_t kBufferAddress = 0x40000;  // the device's internal buffer, as a DMA address
inline constexpr uint64_t kBufferSize = 4096;
inline constexpr unsigned kDefaultDmaBits = 28;  // edu's default dma_mask

// Where the MSI-X table and PBA sit in BAR0 when the option is on (past every register).
inline constexpr uint32_t kMsixTableOffset = 0x80000;
inline constexpr uint32_t kMsixPbaOffset = 0x81000;
}  // namespace edu

class EduDevice final : public pci::sim::SimDeviceModel {
public:
    struct Options {
        bool pci_express = false;  // a PCIe capability (and 4 KiB config space)
        bool function_level_reset = false;  // needs pci_express
        unsigned msix_vectors = 0;  // 0: MSI only, like QEMU's edu
        uint64_t memory_bar_bytes = 0;  // >0: BAR2, a 64-bit prefetchable memory BAR
        unsigned dma_bits = edu::kDefaultDmaBits;
    };

    EduDevice() : EduDevice(Options{}) {}
    explicit EduDevice(Options options);

    pci::sim::DeviceSpec spec() const override;
    uint64_t mmio_read(unsigned bar, uint64_t offset, unsigned width) override;
    void mmio_write(unsigned bar, uint64_t offset, unsigned width, uint64_t value) override;
    void function_reset() override;

    // The internal buffer, for tests that check what DMA brought in.
    std::array<std::byte, edu::kBufferSize> buffer() const;

    // The vector a DMA completion raises (1 with two or more MSI-X vectors, else 0).
    unsigned dma_vector() const { return options_.msix_vectors > 1 ? 1 : 0; }

private:
    void raise(uint32_t cause, unsigned vector);
    void run_dma();
    uint64_t clamp_dma_address(uint64_t address, const char* which);
    bool width_allowed(uint64_t offset, unsigned width, const char* access);

    Options options_;
    mutable std::mutex mutex_;
    uint32_t liveness_ = 0;
    uint32_t factorial_ = 0;
    uint32_t status_ = 0;
    uint32_t irq_status_ = 0;
    uint64_t dma_source_ = 0;
    uint64_t dma_destination_ = 0;
    uint64_t dma_count_ = 0;
    uint64_t dma_command_ = 0;
    std::array<std::byte, edu::kBufferSize> buffer_{};
};

}  // namespace baregpu::sim
