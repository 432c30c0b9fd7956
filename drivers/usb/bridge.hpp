// Bridge: what the usb PciDevice backend needs from an ASM24xx bridge, whichever firmware runs on
// it — controller memory (XDATA), the PCIe link, configuration and memory TLPs, and the SRAM the
// GPU DMAs into. Asm24Controller speaks tinygrad's custom firmware (vendor requests);
// Asm24ScsiController the stock firmware's SCSI commands over UAS or BOT. open_bridge picks one
// from the descriptors. Not thread-safe (the PciDevice above serialises).
#pragma once

#include "drivers/usb/detect.hpp"
#include "drivers/usb/tlp.hpp"
#include "drivers/usb/usb_backend.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace baregpu::usb {

// USB transfers issued, for "transfers per MMIO write / per KiB copied".
struct TransferCounters {
    uint64_t control = 0;
    uint64_t bulk_out = 0;
    uint64_t bulk_in = 0;
    uint64_t bytes_out = 0;  // bulk payload
    uint64_t bytes_in = 0;
    uint64_t tlp_retries = 0;  // transport errors and CRS retried
    uint64_t scsi_commands = 0;  // SCSI commands (stock firmware)
    uint64_t recoveries = 0;  // BOT reset recoveries, UAS task management after a timeout or a stall
    uint64_t total() const { return control + bulk_out + bulk_in; }
};

// How the SRAM behind the bridge is reached from the host.
struct SramAccess {
    uint64_t write_alignment = 0;  // an SRAM write starts on a multiple of this (bytes)
    bool readable = false;  // the host can read it back (the custom firmware's 0xF2 read, released by a device write to 0x822000)
    // Bytes from the SRAM's start the host reads through XDATA 0xF000 (sram_xdata_read): the chip
    // maps the first 4 KB there (asm2464pd-firmware app/README.md, pcie/test_sram_verify.py).
    uint64_t xdata_alias = 0;
};

class Bridge {
public:
    explicit Bridge(std::unique_ptr<UsbBackend> usb) : usb_(std::move(usb)) {}
    virtual ~Bridge() = default;
    Bridge(const Bridge&) = delete;
    Bridge& operator=(const Bridge&) = delete;

    const std::string& name() const { return usb_->name(); }
    UsbBackend& usb() { return *usb_; }
    const TransferCounters& counters() const { return counters_; }
    // "custom firmware (vendor requests)", "stock firmware, SCSI over UAS (31 streams)"
    virtual std::string firmware() const = 0;

    // Controller memory.
    virtual void xdata_read(uint16_t address, std::span<std::byte> out) = 0;
    virtual void xdata_write(uint16_t address, std::span<const std::byte> data) = 0;
    uint8_t xdata_read8(uint16_t address);

    // Brings the PCIe link to L0 (or finds it there); DeviceLostError with the LTSSM state when not.
    virtual void bring_link_up() = 0;

    // One TLP. Posted requests return 0; non-posted ones their completion data, after bounded
    // retries of transport errors and CRS; UR / CA / reserved status is a ProtocolError naming the
    // request and the status.
    virtual uint32_t single_tlp(const tlp::Request& request) = 0;
    // Configuration requests (type 0 on bus 0, type 1 beyond). size 1, 2 or 4, naturally aligned.
    uint32_t config_read(uint8_t bus, uint8_t device, uint8_t function, uint16_t reg, unsigned size);
    void config_write(uint8_t bus, uint8_t device, uint8_t function, uint16_t reg, unsigned size, uint32_t value);

    // Memory reads and writes of whole dwords at a dword-aligned address.
    virtual void mem_write(uint64_t address, std::span<const std::byte> data) = 0;
    virtual void mem_read(uint64_t address, std::span<std::byte> out) = 0;

    // The SRAM the GPU sees at PCIe 0x200000. offset: bytes from its start, a multiple of
    // sram_access().write_alignment; the pad after `data` to the next 512-byte sector is zeroed.
    virtual SramAccess sram_access() const = 0;
    virtual void sram_write(uint64_t offset, std::span<const std::byte> data) = 0;
    // Submits without waiting where the firmware allows (0: it was written synchronously).
    // `wire`: whole 512-byte sectors that outlive the reap.
    virtual UsbBackend::Tag sram_write_async(uint64_t offset, std::span<std::byte> wire) = 0;
    virtual void reap(UsbBackend::Tag tag) = 0;
    // Reads (only where sram_access().readable): arm, make the device write PCIe 0x822000, read.
    virtual void sram_read_arm(uint64_t offset, uint64_t bytes) = 0;
    virtual void sram_read_data(std::span<std::byte> out) = 0;

protected:
    std::unique_ptr<UsbBackend> usb_;
    TransferCounters counters_;
};

// Detects the bridge's firmware from its descriptors and opens the matching protocol: the custom
// firmware's vendor requests, or the stock firmware's SCSI commands over UAS (USB 3 streams) or
// BOT (a USB 2 link, or a bridge that offers only BOT). ProtocolError for a device that is no
// ASM24xx bridge this driver knows.
std::unique_ptr<Bridge> open_bridge(std::unique_ptr<UsbBackend> usb);

}  // namespace baregpu::usb
