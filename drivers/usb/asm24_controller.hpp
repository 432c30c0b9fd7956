// Asm24Controller: the ASM2464 bridge's custom-firmware protocol (a usb::Bridge) over a UsbBackend —
// controller memory (XDATA), PCIe link power and LTSSM state, configuration and memory TLPs
// (posted and non-posted, completion status decoding, bounded retries), streaming memory reads
// and writes, and the SRAM bulk engine. One instance per opened bridge; not thread-safe (the
// PciDevice above it serialises).
#pragma once

#include "drivers/usb/asm24_protocol.hpp"
#include "drivers/usb/bridge.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace baregpu::usb {

class Asm24Controller final : public Bridge {
public:
    // Reads the descriptors and claims interface 0. A bridge that speaks the stock firmware's SCSI
    // protocol (UAS/BOT) is refused with UnsupportedError naming it (open_bridge drives those with
    // Asm24ScsiController); anything else with ProtocolError.
    explicit Asm24Controller(std::unique_ptr<UsbBackend> usb);

    std::string firmware() const override { return "custom firmware (vendor requests 0xE4/E5/F0/F2/F3)"; }

    // Controller memory. Reads are split into requests of at most 255 bytes (fewer when the
    // firmware answers short, as on USB 2); writes are one request per byte (the firmware has no
    // multi-byte write).
    void xdata_read(uint16_t address, std::span<std::byte> out) override;
    void xdata_write(uint16_t address, std::span<const std::byte> data) override;

    // The PCIe link: LTSSM state, power (0xF3). bring_link_up powers the slot when the link is
    // not in L0 and throws DeviceLostError with the LTSSM state when it still is not.
    uint8_t ltssm_state() { return xdata_read8(asm24::kXdataLtssm); }
    bool link_up() { return ltssm_state() == asm24::kLtssmL0; }
    void set_pcie_power(bool on);
    void bring_link_up() override;

    // One mode-0 TLP. Posted requests return nothing (0). Non-posted ones read the completion:
    // a transport error or CRS is retried (kTlpRetries, 1 ms apart), UR / CA / reserved status is
    // a ProtocolError naming the request and the status.
    uint32_t single_tlp(const tlp::Request& request) override;

    // Streaming memory access (mode 1 / 2): one control transfer plus one bulk transfer of the
    // data, whatever its size. address and size must be dword multiples.
    void mem_write(uint64_t address, std::span<const std::byte> data) override;
    void mem_read(uint64_t address, std::span<std::byte> out) override;

    // Bridge's SRAM access in bytes (16 KB slots of the 0xF2 engine).
    SramAccess sram_access() const override { return {asm24::kSramSlotBytes, true}; }
    void reap(UsbBackend::Tag tag) override { usb_->reap(tag); }

    // The SRAM bulk engine: arm the slots from `offset` (a multiple of 16 KB) for `bytes` rounded up
    // to 512-byte sectors, then move the data on the bulk endpoints. write pads with zeros.
    void sram_write(uint64_t offset, std::span<const std::byte> data) override;
    // A read is released only by a device write to PCIe 0x822000 after the arm (asm2464pd-firmware
    // README.md, pcie/test_sram_verify.py): sram_read_arm, make the device write there, then
    // sram_read_data (bulk IN of `out.size()` rounded up to sectors). sram_read does both at once,
    // for a device that writes the trigger on its own.
    void sram_read(uint64_t offset, std::span<std::byte> out);
    void sram_read_arm(uint64_t offset, uint64_t bytes) override;
    void sram_read_data(std::span<std::byte> out) override;
    // Arms and submits without waiting: the caller reaps the returned tag. `wire` must be the
    // padded image (a multiple of 512 bytes) and outlive the reap.
    UsbBackend::Tag sram_write_async(uint64_t offset, std::span<std::byte> wire) override;

private:
    void control_out(uint8_t request, uint16_t value, uint16_t index, std::span<std::byte> data, std::chrono::milliseconds timeout);
    void control_in(uint8_t request, uint16_t value, uint16_t index, std::span<std::byte> data, std::chrono::milliseconds timeout);
    // One bulk transfer; after a failure other than a lost device the endpoint's halt is cleared.
    void bulk_on(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout, size_t& moved);
    void bulk_out(std::span<std::byte> data, std::chrono::milliseconds timeout);
    void bulk_in(std::span<std::byte> data, std::chrono::milliseconds timeout);
    void arm_sram(unsigned slot, uint64_t bytes, bool read);
    unsigned slot_of(uint64_t offset) const;
    std::vector<std::byte> scratch_;  // the padded image for sram_write
};

}  // namespace baregpu::usb
