#include "drivers/sim/asm24/sim_asm24.hpp"

#include "base/error.hpp"
#include "drivers/sim/asm24/pcie_tree.hpp"
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

namespace {
constexpr const char* kBridgeSource = "tinygrad runtime/support/usb.py (the custom-firmware requests) and test/mockgpu/usb.py";
constexpr const char* kFirmware = "asm2464pd-firmware handmade/src/main.c handle_usb_control";
constexpr const char* kSramTrigger =
    "asm2464pd-firmware README.md (\"The SRAM read needs a write from the PCIe device side at 0x822000 to trigger the read\") "
    "and pcie/test_sram_verify.py (arm 0xF2 for bulk IN, SDMA-write the completion entry, then bulk IN)";
constexpr const char* kPio = "asm2464pd-firmware handmade/src/pcie_pio.h pcie_read_chunk (the data registers are stored whatever the status)";
}

std::string Violation::describe() const { return fmt::format("{} at {} ({})", what, where, source); }

struct SimAsm24Bridge::Impl {
    explicit Impl(SimAsm24Bridge& owner, std::unique_ptr<pci::sim::SimDeviceModel> endpoint)
        : self(owner),
          tree(owner.options_.name, std::move(endpoint), owner.clock_ns_,
               [this](const std::string& what, const std::string& where, const std::string& source) { record(what, where, source); }) {
        ltssm = owner.options_.link_trained ? a24::kLtssmL0 : 0x00;
    }

    // A bulk data phase a request armed: a 0xF0 stream or a 0xF2 SRAM transfer.
    struct Armed {
        uint8_t endpoint;
        uint64_t bytes;
        uint64_t address;
        bool sram;
        unsigned slot;
        std::string what;
        uint64_t cq_writes_at_arm;  // SRAM reads: device writes into the CQ window before the arm
    };

    void record(const std::string& what, const std::string& where, const std::string& source) {
        std::lock_guard lock(violations_mutex);
        violations.push_back({what, where, source});
    }

    // Before interface 0 is claimed the host's USB stack refuses the request itself.
    [[noreturn]] void stall(const std::string& what, const std::string& where) {
        record(what, where, kBridgeSource);
        throw ProtocolError(self.name(), fmt::format("{}: stalled ({})", where, what));
    }
    // The firmware never stalls (main.c handle_usb_control has no STALL): a request it cannot
    // serve is dropped, and one whose data it never sends or takes ends in the host's timeout.
    void ignore(const std::string& what, const std::string& where) { record(what + " (ignored by the firmware)", where, kFirmware); }
    [[noreturn]] void give_up(const std::string& what, const std::string& where, std::chrono::milliseconds timeout,
                              const char* source = kFirmware) {
        record(what + " (never answered)", where, source);
        ++counters.timeouts;
        self.clock_ns_.fetch_add(static_cast<uint64_t>(std::chrono::nanoseconds(timeout).count()));
        throw TimeoutError(self.name(), fmt::format("{}: timed out after {} ms (LIBUSB_ERROR_TIMEOUT): {}", where, timeout.count(), what));
    }

    // Every transfer: disconnect and stall faults, then the latency model.
    void begin_transfer(const std::string& what) {
        if (gone) throw DeviceLostError(self.name(), fmt::format("{}: the bridge is gone (LIBUSB_ERROR_NO_DEVICE)", what));
        for (auto it = faults.begin(); it != faults.end(); ++it) {
            if (it->kind == FaultKind::Disconnect) {
                if (it->after == 0) {
                    gone = true;
                    faults.erase(it);
                    throw DeviceLostError(self.name(), fmt::format("{}: the bridge disconnected mid-transfer (LIBUSB_ERROR_NO_DEVICE)", what));
                }
                --it->after;
            }
        }
        if (take(FaultKind::Stall)) throw ProtocolError(self.name(), fmt::format("{}: endpoint stalled (LIBUSB_ERROR_PIPE)", what));
    }

    Fault* find(FaultKind kind) {
        for (Fault& f : faults)
            if (f.kind == kind) return &f;
        return nullptr;
    }
    bool take(FaultKind kind) {
        for (auto it = faults.begin(); it != faults.end(); ++it) {
            if (it->kind != kind) continue;
            if (--it->count == 0) faults.erase(it);
            return true;
        }
        return false;
    }
    bool link_down() const {
        for (const Fault& f : faults)
            if (f.kind == FaultKind::LinkDown) return true;
        return ltssm != a24::kLtssmL0;
    }

    uint64_t wire_ns(uint64_t bytes) const { return static_cast<uint64_t>(static_cast<double>(bytes) / self.options_.latency.bulk_bytes_per_ns); }
    void charge_control() { self.clock_ns_.fetch_add(self.options_.latency.round_trip_ns); }
    void charge_bulk_sync(uint64_t busy_ns) {
        const uint64_t start = std::max(self.clock_ns_.load(), wire_free_at);
        wire_free_at = start + busy_ns;
        self.clock_ns_.store(start + self.options_.latency.round_trip_ns + busy_ns);
    }
    uint64_t charge_bulk_async(uint64_t busy_ns) {
        // The wire is busy for the data only; the round trip overlaps with the next transfer.
        const uint64_t start = std::max(self.clock_ns_.load(), wire_free_at);
        wire_free_at = start + busy_ns;
        return start + self.options_.latency.round_trip_ns + busy_ns;
    }

    // The GPU is fast next to a 100 µs round trip: before the host sees memory the endpoint
    // writes, its engines run to idle or to a memory wait (SimDeviceModel::settle).
    // Before the host observes what the device writes (SimDeviceModel::settle). An SRAM read waits
    // for the device's trigger write, so the engines get up to a second; a BAR read (a signal the
    // host polls) a few milliseconds, since the engine may be running a kernel that waits for the
    // host's next write.
    void settle(std::chrono::milliseconds bound = std::chrono::seconds(1)) {
        if (pci::sim::SimDeviceModel* model = tree.model()) model->settle(bound);
    }
    static constexpr std::chrono::milliseconds kBarReadSettle{2};

    uint8_t xdata_read(uint16_t at) {
        if (at == a24::kXdataLtssm) return link_down() ? 0x00 : a24::kLtssmL0;
        std::lock_guard lock(tree.sram_mutex());
        if (at >= a24::kXdataBulkWindow) return static_cast<uint8_t>(tree.sram()[at - a24::kXdataBulkWindow]);
        if (at >= a24::kXdataSysBuf && at < a24::kXdataSysBuf + a24::kSmallWindowBytes) return static_cast<uint8_t>(tree.sys_buf()[at - a24::kXdataSysBuf]);
        if (at >= a24::kXdataCqBuf && uint64_t{at} - a24::kXdataCqBuf < a24::kSmallWindowBytes) return static_cast<uint8_t>(tree.cq_buf()[at - a24::kXdataCqBuf]);
        return xdata[at];
    }
    void xdata_write(uint16_t at, uint8_t v) {
        if (at == a24::kXdataLtssm) return;  // read-only status
        std::lock_guard lock(tree.sram_mutex());
        if (at >= a24::kXdataBulkWindow) {
            tree.sram()[at - a24::kXdataBulkWindow] = std::byte(v);
            return;
        }
        if (at >= a24::kXdataSysBuf && at < a24::kXdataSysBuf + a24::kSmallWindowBytes) {
            tree.sys_buf()[at - a24::kXdataSysBuf] = std::byte(v);
            return;
        }
        if (at >= a24::kXdataCqBuf && uint64_t{at} - a24::kXdataCqBuf < a24::kSmallWindowBytes) {
            tree.cq_buf()[at - a24::kXdataCqBuf] = std::byte(v);
            return;
        }
        xdata[at] = v;
    }

    void tlp_out(uint16_t value, uint16_t index, std::span<std::byte> data) {
        const std::string where = fmt::format("vendor request 0xF0 OUT (wValue {:#06x}, wIndex {:#x})", value, index);
        if (data.size() != 12) return ignore(fmt::format("TLP payload of {} bytes, expected 12", data.size()), where);
        if ((index & 3) == 3) return ignore("TLP mode 3: the firmware knows 0 (single), 1 (stream write), 2 (stream read)", where);
        // Every 0xF0 OUT resets a stream in flight ("dma_dwords = 0"); the SRAM engine is separate.
        if (pending_stream) {
            record(fmt::format("a new TLP while the {} had not moved its data: the stream is dropped", pending_stream->what), where, kFirmware);
            pending_stream.reset();
        }
        const tlp::Request r = tlp::Request::decode(value, index, std::span<const std::byte, 12>(data.data(), 12));
        const bool memory = r.fmt_type == tlp::kMRd64 || r.fmt_type == tlp::kMWr64;
        if (!memory && !tlp::is_config(r.fmt_type)) return ignore(fmt::format("unsupported TLP fmt/type {:#04x}", r.fmt_type), where);
        if (r.mode != tlp::Mode::Single) {
            const bool write = r.mode == tlp::Mode::StreamWrite;
            if (r.fmt_type != (write ? tlp::kMWr64 : tlp::kMRd64) || r.byte_enables != 0x0f) {
                return ignore(fmt::format("stream {} with fmt/type {:#04x}, byte enables {:#x}: expected {:#04x}, 0xf",
                                          write ? "write" : "read", r.fmt_type, r.byte_enables, write ? tlp::kMWr64 : tlp::kMRd64),
                              where);
            }
            if (r.value == 0 || r.address % 4 != 0) return ignore(fmt::format("stream of {} DW at {:#x}", r.value, r.address), where);
            pending_stream = Armed{write ? a24::kBulkOut : a24::kBulkIn, uint64_t{r.value} * 4, r.address, false, 0, r.describe(), 0};
            return;
        }
        ++counters.tlps;
        if (r.byte_enables == 0 || r.byte_enables > 0xf) return ignore(fmt::format("byte enables {:#x}", r.byte_enables), where);
        if (tlp::is_posted(r.fmt_type)) {
            if (memory) single_memory(r, true);
            completion.reset();
            return;
        }
        // Non-posted: the completion is latched for 0xF0 IN.
        tlp::Completion c{};
        completion_delay_ms = 0;
        if (Fault* slow = find(FaultKind::SlowCompletion)) {
            completion_delay_ms = slow->after;
            if (--slow->count == 0) faults.erase(faults.begin() + (slow - faults.data()));
        }
        if (link_down()) {
            c.transport_status = 0x01;  // nothing came back on the link
        } else if (take(FaultKind::TransportError)) {
            c.transport_status = 0x01;
        } else if (take(FaultKind::ConfigRetry)) {
            c.status = tlp::CompletionStatus::ConfigRetry;
        } else if (take(FaultKind::CompleterAbort)) {
            c.status = tlp::CompletionStatus::CompleterAbort;
        } else if (memory) {
            c = single_memory(r, false);
        } else {
            c = tree.config(r);
        }
        completion = c;
    }

    tlp::Completion single_memory(const tlp::Request& r, bool write) {
        if (r.address % 4 != 0) {
            ignore(fmt::format("memory TLP at unaligned address {:#x}", r.address), r.describe());
            return tlp::Completion{0, tlp::CompletionStatus::UnsupportedRequest, 0};
        }
        const unsigned be = r.byte_enables;
        const unsigned lane = static_cast<unsigned>(std::countr_zero(be));
        const unsigned width = static_cast<unsigned>(std::popcount(be));
        std::array<std::byte, 4> bytes{};
        if (write) {
            const uint32_t v = r.value >> (8 * lane);
            std::memcpy(bytes.data(), &v, 4);
            pcie_data = r.value;
            if (link_down() || !tree.memory_write(r.address + lane, std::span(bytes.data(), width))) {
                record("posted write that nothing claims (dropped)", r.describe(), "PCI Express Base Specification 2.3.1");
            }
            return {};
        }
        settle(kBarReadSettle);
        if (!tree.memory_read(r.address + lane, std::span(bytes.data(), width))) {
            return tlp::Completion{0, tlp::CompletionStatus::UnsupportedRequest, 0};
        }
        uint32_t v = 0;
        std::memcpy(&v, bytes.data(), 4);
        pcie_data = v << (8 * lane);
        return tlp::Completion{pcie_data, tlp::CompletionStatus::Successful, 0};
    }

    void sram_arm(uint16_t value, uint16_t index) {
        const std::string where = fmt::format("vendor request 0xF2 (wValue {:#06x}, wIndex {:#06x})", value, index);
        if (pending_sram) record(fmt::format("SRAM armed again while a {} was armed: the engine is reprogrammed", pending_sram->what), where, kFirmware);
        pending_sram.reset();
        const uint64_t sectors = value & 0x7fff;
        const bool read = (value & a24::kSramArmRead) != 0;
        const unsigned slot = index & 0xff, nslots = index >> 8;
        const uint64_t bytes = sectors * a24::kSectorBytes;
        if (sectors == 0 || nslots == 0 || slot + nslots > a24::kSramSlots || bytes > uint64_t{nslots} * a24::kSramSlotBytes) {
            return ignore(fmt::format("{} sectors into slots {}..{}: the engine has {} slots of 16 KB", sectors, slot, slot + nslots,
                                      a24::kSramSlots),
                          where);
        }
        pending_sram = Armed{read ? a24::kBulkIn : a24::kBulkOut, bytes, 0, true, slot, read ? "SRAM read" : "SRAM write", tree.cq_writes()};
    }

    // Which armed transfer a bulk transfer on `endpoint` serves: a stream first (0xF0 arms the
    // endpoint itself), else the SRAM engine.
    std::optional<Armed>* armed_for(uint8_t endpoint) {
        if (pending_stream && pending_stream->endpoint == endpoint) return &pending_stream;
        if (pending_sram && pending_sram->endpoint == endpoint) return &pending_sram;
        return nullptr;
    }

    // Modelled wire time of a bulk transfer: streams move one 8051-driven TLP per dword.
    uint64_t transfer_ns(uint8_t endpoint, uint64_t bytes) {
        std::optional<Armed>* a = armed_for(endpoint);
        if (a != nullptr && !(*a)->sram) {
            const auto& l = self.options_.latency;
            return bytes / 4 * (endpoint == a24::kBulkOut ? l.stream_write_ns_per_dword : l.stream_read_ns_per_dword);
        }
        return wire_ns(bytes);
    }

    // The data phase of an armed stream or SRAM transfer.
    void bulk_data(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout) {
        const std::string where = fmt::format("bulk {:#04x} of {} bytes", endpoint, data.size());
        if (endpoint != a24::kBulkOut && endpoint != a24::kBulkIn) give_up(fmt::format("no such endpoint {:#04x}", endpoint), where, timeout);
        std::optional<Armed>* slot = armed_for(endpoint);
        if (slot == nullptr) give_up("bulk transfer with nothing armed (no 0xF0 stream or 0xF2 before it)", where, timeout);
        if ((*slot)->bytes != data.size()) {
            give_up(fmt::format("the armed {} wants {} bytes on {:#04x}", (*slot)->what, (*slot)->bytes, (*slot)->endpoint), where, timeout);
        }
        if ((*slot)->sram && endpoint == a24::kBulkIn) {
            // The engine sends nothing until the device has written the CQ window since the arm.
            settle();
            if (tree.cq_writes() == (*slot)->cq_writes_at_arm) {
                give_up("SRAM read with no device write to PCIe 0x822000 since the arm", where, timeout, kSramTrigger);
            }
        }
        const Armed armed = **slot;
        slot->reset();
        if (armed.sram) {
            std::lock_guard lock(tree.sram_mutex());
            std::span<std::byte> s = tree.sram().subspan(armed.slot * a24::kSramSlotBytes, data.size());
            if (endpoint == a24::kBulkOut) std::memcpy(s.data(), data.data(), data.size());
            else std::memcpy(data.data(), s.data(), data.size());
            return;
        }
        counters.tlps += data.size() / 4;
        if (endpoint != a24::kBulkOut) settle(kBarReadSettle);
        if (endpoint == a24::kBulkOut) {
            std::memcpy(&pcie_data, data.data() + data.size() - 4, 4);
            if (link_down() || !tree.memory_write(armed.address, data)) {
                record(fmt::format("streamed write of {} bytes that nothing claims (dropped)", data.size()), armed.what,
                       "PCI Express Base Specification 2.3.1 (posted request, Unsupported Request)");
            }
        } else if (link_down() || !tree.memory_read(armed.address, data)) {
            // The firmware stores the data registers whatever the completion status: an unclaimed
            // read returns what they last held (stale), not all-ones.
            for (size_t i = 0; i < data.size(); i += 4) std::memcpy(data.data() + i, &pcie_data, 4);
            record(fmt::format("streamed read of {} bytes that nothing claims (stale data)", data.size()), armed.what, kPio);
        } else {
            std::memcpy(&pcie_data, data.data() + data.size() - 4, 4);
        }
    }

    SimAsm24Bridge& self;
    PcieTree tree;
    std::array<uint8_t, 65536> xdata{};
    uint8_t ltssm = 0;
    bool gone = false;
    bool claimed = false;
    std::optional<tlp::Completion> completion;
    uint64_t completion_delay_ms = 0;  // SlowCompletion: when the latched completion is ready
    uint32_t pcie_data = 0xffffffff;  // the TLP engine's data registers (REG_PCIE_DATA_0..3)
    std::optional<Armed> pending_stream, pending_sram;
    std::vector<Fault> faults;
    UsbCounters counters;
    uint64_t wire_free_at = 0;
    struct Async {
        uint64_t done_at;
        size_t bytes;
        std::optional<std::string> error;  // the failure reap reports
        bool lost = false;
    };
    std::map<Tag, Async> async;
    Tag next_tag = 1;
    mutable std::mutex violations_mutex;
    std::vector<Violation> violations;
    mutable std::mutex mutex;  // one transfer at a time, like one thread pumping libusb
};

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
    m.begin_transfer(fmt::format("bulk {:#04x} of {} bytes", endpoint, data.size()));
    (endpoint & usb::kEndpointIn ? m.counters.bulk_in : m.counters.bulk_out)++;
    (endpoint & usb::kEndpointIn ? m.counters.bytes_in : m.counters.bytes_out) += data.size();
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
    // main.c CLEAR_FEATURE(ENDPOINT_HALT): the endpoint is cleared and "dma_dwords = 0" ends a
    // stream; the SRAM engine's arm is not touched.
    if (m.pending_stream && m.pending_stream->endpoint == endpoint) m.pending_stream.reset();
}

usb::UsbBackend::Tag SimAsm24Bridge::submit_bulk(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout) {
    std::lock_guard lock(impl_->mutex);
    Impl& m = *impl_;
    const Tag tag = m.next_tag++;
    Impl::Async a{0, data.size(), std::nullopt, false};
    // The transfer runs now (the data lands at submit); its failure is latched for reap, as a
    // libusb callback would report it.
    try {
        m.begin_transfer(fmt::format("asynchronous bulk {:#04x} of {} bytes", endpoint, data.size()));
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
