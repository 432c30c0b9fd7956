// Asm24ScsiController: an ASM2464/ASM2463 bridge running ASMedia's stock (or tinygrad-patched)
// firmware, driven with vendor SCSI commands over UAS or BOT (tinygrad usb.py before commit
// d6fddb066f; research nv_qcom_usb.md C.8): XDATA through the 0xE4 / 0xE5 CDBs, PCIe TLPs through
// the XDATA TLP engine at 0xB2xx (one TLP per launch; posted writes pipelined, non-posted ones
// polled), and SRAM writes as WRITE(16) commands of up to 64 KB. The host cannot read the SRAM
// back through this firmware (no 0xF2 read engine): copy-out reads device memory through TLPs.
#pragma once

#include "drivers/usb/asm24_protocol.hpp"
#include "drivers/usb/bridge.hpp"
#include "drivers/usb/scsi_transport.hpp"

#include <array>
#include <memory>
#include <vector>

namespace baregpu::usb {

class Asm24ScsiController final : public Bridge {
public:
    // Claims interface 0 (UAS at alternate setting 1 with USB 3 streams; BOT at 0 when the bridge
    // offers only BOT or the link has no streams) and makes the controller init writes.
    Asm24ScsiController(std::unique_ptr<UsbBackend> usb, BridgeProtocol protocol);

    std::string firmware() const override;
    ScsiTransport& transport() { return *transport_; }

    void xdata_read(uint16_t address, std::span<std::byte> out) override;
    void xdata_write(uint16_t address, std::span<const std::byte> data) override;
    void bring_link_up() override;
    uint32_t single_tlp(const tlp::Request& request) override;
    // Dword by dword through the TLP engine; writes pipelined (UAS: many commands in flight).
    void mem_write(uint64_t address, std::span<const std::byte> data) override;
    void mem_read(uint64_t address, std::span<std::byte> out) override;

    SramAccess sram_access() const override { return {asm24::kSectorBytes, false, asm24::kSmallWindowBytes}; }
    void sram_write(uint64_t offset, std::span<const std::byte> data) override;
    UsbBackend::Tag sram_write_async(uint64_t offset, std::span<std::byte> wire) override {
        sram_write(offset, wire);
        return 0;
    }
    void reap(UsbBackend::Tag) override {}
    void sram_read_arm(uint64_t offset, uint64_t bytes) override;
    void sram_read_data(std::span<std::byte> out) override;

private:
    // Commands collected for one execute(), with the buffers their data phases use.
    struct Batch {
        std::vector<ScsiCommand> commands;
        std::vector<std::unique_ptr<std::byte[]>> buffers;
    };
    // An 0xE4 read of `length` (<= 255) bytes into a buffer the batch owns.
    std::span<std::byte> add_read(Batch& batch, uint16_t address, size_t length);
    // `cached`: skip bytes the engine already holds (the TLP request registers only: tinygrad's
    // ignore_cache=False set); every other write goes out.
    void add_write(Batch& batch, uint16_t address, std::span<const std::byte> data, bool cached);
    void add_tlp(Batch& batch, const tlp::Request& request);
    // Executes the batch and checks every command's status (and an XDATA read's length).
    void run(Batch& batch);
    // The completion of a finished non-posted TLP, from the flag and completion registers read
    // back; `retry` for CRS.
    uint32_t complete(const tlp::Request& request, std::span<const std::byte> flags, std::span<const std::byte> regs, bool& retry);

    BridgeProtocol protocol_;
    std::unique_ptr<ScsiTransport> transport_;
    std::array<int16_t, 65536> cache_;  // the byte last written to each XDATA address, -1: unknown
};

}  // namespace baregpu::usb
