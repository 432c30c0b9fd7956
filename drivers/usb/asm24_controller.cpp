#include "drivers/usb/asm24_controller.hpp"

#include "base/error.hpp"
#include "drivers/usb/asm24_protocol.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>

namespace baregpu::usb {

using namespace asm24;

namespace {
uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }
}  // namespace

Asm24Controller::Asm24Controller(std::unique_ptr<UsbBackend> usb) : Bridge(std::move(usb)) {
    const DeviceDescriptor d = usb_->descriptor();
    const std::optional<BridgeProtocol> protocol = detect_protocol(d);
    if (!protocol) {
        throw ProtocolError(name(), fmt::format("{:04x}:{:04x} \"{}\" is not an ASM24xx bridge this driver knows (expected {:04x}:{:04x} "
                                                "or {:04x}:{:04x} with a \"custom\" product string, or {:04x}:{:04x} mass storage; an enclosure with its own IDs: "
                                                "set {}=VID:PID)",
                                                d.vendor_id, d.product_id, d.product, kCustomVendor, kCustomProduct, kCustomVendorOld,
                                                kCustomProduct, kAsmediaVendor, kStockProduct2464, kUserIdsVariable));
    }
    if (*protocol != BridgeProtocol::CustomFirmware) {
        throw UnsupportedError(name(), fmt::format("the bridge speaks {}, not the custom firmware's vendor requests: "
                                                   "usb::open_bridge drives it with Asm24ScsiController",
                                                   to_string(*protocol)));
    }
    // Configuration 1, interface 0, alternate setting 0 (tinygrad usb.py USB3).
    usb_->claim_interface(0, 0);
}

void Asm24Controller::control_out(uint8_t request, uint16_t value, uint16_t index, std::span<std::byte> data,
                                  std::chrono::milliseconds timeout) {
    ++counters_.control;
    usb_->control(kVendorOut, request, value, index, data, timeout);
}

void Asm24Controller::control_in(uint8_t request, uint16_t value, uint16_t index, std::span<std::byte> data,
                                 std::chrono::milliseconds timeout) {
    ++counters_.control;
    const size_t got = usb_->control(kVendorIn, request, value, index, data, timeout);
    if (got != data.size()) {
        throw ProtocolError(name(), fmt::format("vendor request {:#04x} (wValue {:#06x}) returned {} bytes, expected {}", request, value,
                                                got, data.size()));
    }
}

void Asm24Controller::bulk_on(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout, size_t& moved) {
    try {
        moved = usb_->bulk(endpoint, data, timeout);
    } catch (const DeviceLostError&) {
        throw;
    } catch (const Error&) {
        // A failed transfer leaves the pipe halted on the host side and a stream half done on the
        // firmware's: CLEAR_FEATURE(ENDPOINT_HALT) resets both (asm2464pd-firmware main.c).
        try {
            usb_->clear_halt(endpoint);
        } catch (const Error&) {
            // The original failure is what the caller needs to see.
        }
        throw;
    }
}

void Asm24Controller::bulk_out(std::span<std::byte> data, std::chrono::milliseconds timeout) {
    ++counters_.bulk_out;
    counters_.bytes_out += data.size();
    size_t sent = 0;
    bulk_on(kBulkOut, data, timeout, sent);
    if (sent != data.size()) {
        throw ProtocolError(name(), fmt::format("bulk OUT {:#04x}: {} of {} bytes sent", kBulkOut, sent, data.size()));
    }
}

void Asm24Controller::bulk_in(std::span<std::byte> data, std::chrono::milliseconds timeout) {
    ++counters_.bulk_in;
    counters_.bytes_in += data.size();
    size_t got = 0;
    bulk_on(kBulkIn, data, timeout, got);
    if (got != data.size()) {
        throw ProtocolError(name(), fmt::format("bulk IN {:#04x}: {} of {} bytes received", kBulkIn, got, data.size()));
    }
}

void Asm24Controller::xdata_read(uint16_t address, std::span<std::byte> out) {
    for (size_t done = 0; done < out.size();) {
        const size_t n = std::min<size_t>(kXdataReadMax, out.size() - done);
        // The firmware answers at most 64 bytes on a USB 2 link (asm2464pd-firmware main.c, 0xE4):
        // a short reply is not an error, the rest follows in the next request.
        ++counters_.control;
        const size_t got = usb_->control(kVendorIn, kReqXdataRead, static_cast<uint16_t>(address + done), 0, out.subspan(done, n),
                                         kControlTimeout);
        if (got == 0 || got > n) {
            throw ProtocolError(name(), fmt::format("XDATA read of {} bytes at {:#06x} returned {} bytes", n, address + done, got));
        }
        done += got;
    }
}

void Asm24Controller::xdata_write(uint16_t address, std::span<const std::byte> data) {
    for (size_t i = 0; i < data.size(); ++i) {
        control_out(kReqXdataWrite, static_cast<uint16_t>(address + i), static_cast<uint16_t>(data[i]), {}, kControlTimeout);
    }
}

void Asm24Controller::set_pcie_power(bool on) { control_out(kReqPciePower, on ? 1 : 0, 0, {}, kPowerTimeout); }

void Asm24Controller::bring_link_up() {
    if (link_up()) return;
    set_pcie_power(true);
    const uint8_t state = ltssm_state();
    if (state != kLtssmL0) {
        throw DeviceLostError(name(), fmt::format("PCIe link not up after power on: LTSSM state {:#04x} at XDATA {:#06x}, expected {:#04x} "
                                                  "(L0); is the GPU seated and powered, and the custom firmware running?",
                                                  state, kXdataLtssm, kLtssmL0));
    }
}

uint32_t Asm24Controller::single_tlp(const tlp::Request& request) {
    std::array<std::byte, 12> payload = request.payload();
    for (unsigned attempt = 0;; ++attempt) {
        control_out(kReqTlp, request.w_value(), request.w_index(), payload, kTlpTimeout);
        if (tlp::is_posted(request.fmt_type)) return 0;
        std::array<std::byte, 8> raw{};
        // The firmware polls the completer up to 500000 times before it answers (main.c, 0xF0 IN):
        // tinygrad's 5 s, not the 1 s of other control requests.
        control_in(kReqTlp, 0, 0, raw, kTlpTimeout);
        const tlp::Completion c = tlp::decode_completion(raw);
        const bool retry = c.transport_status != 0 || c.status == tlp::CompletionStatus::ConfigRetry;
        if (retry) {
            if (attempt + 1 >= kTlpRetries) {
                throw ProtocolError(name(), fmt::format("{}: no completion after {} tries (last: transport status {:#04x}, {})",
                                                        request.describe(), kTlpRetries, c.transport_status, tlp::describe(c.status)));
            }
            ++counters_.tlp_retries;
            usb_->sleep(kTlpRetryDelay);
            continue;
        }
        if (c.status != tlp::CompletionStatus::Successful) {
            throw ProtocolError(name(), fmt::format("{}: completion status {}, expected Successful Completion (SC)", request.describe(),
                                                    tlp::describe(c.status)));
        }
        return c.data;
    }
}

void Asm24Controller::mem_write(uint64_t address, std::span<const std::byte> data) {
    if (address % 4 != 0 || data.size() % 4 != 0 || data.empty()) {
        throw Error(name(), fmt::format("streaming write of {} bytes at {:#x}: address and size must be non-zero dword multiples",
                                        data.size(), address));
    }
    tlp::Request r{tlp::kMWr64, 0x0F, tlp::Mode::StreamWrite, address, static_cast<uint32_t>(data.size() / 4)};
    std::array<std::byte, 12> payload = r.payload();
    control_out(kReqTlp, r.w_value(), r.w_index(), payload, kTlpTimeout);
    // libusb takes a non-const buffer even for OUT transfers; it does not write to it.
    bulk_out(std::span(const_cast<std::byte*>(data.data()), data.size()), kBulkOutTimeout);
}

void Asm24Controller::mem_read(uint64_t address, std::span<std::byte> out) {
    if (address % 4 != 0 || out.size() % 4 != 0 || out.empty()) {
        throw Error(name(), fmt::format("streaming read of {} bytes at {:#x}: address and size must be non-zero dword multiples",
                                        out.size(), address));
    }
    tlp::Request r{tlp::kMRd64, 0x0F, tlp::Mode::StreamRead, address, static_cast<uint32_t>(out.size() / 4)};
    std::array<std::byte, 12> payload = r.payload();
    control_out(kReqTlp, r.w_value(), r.w_index(), payload, kTlpTimeout);
    bulk_in(out, kBulkInTimeout);
}

void Asm24Controller::arm_sram(unsigned slot, uint64_t bytes, bool read) {
    const uint64_t sectors = round_up(bytes, kSectorBytes) / kSectorBytes;
    const uint64_t nslots = round_up(bytes, kSramSlotBytes) / kSramSlotBytes;
    if (bytes == 0 || slot + nslots > kSramSlots) {
        throw Error(name(), fmt::format("SRAM transfer of {} bytes from slot {}: the bridge has {} slots of {} KB", bytes, slot, kSramSlots,
                                        kSramSlotBytes / 1024));
    }
    control_out(kReqSramArm, static_cast<uint16_t>(sectors | (read ? kSramArmRead : 0)), static_cast<uint16_t>(slot | nslots << 8), {},
                kControlTimeout);
}

unsigned Asm24Controller::slot_of(uint64_t offset) const {
    if (offset % kSramSlotBytes != 0 || offset >= kSramBytes) {
        throw Error(name(), fmt::format("SRAM access at offset {:#x}: the 0xF2 engine starts on 16 KB slots below {} KB", offset,
                                        kSramBytes / 1024));
    }
    return static_cast<unsigned>(offset / kSramSlotBytes);
}

void Asm24Controller::sram_write(uint64_t offset, std::span<const std::byte> data) {
    const unsigned slot = slot_of(offset);
    scratch_.assign(round_up(data.size(), kSectorBytes), std::byte{0});
    std::memcpy(scratch_.data(), data.data(), data.size());
    arm_sram(slot, scratch_.size(), false);
    bulk_out(scratch_, kBulkOutTimeout);
}

void Asm24Controller::sram_read(uint64_t offset, std::span<std::byte> out) {
    sram_read_arm(offset, out.size());
    sram_read_data(out);
}

void Asm24Controller::sram_read_arm(uint64_t offset, uint64_t bytes) { arm_sram(slot_of(offset), round_up(bytes, kSectorBytes), true); }

void Asm24Controller::sram_read_data(std::span<std::byte> out) {
    const uint64_t wire = round_up(out.size(), kSectorBytes);
    if (wire == out.size()) {
        bulk_in(out, kBulkInTimeout);
        return;
    }
    scratch_.resize(wire);
    bulk_in(scratch_, kBulkInTimeout);
    std::memcpy(out.data(), scratch_.data(), out.size());
}

UsbBackend::Tag Asm24Controller::sram_write_async(uint64_t offset, std::span<std::byte> wire) {
    const unsigned slot = slot_of(offset);
    if (wire.size() % kSectorBytes != 0) {
        throw Error(name(), fmt::format("asynchronous SRAM write of {} bytes: the wire image must be whole 512-byte sectors", wire.size()));
    }
    arm_sram(slot, wire.size(), false);
    ++counters_.bulk_out;
    counters_.bytes_out += wire.size();
    return usb_->submit_bulk(kBulkOut, wire, kAsyncBulkTimeout);
}

}  // namespace baregpu::usb
