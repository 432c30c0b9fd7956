// ASMedia's stock ASM2464 firmware as the simulated bridge runs it: USB mass storage (BOT at
// alternate setting 0, UAS with USB 3 streams at 1) carrying the vendor CDBs tinygrad used before it
// moved to its own firmware (usb.py before commit d6fddb066f: 0xE4 XDATA read, 0xE5 XDATA write,
// 0x8A WRITE(16) into the SRAM), and the XDATA TLP engine at 0xB2xx. The transport rules are the
// specifications' (BOT 1.0, T10 UAS as Linux include/linux/usb/uas.h lays it out, SPC-4 sense);
// what the firmware does with its vendor commands has no public source but tinygrad's usb.py, and
// what that code needed is what the model requires (drivers/sim/asm24/README.md lists each rule).
#include "drivers/sim/asm24/bridge_impl.hpp"

#include <bit>

namespace baregpu::sim::asm24 {

namespace scsi = usb::scsi;

namespace {
constexpr const char* kBot = "USB Mass Storage Class Bulk-Only Transport 1.0";
constexpr const char* kUas = "T10 USB Attached SCSI (Linux include/linux/usb/uas.h, drivers/usb/storage/uas.c)";
constexpr const char* kStockUsb = "tinygrad usb.py before d6fddb066f (ASM24Controller, the stock firmware's SCSI path)";
constexpr unsigned kMaxStreams = 31;  // tinygrad usb.py: 31 streams per pipe

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]); }
uint32_t xdata_be32(const std::array<uint8_t, 65536>& x, uint16_t at) {
    return uint32_t(x[at]) << 24 | uint32_t(x[at + 1]) << 16 | uint32_t(x[at + 2]) << 8 | uint32_t(x[at + 3]);
}
void put_le32(std::byte* p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = std::byte(v >> (8 * i));
}
uint32_t get_le32(const std::byte* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }
// XDATA address in an 0xE4 / 0xE5 CDB: bytes 2..4, (address & 0x1FFFF) | 0x500000 (usb.py).
std::optional<uint16_t> cdb_xdata(std::span<const uint8_t> cdb) {
    const uint32_t a = uint32_t(cdb[2]) << 16 | uint32_t(cdb[3]) << 8 | cdb[4];
    if ((a & ~uint32_t{0x1FFFF}) != 0x500000 || (a & 0x10000) != 0) return std::nullopt;
    return static_cast<uint16_t>(a);
}
std::string hex_cdb(std::span<const uint8_t> cdb) {
    std::string out = "SCSI";
    for (uint8_t b : cdb) out += fmt::format(" {:02X}", b);
    return out;
}
}  // namespace

using Impl = SimAsm24Bridge::Impl;

std::string Impl::ScsiWhere::str() const {
    return tag != 0 ? fmt::format("UAS {} (tag {})", hex_cdb(cdb), tag) : fmt::format("BOT {}", hex_cdb(cdb));
}

void Impl::charge_firmware(uint64_t ns) {
    const uint64_t start = std::max(self.clock_ns_.load(), st.firmware_free_at);
    st.firmware_free_at = start + ns;
}

Impl::Phase Impl::phase_of(std::span<const uint8_t> cdb) const {
    switch (cdb[0]) {
        case scsi::kOpXdataRead: return {Phase::In, cdb[1]};
        case scsi::kOpWrite16: return {Phase::Out, be32(&cdb[10]) * static_cast<uint32_t>(a24::kSectorBytes)};
        case 0x03: return {Phase::In, cdb.size() > 4 ? cdb[4] : 0u};  // REQUEST SENSE: allocation length
        default: return {};
    }
}

// ---- The vendor commands and the XDATA they reach ----

void Impl::stock_xdata_write(uint16_t at, uint8_t v, const ScsiWhere& where) {
    xdata_write(at, v);
    if (at == a24::kTlpStatus) {
        if (v == a24::kTlpLaunch) return tlp_engine_launch(where);
        if (v == a24::kTlpError) xdata[at] = 0;  // the error bit is cleared by writing it
        return;
    }
    // The write path's fixups after a WRITE(16), then its re-arm (usb.py scsi_write).
    if (st.fixups_due) {
        if (at >= a24::kScsiWriteDone && at < a24::kScsiWriteDone + 3 && v == 0xff) st.fixups_seen |= 1u << (at - a24::kScsiWriteDone);
        if (at >= a24::kScsiWriteClear && at < a24::kScsiWriteClear + 2 && v == 0) st.fixups_seen |= 8u << (at - a24::kScsiWriteClear);
        if (st.fixups_seen == 0x1f) st.fixups_due = false;
    }
    if (at == a24::kScsiWriteRearm && v == 0) {
        if (st.fixups_due) {
            record("XDATA 0x07EF = 0 (re-arm) before the last WRITE(16)'s fixups (0x0171..3 = ff, 0xCE6E..F = 0): the write path stays "
                   "disarmed",
                   where.str(), kStockUsb);
            return;
        }
        st.write_armed = true;
    }
}

uint8_t Impl::tlp_engine_status() {
    if (xdata[a24::kTlpStatus] == a24::kTlpLaunch && self.clock_ns_.load() >= st.tlp_done_at && st.tlp_done_at != 0) {
        xdata[a24::kTlpStatus] = a24::kTlpDone;  // a slow completer's completion arrived
        st.tlp_done_at = 0;
    }
    return xdata[a24::kTlpStatus];
}

void Impl::tlp_engine_launch(const ScsiWhere& where) {
    // tinygrad's controller init writes come first; the engine is launched only with 0xB254 = 0x0F.
    for (const a24::XdataInit& w : a24::kStockInit) {
        for (unsigned i = 0; i < w.length; ++i) {
            // (0xC422 lies in the window XDATA 0xB800.. maps to PCIe 0x822000: read it as the host would.)
            const uint8_t held = xdata_read(static_cast<uint16_t>(w.address + i));
            if (held != w.bytes[i]) {
                record(fmt::format("TLP engine launched before the controller init (XDATA {:#06x} holds {:#04x}, tinygrad writes {:#04x} "
                                   "first): nothing is sent",
                                   w.address + i, held, w.bytes[i]),
                       where.str(), kStockUsb);
                return;
            }
        }
    }
    if (xdata[a24::kTlpArm] != a24::kTlpArmValue) {
        record(fmt::format("TLP engine launched with XDATA 0xB254 = {:#04x}, not 0x0F: nothing is sent", xdata[a24::kTlpArm]), where.str(),
               kStockUsb);
        return;
    }
    xdata[a24::kTlpArm] = 0;  // one arm per launch
    tlp::Request r;
    r.fmt_type = xdata[a24::kTlpFmtType];
    r.byte_enables = xdata[a24::kTlpByteEnables];
    r.address = uint64_t{xdata_be32(xdata, a24::kTlpAddressHigh)} << 32 | xdata_be32(xdata, a24::kTlpAddressLow);
    r.value = xdata_be32(xdata, a24::kTlpData);
    ++counters.tlps;
    auto finish = [&](uint8_t status, bool has_data, tlp::CompletionStatus cs, unsigned count, std::optional<uint32_t> data) {
        xdata[a24::kTlpStatus] = status;
        xdata[a24::kTlpCompletionHasData] = has_data ? 1 : 0;
        const uint16_t word = static_cast<uint16_t>(static_cast<unsigned>(cs) << 13 | (count & 0xfff));
        xdata[a24::kTlpCompletion] = static_cast<uint8_t>(word >> 8);
        xdata[a24::kTlpCompletion + 1] = static_cast<uint8_t>(word);
        if (data) {
            for (int i = 0; i < 4; ++i) xdata[a24::kTlpData + i] = static_cast<uint8_t>(*data >> (24 - 8 * i));
        }
    };
    const bool memory = r.fmt_type == tlp::kMRd64 || r.fmt_type == tlp::kMWr64;
    if ((!memory && !tlp::is_config(r.fmt_type)) || r.byte_enables == 0 || r.byte_enables > 0xf || r.address % 4 != 0) {
        record(fmt::format("TLP engine: fmt/type {:#04x}, byte enables {:#x}, address {:#x}", r.fmt_type, r.byte_enables, r.address),
               where.str(), kStockUsb);
        return finish(a24::kTlpError, false, tlp::CompletionStatus::UnsupportedRequest, 0, std::nullopt);
    }
    if (tlp::is_posted(r.fmt_type)) {
        single_memory(r, true);
        return finish(a24::kTlpDone, false, tlp::CompletionStatus::Successful, 0, std::nullopt);
    }
    if (link_down() || take(FaultKind::TransportError)) return finish(a24::kTlpError, false, tlp::CompletionStatus::Successful, 0, std::nullopt);
    tlp::Completion c{};
    if (take(FaultKind::ConfigRetry)) {
        c.status = tlp::CompletionStatus::ConfigRetry;
    } else if (take(FaultKind::CompleterAbort)) {
        c.status = tlp::CompletionStatus::CompleterAbort;
    } else if (memory) {
        const bool settle_first = st.alt != 1 || st.settled_window != st.window;
        st.settled_window = st.window;
        c = single_memory(r, false, settle_first);
    } else {
        c = tree.config(r);
    }
    const bool ok = c.status == tlp::CompletionStatus::Successful;
    const bool read = r.fmt_type == tlp::kMRd64 || (tlp::is_config(r.fmt_type) && !tlp::is_config_write(r.fmt_type));
    const unsigned count = tlp::is_config(r.fmt_type) ? 4 : static_cast<unsigned>(std::popcount(r.byte_enables));
    finish(a24::kTlpDone, ok && read, c.status, count, ok && read ? std::optional<uint32_t>(c.data) : std::nullopt);
    if (Fault* slow = find(FaultKind::SlowCompletion)) {
        xdata[a24::kTlpStatus] = a24::kTlpLaunch;  // still busy
        st.tlp_done_at = self.clock_ns_.load() + slow->after * 1'000'000;
        if (--slow->count == 0) faults.erase(faults.begin() + (slow - faults.data()));
    }
}

Impl::ScsiOutcome Impl::execute_cdb(std::span<const uint8_t> cdb, std::span<const std::byte> data_out, const ScsiWhere& where) {
    ScsiOutcome out;
    const auto fail = [&](uint8_t key, uint8_t asc, uint8_t ascq, const std::string& why, const char* source) {
        record(why, where.str(), source);
        out.status = scsi::kStatusCheckCondition;
        out.sense = {key, asc, ascq};
        st.sense = out.sense;
        return out;
    };
    if (take(FaultKind::CommandTimeout)) {
        st.hung = true;
        out.hang = true;
        record("the firmware stops answering (injected) until a reset", where.str(), kStockUsb);
        return out;
    }
    charge_firmware(self.options_.latency.scsi_command_ns);
    switch (cdb[0]) {
        case scsi::kOpXdataRead: {
            const std::optional<uint16_t> at = cdb_xdata(cdb);
            if (!at || cdb[1] == 0) return fail(scsi::kSenseIllegalRequest, 0x24, 0, "0xE4 outside the XDATA window or of length 0", kStockUsb);
            // The host reads what the GPU may have written (the SRAM windows): let its engines settle first.
            const auto touches = [&](uint32_t base, uint32_t bytes) { return *at < base + bytes && base < uint32_t{*at} + cdb[1]; };
            if (touches(a24::kXdataSysBuf, a24::kSmallWindowBytes) || touches(a24::kXdataCqBuf, a24::kSmallWindowBytes) ||
                touches(a24::kXdataBulkWindow, a24::kSmallWindowBytes)) {
                settle();
            }
            if (*at <= a24::kTlpStatus && a24::kTlpStatus < *at + cdb[1]) tlp_engine_status();
            if (*at <= a24::kTlpData && a24::kTlpData < *at + cdb[1] && xdata[a24::kTlpStatus] == a24::kTlpLaunch) settle(kBarReadSettle);
            for (unsigned i = 0; i < cdb[1]; ++i) out.in.push_back(std::byte(xdata_read(static_cast<uint16_t>(*at + i))));
            return out;
        }
        case scsi::kOpXdataWrite: {
            const std::optional<uint16_t> at = cdb_xdata(cdb);
            if (!at) return fail(scsi::kSenseIllegalRequest, 0x24, 0, "0xE5 outside the XDATA window", kStockUsb);
            stock_xdata_write(*at, cdb[1], where);
            return out;
        }
        case scsi::kOpWrite16: {
            const uint64_t lba = uint64_t{be32(&cdb[2])} << 32 | be32(&cdb[6]);
            const uint64_t bytes = uint64_t{be32(&cdb[10])} * a24::kSectorBytes;
            charge_firmware(self.options_.latency.scsi_write_command_ns - self.options_.latency.scsi_command_ns +
                            wire_ns(bytes > 4096 ? bytes - 4096 : 0));
            if (bytes == 0 || bytes > usb::scsi::kMaxWriteBytes) {
                return fail(scsi::kSenseIllegalRequest, 0x24, 0,
                            fmt::format("WRITE(16) of {} bytes: tinygrad writes 1 to 128 sectors (64 KB) per command", bytes), kStockUsb);
            }
            if (lba * a24::kSectorBytes + bytes > a24::kSramBytes) {
                return fail(scsi::kSenseIllegalRequest, 0x21, 0,
                            fmt::format("WRITE(16) at LBA {} of {} bytes: past the {} KB SRAM", lba, bytes, a24::kSramBytes / 1024), kStockUsb);
            }
            if (data_out.size() != bytes) {
                return fail(scsi::kSenseIllegalRequest, 0x24, 0,
                            fmt::format("WRITE(16) of {} bytes with a data phase of {}", bytes, data_out.size()), kBot);
            }
            if (!st.write_armed) {
                record("WRITE(16) with the SCSI write path not re-armed (XDATA 0x07EF = 0 after the previous write's fixups): the data is "
                       "not stored",
                       where.str(), kStockUsb);
            } else {
                std::lock_guard lock(tree.sram_mutex());
                std::memcpy(tree.sram().data() + lba * a24::kSectorBytes, data_out.data(), bytes);
            }
            st.write_armed = false;
            st.fixups_due = true;
            st.fixups_seen = 0;
            // The patched firmware's write handler exits with code 5 once the data is in the SRAM
            // (extra/usbgpu/patch.py), and usb.py ignores the failed status of 0x8A alone.
            out.status = scsi::kStatusCheckCondition;
            out.sense = {};
            st.sense = {};
            return out;
        }
        case 0x03: {  // REQUEST SENSE (SPC-4 6.39): the last command's sense, then cleared
            const auto s = scsi::encode_sense(st.sense);
            out.in.assign(s.begin(), s.begin() + std::min<size_t>(cdb[4], s.size()));
            st.sense = {};
            return out;
        }
        case 0x00: return out;  // TEST UNIT READY
        default:
            return fail(scsi::kSenseIllegalRequest, 0x20, 0, fmt::format("{}: an operation code the firmware does not know", hex_cdb(cdb)),
                        kStockUsb);
    }
}

// ---- USB side ----

void Impl::stock_claim(uint8_t interface, uint8_t alt) {
    const bool uas = self.options_.interfaces == SimAsm24Bridge::Options::Interfaces::Uas;
    if (interface != 0 || alt > (uas ? 1 : 0)) {
        throw ProtocolError(self.name(), fmt::format("claim of interface {} alt {}: the stock firmware has interface 0 with {}", interface,
                                                     alt, uas ? "BOT at alt 0 and UAS at alt 1" : "BOT at alt 0 only"));
    }
    claimed = true;
    st.alt = alt;
    st.streams = 0;
    scsi_reset("alternate setting selected");
}

void Impl::scsi_reset(const std::string&) {
    st.phase = Stock::BotPhase::Command;
    st.needs_reset = false;
    st.hung = false;
    st.pending_in.clear();
    st.commands.clear();
    st.hung_tags.clear();
}

size_t Impl::stock_control(uint8_t request_type, uint8_t request, uint16_t value, uint16_t index, std::span<std::byte> data,
                           std::chrono::milliseconds) {
    const std::string where = fmt::format("control request {:#04x} (bmRequestType {:#04x}, wValue {:#06x}, wIndex {:#06x})", request,
                                          request_type, value, index);
    if (!claimed) stall("control request before interface 0 was claimed", where);
    // BOT 1.0 3.1: Bulk-Only Mass Storage Reset (class, interface, wValue 0, wLength 0).
    if (request_type == scsi::kBotResetRequestType && request == scsi::kBotResetRequest && value == 0 && index == 0 && data.empty()) {
        scsi_reset("Bulk-Only Mass Storage Reset");
        return 0;
    }
    // A mass-storage device stalls requests it does not know (USB 3.2 9.2.7): the custom firmware's
    // vendor requests are not the stock firmware's.
    record("a request the stock firmware does not know (it speaks SCSI over BOT/UAS, not the custom firmware's vendor requests)", where,
           kBot);
    throw ProtocolError(self.name(), fmt::format("{}: stalled (LIBUSB_ERROR_PIPE)", where));
}

size_t Impl::bot_bulk(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout) {
    const auto where = [&] { return fmt::format("BOT bulk {:#04x} of {} bytes", endpoint, data.size()); };
    if (st.alt != 0) give_up("a bulk transfer without a stream while UAS (alt 1) is selected", where(), timeout, kUas);
    if (st.needs_reset) {
        record("a transfer after an invalid CBW: both pipes stay stalled until Reset Recovery", where(), kBot);
        throw ProtocolError(self.name(), fmt::format("{}: endpoint stalled (LIBUSB_ERROR_PIPE)", where()));
    }
    if (st.hung) give_up("the firmware is not answering (a command it never finished)", where(), timeout, kStockUsb);
    using P = Stock::BotPhase;
    const auto invalid_cbw = [&](const std::string& why) -> size_t {
        st.needs_reset = true;
        record("invalid CBW: " + why, where(), "USB Mass Storage Class Bulk-Only Transport 1.0, 6.2.1 and 6.6.1");
        throw ProtocolError(self.name(), fmt::format("{}: endpoint stalled (LIBUSB_ERROR_PIPE)", where()));
    };
    auto finish = [&](uint32_t residue, uint8_t status) {
        put_le32(&st.csw[0], scsi::kCswSignature);
        put_le32(&st.csw[4], st.cbw_tag);
        put_le32(&st.csw[8], residue);
        st.csw[12] = std::byte(status);
        st.phase = P::Status;
    };
    switch (st.phase) {
        case P::Command: {
            if (endpoint != 0x02) give_up("a bulk IN when the device waits for a CBW", where(), timeout, kBot);
            if (data.size() != scsi::kCbwBytes) return invalid_cbw(fmt::format("{} bytes, a CBW is 31", data.size()));
            if (get_le32(&data[0]) != scsi::kCbwSignature) return invalid_cbw(fmt::format("signature {:#010x}", get_le32(&data[0])));
            const uint8_t lun = static_cast<uint8_t>(data[13]), len = static_cast<uint8_t>(data[14]);
            if (lun != 0 || len == 0 || len > 16) return invalid_cbw(fmt::format("LUN {}, CDB length {}", lun, len));
            st.cbw_tag = get_le32(&data[4]);
            st.cbw_length = get_le32(&data[8]);
            const bool host_in = (uint8_t(data[12]) & scsi::kCbwFlagIn) != 0;
            st.cdb.assign(reinterpret_cast<const uint8_t*>(&data[15]), reinterpret_cast<const uint8_t*>(&data[15]) + len);
            if (st.cdb.size() < 16) st.cdb.resize(16, 0);  // phase_of reads fixed offsets
            const Phase device = phase_of(st.cdb);
            // BOT 1.0 6.7, the thirteen cases: a direction or length the command does not have is a phase error.
            st.phase_error = (st.cbw_length == 0) != (device.dir == Phase::None) ||
                             (st.cbw_length != 0 && host_in != (device.dir == Phase::In)) || (host_in && st.cbw_length < device.bytes) ||
                             (!host_in && st.cbw_length != 0 && st.cbw_length < device.bytes);
            if (st.phase_error) {
                record(fmt::format("CBW for {} with dCBWDataTransferLength {} {}: the command moves {} bytes {} (phase error)",
                                   hex_cdb(std::span(st.cdb.data(), len)), st.cbw_length, host_in ? "in" : "out", device.bytes,
                                   device.dir == Phase::In ? "in" : device.dir == Phase::Out ? "out" : "(none)"),
                       where(), "USB Mass Storage Class Bulk-Only Transport 1.0, 6.7");
            }
            if (st.cbw_length == 0) {
                const ScsiOutcome o = execute_cdb(std::span(st.cdb.data(), len), {}, ScsiWhere{std::span(st.cdb.data(), len)});
                if (o.hang) return data.size();
                finish(0, st.phase_error ? scsi::kCswPhaseError : o.status == scsi::kStatusGood ? scsi::kCswPassed : scsi::kCswFailed);
            } else if (host_in) {
                st.phase = P::DataIn;
            } else {
                st.phase = P::DataOut;
            }
            return data.size();
        }
        case P::DataOut: {
            if (endpoint != 0x02) give_up("a bulk IN during the data-out phase", where(), timeout, kBot);
            const uint8_t len = static_cast<uint8_t>(st.cdb.size());
            if (data.size() != st.cbw_length) {
                record(fmt::format("data-out of {} bytes after a CBW of {}", data.size(), st.cbw_length), where(), kBot);
                st.phase_error = true;
            }
            ScsiOutcome o;
            if (!st.phase_error) {
                o = execute_cdb(std::span(st.cdb.data(), len), std::span<const std::byte>(data.data(), data.size()),
                                ScsiWhere{std::span(st.cdb.data(), len)});
                if (o.hang) return data.size();
            }
            finish(0, st.phase_error ? scsi::kCswPhaseError : o.status == scsi::kStatusGood ? scsi::kCswPassed : scsi::kCswFailed);
            return data.size();
        }
        case P::DataIn: {
            if (endpoint != 0x81) give_up("a bulk OUT during the data-in phase", where(), timeout, kBot);
            ScsiOutcome o;
            if (!st.phase_error) {
                o = execute_cdb(std::span(st.cdb.data(), st.cdb.size()), {}, ScsiWhere{std::span(st.cdb.data(), st.cdb.size())});
                if (o.hang) give_up("the firmware never sends the data", where(), timeout, kStockUsb);
            }
            const size_t n = std::min({data.size(), o.in.size(), size_t{st.cbw_length}});
            if (n != 0) std::memcpy(data.data(), o.in.data(), n);
            finish(static_cast<uint32_t>(st.cbw_length - n),
                   st.phase_error ? scsi::kCswPhaseError : o.status == scsi::kStatusGood ? scsi::kCswPassed : scsi::kCswFailed);
            return n;
        }
        case P::Status: {
            if (endpoint != 0x81) return invalid_cbw("a CBW before the previous command's CSW was read");
            if (data.size() < scsi::kCswBytes) give_up(fmt::format("a CSW read of {} bytes (13 are sent)", data.size()), where(), timeout, kBot);
            std::memcpy(data.data(), st.csw.data(), st.csw.size());
            st.phase = P::Command;
            return st.csw.size();
        }
    }
    return 0;
}

unsigned SimAsm24Bridge::alloc_streams(unsigned count, std::span<const uint8_t>) {
    std::lock_guard lock(impl_->mutex);
    Impl& m = *impl_;
    // Streams exist on SuperSpeed only, for the UAS alternate setting (USB 3.2 8.12.1.4).
    if (!m.stock() || m.st.alt != 1 || options_.usb2) return 0;
    m.st.streams = std::min(count, kMaxStreams);
    return m.st.streams;
}

usb::UsbBackend::Tag Impl::uas_submit(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout, uint32_t stream) {
    const Tag tag = next_tag++;
    if (st.transfers.empty()) ++st.window;  // everything before was reaped: a new window
    Stock::Transfer t;
    t.endpoint = endpoint, t.stream = stream, t.data = data, t.timeout = timeout;
    const auto where = [&] { return fmt::format("UAS bulk {:#04x} stream {} of {} bytes", endpoint, stream, data.size()); };
    try {
        begin_transfer_lazy(where);
    } catch (const Error& e) {
        t.done = true, t.error = e.what();
        st.transfers[tag] = t;
        return tag;
    }
    (endpoint & usb::kEndpointIn ? counters.bulk_in : counters.bulk_out)++;
    (endpoint & usb::kEndpointIn ? counters.bytes_in : counters.bytes_out) += data.size();
    const uint64_t wire_done = charge_bulk_async(wire_ns(data.size()));
    if (st.alt != 1) {
        record("a UAS transfer while BOT (alt 0) is selected", where(), kUas);
    } else if (endpoint == 0x04) {
        if (stream != 0) record("a command-pipe transfer on a stream (the command pipe has none)", where(), kUas);
        t.done = true, t.moved = data.size(), t.done_at = wire_done, t.used = true;
        st.transfers[tag] = t;
        st.commands.emplace_back(data.begin(), data.end());  // the firmware has taken the IU
        uas_progress();
        return tag;
    } else if (stream == 0 || stream > st.streams) {
        record(fmt::format("stream {} on {:#04x}: {} streams were allocated", stream, endpoint, st.streams), where(), kUas);
    }
    st.transfers[tag] = t;
    uas_progress();
    return tag;
}

void Impl::uas_progress() {
    const uint64_t rtt = self.options_.latency.round_trip_ns;
    auto find = [&](uint8_t endpoint, uint16_t stream) -> Stock::Transfer* {
        for (auto& [tag, t] : st.transfers) {
            if (!t.used && !t.done && t.endpoint == endpoint && t.stream == stream) return &t;
        }
        return nullptr;
    };
    auto complete = [&](Stock::Transfer& t, std::span<const std::byte> bytes) {
        const size_t n = std::min(bytes.size(), t.data.size());
        if (n != 0) std::memcpy(t.data.data(), bytes.data(), n);
        t.moved = n, t.done = true, t.used = true;
        t.done_at = st.firmware_free_at + rtt;
    };
    while (!st.commands.empty()) {
        const std::vector<std::byte> iu = st.commands.front();
        const auto where = [&] { return fmt::format("UAS command pipe IU of {} bytes", iu.size()); };
        const uint16_t tag = iu.size() >= 4 ? static_cast<uint16_t>(uint16_t(iu[2]) << 8 | uint16_t(iu[3])) : 0;
        if (tag == 0 || tag > st.streams) {
            // No stream to answer on (USB 3.2 8.12.1.4: stream IDs 1..allocated): dropped, the host times out.
            st.commands.pop_front();
            record(fmt::format("an IU with tag {} ({} streams allocated): no stream to answer on", tag, st.streams), where(), kUas);
            continue;
        }
        Stock::Transfer* status = find(0x83, tag);
        if (status == nullptr) return;  // the firmware answers on the tag's status stream: nothing posted yet
        const uint8_t id = iu.empty() ? 0 : static_cast<uint8_t>(iu[0]);
        if (id == uint8_t(scsi::IuId::TaskManagement) && iu.size() >= scsi::kTaskManagementIuBytes) {
            st.commands.pop_front();
            const uint8_t function = static_cast<uint8_t>(iu[4]);
            const uint8_t rc = function == scsi::kTmfLogicalUnitReset || function == scsi::kTmfAbortTask ? scsi::kRcTmfComplete : 0x04;
            if (rc == scsi::kRcTmfComplete) scsi_reset("task management");
            charge_firmware(self.options_.latency.scsi_command_ns);
            complete(*status, scsi::encode_response_iu(tag, rc));
            continue;
        }
        if (id != uint8_t(scsi::IuId::Command) || iu.size() < scsi::kCommandIuBytes) {
            st.commands.pop_front();
            record(fmt::format("IU ID {:#04x}, tag {}, {} bytes: not a command IU the firmware takes ({} streams)", id, tag, iu.size(),
                               st.streams),
                   where(), kUas);
            complete(*status, scsi::encode_response_iu(tag, scsi::kRcInvalidIu));
            continue;
        }
        if (st.hung_tags.count(tag) != 0) {
            st.commands.pop_front();
            record(fmt::format("command IU with tag {} while the command with that tag has not completed", tag), where(), kUas);
            complete(*status, scsi::encode_response_iu(tag, scsi::kRcOverlappedTag));
            continue;
        }
        std::vector<uint8_t> cdb(reinterpret_cast<const uint8_t*>(&iu[16]), reinterpret_cast<const uint8_t*>(&iu[16]) + 16);
        const Phase phase = phase_of(cdb);
        Stock::Transfer* data = nullptr;
        if (phase.dir != Phase::None) {
            data = find(phase.dir == Phase::In ? 0x81 : 0x02, tag);
            if (data == nullptr) return;  // its data phase is not posted yet
        }
        st.commands.pop_front();
        if (st.hung) {
            // The firmware answers nothing until a task management reset: the tag's transfers wait out their timeouts.
            st.hung_tags[tag] = true;
            status->used = true;
            if (data) data->used = true;
            continue;
        }
        const ScsiWhere cwhere{std::span(cdb.data(), phase.dir == Phase::Out ? 16 : 6), tag};
        std::span<const std::byte> out;
        if (phase.dir == Phase::Out) out = std::span<const std::byte>(data->data.data(), data->data.size());
        ScsiOutcome o = execute_cdb(cdb, out, cwhere);
        if (o.hang) {
            st.hung_tags[tag] = true;
            status->used = true;
            if (data) data->used = true;
            continue;
        }
        if (data != nullptr && phase.dir == Phase::In) {
            if (data->data.size() < o.in.size()) {
                record(fmt::format("data-in of {} bytes posted for a command that sends {}", data->data.size(), o.in.size()), cwhere.str(), kUas);
                data->done = true, data->used = true, data->done_at = st.firmware_free_at + rtt;
                data->error = fmt::format("{}: the device sent more than the transfer holds (LIBUSB_ERROR_OVERFLOW)", cwhere.str());
            } else {
                complete(*data, o.in);
            }
        } else if (data != nullptr) {
            data->moved = data->data.size(), data->done = true, data->used = true, data->done_at = st.firmware_free_at + rtt;
        }
        const auto sense = scsi::encode_sense(o.sense);
        const std::vector<std::byte> siu =
            scsi::encode_sense_iu(tag, o.status, o.status == scsi::kStatusGood ? std::span<const std::byte>() : std::span<const std::byte>(sense));
        complete(*status, siu);
    }
}

size_t Impl::uas_reap(Tag tag) {
    auto it = st.transfers.find(tag);
    if (it == st.transfers.end()) throw Error(self.name(), fmt::format("reap of unknown transfer {}", tag));
    uas_progress();
    Stock::Transfer t = it->second;
    st.transfers.erase(it);
    async.erase(tag);
    if (!t.done) {
        const std::string where = fmt::format("UAS bulk {:#04x} stream {} of {} bytes", t.endpoint, t.stream, t.data.size());
        // Never answered: the firmware did not get to it (an earlier command hangs, or nothing was
        // posted for its stream).
        give_up("a UAS transfer the firmware never completes", where, t.timeout, kUas);
    }
    if (t.error) {
        if (gone) throw DeviceLostError(self.name(), *t.error);
        throw ProtocolError(self.name(), *t.error);
    }
    if (self.clock_ns_.load() < t.done_at) self.clock_ns_.store(t.done_at);
    return t.moved;
}

}  // namespace baregpu::sim::asm24
