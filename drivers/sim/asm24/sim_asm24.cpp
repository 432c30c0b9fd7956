#include "drivers/sim/asm24/sim_asm24.hpp"

#include "base/error.hpp"
#include "drivers/sim/asm24/bridge_impl.hpp"
#include "drivers/usb/asm24_protocol.hpp"
#include "drivers/usb/tlp.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <map>
#include <optional>

namespace baregpu::sim::asm24 {

namespace a24 = usb::asm24;
namespace tlp = usb::tlp;

std::string Violation::describe() const { return fmt::format("{} at {} ({})", what, where, source); }

SimAsm24Bridge::SimAsm24Bridge(Options options, std::unique_ptr<pci::sim::SimDeviceModel> endpoint)
    : options_(std::move(options)), impl_(std::make_unique<Impl>(*this, std::move(endpoint))) {}

SimAsm24Bridge::~SimAsm24Bridge() = default;

usb::DeviceDescriptor SimAsm24Bridge::descriptor() {
    usb::DeviceDescriptor d;
    d.vendor_id = options_.vendor_id;
    d.product_id = options_.product_id;
    d.product = options_.product;
    using I = Options::Interfaces;
    if (options_.interfaces == I::Custom) {
        d.interfaces.push_back({0, 0, 0xff, 0x00, 0x00, {{a24::kBulkIn, 0x02, 1024}, {a24::kBulkOut, 0x02, 1024}}});
    } else {
        // The stock firmware: BOT at alt 0, UAS at alt 1 (USB mass storage class 08, subclass 06, protocol 50 / 62).
        d.interfaces.push_back({0, 0, 0x08, 0x06, 0x50, {{0x81, 0x02, 1024}, {0x02, 0x02, 1024}}});
        if (options_.interfaces == I::Uas) {
            d.interfaces.push_back({0, 1, 0x08, 0x06, 0x62, {{0x81, 0x02, 1024}, {0x02, 0x02, 1024}, {0x83, 0x02, 1024}, {0x04, 0x02, 1024}}});
        }
    }
    return d;
}

void SimAsm24Bridge::claim_interface(uint8_t interface, uint8_t alt_setting) {
    std::lock_guard lock(impl_->mutex);
    impl_->begin_transfer("claim interface");
    if (impl_->stock()) return impl_->stock_claim(interface, alt_setting);
    if (interface != 0 || alt_setting != 0) {
        throw ProtocolError(name(), fmt::format("claim of interface {} alt {}: the custom firmware has interface 0 alt 0 only", interface,
                                                alt_setting));
    }
    impl_->claimed = true;
}

void SimAsm24Bridge::release_interface(uint8_t) {
    std::lock_guard lock(impl_->mutex);
    impl_->claimed = false;
}

size_t SimAsm24Bridge::control(uint8_t request_type, uint8_t request, uint16_t value, uint16_t index, std::span<std::byte> data,
                               std::chrono::milliseconds timeout) {
    std::lock_guard lock(impl_->mutex);
    Impl& m = *impl_;
    const std::string where = fmt::format("vendor request {:#04x} (bmRequestType {:#04x}, wValue {:#06x}, wIndex {:#06x})", request,
                                          request_type, value, index);
    m.begin_transfer(where);
    ++m.counters.control;
    m.charge_control();
    if (m.stock()) return m.stock_control(request_type, request, value, index, data, timeout);
    if (!m.claimed) m.stall("vendor request before interface 0 was claimed", where);
    if (request_type == usb::kVendorIn && request == a24::kReqXdataRead) {
        // main.c: "maxlen = is_usb2 ? 64 : 512", the reply is min(wLength, maxlen) bytes; the
        // address wraps in 16 bits.
        const size_t n = std::min<size_t>(data.size(), options_.usb2 ? 64 : 512);
        if (value >= a24::kXdataSysBuf) m.settle();  // the host reads GPU-written SRAM
        for (size_t i = 0; i < n; ++i) data[i] = std::byte(m.xdata_read(static_cast<uint16_t>(value + i)));
        return n;
    }
    if (request_type == usb::kVendorOut && request == a24::kReqXdataWrite) {
        if (!data.empty()) m.give_up("XDATA write with a data stage the firmware never takes", where, timeout);
        // wIndex's high byte selects a bank (main.c: DPX, 1 = PHY registers): not modelled.
        if (index > 0xff) return m.ignore("XDATA write to bank " + std::to_string(index >> 8), where), 0;
        m.xdata_write(value, static_cast<uint8_t>(index));
        return 0;
    }
    if (request_type == usb::kVendorOut && request == a24::kReqTlp) {
        m.tlp_out(value, index, data);
        return data.size();
    }
    if (request_type == usb::kVendorIn && request == a24::kReqTlp) {
        // main.c: polls the TLP engine's status up to 500000 times, then answers 8 bytes; with
        // nothing completing, ret_status (byte 7) is 0xFF and the data zero.
        tlp::Completion c{};
        if (m.completion) {
            const std::chrono::milliseconds delay{m.completion_delay_ms};
            if (delay > timeout) {
                m.completion.reset();
                m.give_up(fmt::format("completion of a slow completer ({} ms)", delay.count()), where, timeout);
            }
            clock_ns_.fetch_add(static_cast<uint64_t>(std::chrono::nanoseconds(delay).count()));
            c = *m.completion;
        } else {
            m.record("completion read with no non-posted TLP outstanding (answers status 0xFF)", where, kFirmware);
            c.transport_status = 0xFF;
        }
        m.completion.reset();
        const std::array<std::byte, 8> bytes = tlp::encode_completion(c);
        const size_t n = std::min<size_t>(data.size(), 8);
        std::memcpy(data.data(), bytes.data(), n);
        return n;
    }
    if (request_type == usb::kVendorOut && request == a24::kReqSramArm) {
        m.sram_arm(value, index);
        return 0;
    }
    if (request_type == usb::kVendorOut && request == a24::kReqPciePower) {
        m.ltssm = (value & 1) != 0 ? a24::kLtssmL0 : 0x00;  // main.c: "wValue low bit 0"
        return 0;
    }
    // main.c: any other request is ACKed when it has no data stage ("if (wLen == 0)
    // usb_send_zlp()"); one with a data stage is never answered.
    if (data.empty()) return m.ignore("unknown vendor request", where), 0;
    m.give_up("unknown vendor request with a data stage", where, timeout);
}

std::optional<SimAsm24Bridge::ArmedTransfer> SimAsm24Bridge::armed() {
    std::lock_guard lock(impl_->mutex);
    Impl& m = *impl_;
    if (m.stock()) return std::nullopt;  // the gadget adapter serves the custom firmware only
    const auto& pending = m.pending_stream ? m.pending_stream : m.pending_sram;
    if (!pending) return std::nullopt;
    bool ready = true;
    if (pending->sram && pending->endpoint == a24::kBulkIn) {
        m.settle();
        ready = m.tree.cq_writes() != pending->cq_writes_at_arm;
    }
    return ArmedTransfer{pending->endpoint, pending->bytes, ready};
}

size_t SimAsm24Bridge::bulk(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout) {
    std::lock_guard lock(impl_->mutex);
    Impl& m = *impl_;
    m.begin_transfer_lazy([&] { return fmt::format("bulk {:#04x} of {} bytes", endpoint, data.size()); });
    (endpoint & usb::kEndpointIn ? m.counters.bulk_in : m.counters.bulk_out)++;
    (endpoint & usb::kEndpointIn ? m.counters.bytes_in : m.counters.bytes_out) += data.size();
    if (m.stock()) {
        m.charge_bulk_sync(m.wire_ns(data.size()));
        const size_t n = m.bot_bulk(endpoint, data, timeout);
        if (clock_ns_.load() < m.st.firmware_free_at) clock_ns_.store(m.st.firmware_free_at);  // the 8051's time on the command
        return n;
    }
    m.charge_bulk_sync(m.transfer_ns(endpoint, data.size()));
    m.bulk_data(endpoint, data, timeout);
    return data.size();
}

void SimAsm24Bridge::clear_halt(uint8_t endpoint) {
    std::lock_guard lock(impl_->mutex);
    Impl& m = *impl_;
    m.begin_transfer(fmt::format("clear halt on {:#04x}", endpoint));
    ++m.counters.control;
    m.charge_control();
    if (m.stock()) return;  // a halt from an invalid CBW stays until Reset Recovery (BOT 1.0 6.6.1)
    // main.c CLEAR_FEATURE(ENDPOINT_HALT): the endpoint is cleared and "dma_dwords = 0" ends a
    // stream; the SRAM engine's arm is not touched.
    if (m.pending_stream && m.pending_stream->endpoint == endpoint) m.pending_stream.reset();
}

usb::UsbBackend::Tag SimAsm24Bridge::submit_bulk(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout,
                                                 uint32_t stream) {
    std::lock_guard lock(impl_->mutex);
    Impl& m = *impl_;
    if (m.stock()) return m.uas_submit(endpoint, data, timeout, stream);
    if (stream != 0) m.record("a bulk stream on the custom firmware (it has none)", fmt::format("bulk {:#04x}", endpoint), kFirmware);
    const Tag tag = m.next_tag++;
    Impl::Async a{0, data.size(), std::nullopt, false};
    // The transfer runs now (the data lands at submit); its failure is latched for reap, as a
    // libusb callback would report it.
    try {
        m.begin_transfer_lazy([&] { return fmt::format("asynchronous bulk {:#04x} of {} bytes", endpoint, data.size()); });
        (endpoint & usb::kEndpointIn ? m.counters.bulk_in : m.counters.bulk_out)++;
        (endpoint & usb::kEndpointIn ? m.counters.bytes_in : m.counters.bytes_out) += data.size();
        a.done_at = m.charge_bulk_async(m.transfer_ns(endpoint, data.size()));
        m.bulk_data(endpoint, data, timeout);
    } catch (const DeviceLostError& e) {
        a.error = e.what(), a.lost = true;
    } catch (const Error& e) {
        a.error = e.what();
    }
    m.async[tag] = a;
    return tag;
}

size_t SimAsm24Bridge::reap(Tag tag) {
    std::lock_guard lock(impl_->mutex);
    Impl& m = *impl_;
    if (m.stock()) return m.uas_reap(tag);
    auto it = m.async.find(tag);
    if (it == m.async.end()) throw Error(name(), fmt::format("reap of unknown transfer {}", tag));
    Impl::Async a = it->second;
    m.async.erase(it);
    if (a.lost) throw DeviceLostError(name(), *a.error);
    if (a.error) throw ProtocolError(name(), *a.error);
    if (clock_ns_.load() < a.done_at) clock_ns_.store(a.done_at);
    return a.bytes;
}

void SimAsm24Bridge::inject(Fault fault) {
    std::lock_guard lock(impl_->mutex);
    impl_->faults.push_back(fault);
}

void SimAsm24Bridge::clear_faults() {
    std::lock_guard lock(impl_->mutex);
    impl_->faults.clear();
    impl_->gone = false;
}

std::vector<Violation> SimAsm24Bridge::violations() const {
    std::lock_guard lock(impl_->violations_mutex);
    return impl_->violations;
}

void SimAsm24Bridge::clear_violations() {
    std::lock_guard lock(impl_->violations_mutex);
    impl_->violations.clear();
}

UsbCounters SimAsm24Bridge::counters() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->counters;
}
std::span<std::byte> SimAsm24Bridge::sram() { return impl_->tree.sram(); }
pci::sim::SimDeviceModel* SimAsm24Bridge::endpoint_model() { return impl_->tree.model(); }
uint8_t SimAsm24Bridge::ltssm() const { return impl_->link_down() ? 0 : a24::kLtssmL0; }

}  // namespace baregpu::sim::asm24
