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
}

std::string Violation::describe() const { return fmt::format("{} at {} ({})", what, where, source); }

struct SimAsm24Bridge::Impl {
    explicit Impl(SimAsm24Bridge& owner, std::unique_ptr<pci::sim::SimDeviceModel> endpoint)
        : self(owner),
          tree(owner.options_.name, std::move(endpoint), owner.clock_ns_,
               [this](const std::string& what, const std::string& where, const std::string& source) { record(what, where, source); }) {
        ltssm = owner.options_.link_trained ? a24::kLtssmL0 : 0x00;
    }

    void record(const std::string& what, const std::string& where, const std::string& source) {
        std::lock_guard lock(violations_mutex);
        violations.push_back({what, where, source});
    }

    // What the firmware does with a request it does not accept: stall EP0 / the bulk endpoint.
    [[noreturn]] void stall(const std::string& what, const std::string& where) {
        record(what, where, kBridgeSource);
        throw ProtocolError(self.name(), fmt::format("{}: stalled ({})", where, what));
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
    void charge_bulk_sync(uint64_t bytes) {
        const uint64_t start = std::max(self.clock_ns_.load(), wire_free_at);
        wire_free_at = start + wire_ns(bytes);
        self.clock_ns_.store(start + self.options_.latency.round_trip_ns + wire_ns(bytes));
    }
    uint64_t charge_bulk_async(uint64_t bytes) {
        // The wire is busy for the data only; the round trip overlaps with the next transfer.
        const uint64_t start = std::max(self.clock_ns_.load(), wire_free_at);
        wire_free_at = start + wire_ns(bytes);
        return start + self.options_.latency.round_trip_ns + wire_ns(bytes);
    }

    // The GPU is fast next to a 100 µs round trip: before the host sees memory the endpoint
    // writes, its engines run to idle or to a memory wait (SimDeviceModel::settle).
    void settle() {
        if (pci::sim::SimDeviceModel* model = tree.model()) model->settle();
    }

    uint8_t xdata_read(uint16_t at) {
        if (at == a24::kXdataLtssm) return link_down() ? 0x00 : a24::kLtssmL0;
        std::lock_guard lock(tree.sram_mutex());
        if (at >= a24::kXdataSysBuf && at < a24::kXdataSysBuf + a24::kSmallWindowBytes) return static_cast<uint8_t>(tree.sys_buf()[at - a24::kXdataSysBuf]);
        if (at >= a24::kXdataCqBuf && uint64_t{at} - a24::kXdataCqBuf < a24::kSmallWindowBytes) return static_cast<uint8_t>(tree.cq_buf()[at - a24::kXdataCqBuf]);
        return xdata[at];
    }
    void xdata_write(uint16_t at, uint8_t v) {
        if (at == a24::kXdataLtssm) return;  // read-only status
        std::lock_guard lock(tree.sram_mutex());
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
        if (data.size() != 12) stall(fmt::format("TLP payload of {} bytes, expected 12", data.size()), where);
        if (index > 2) stall(fmt::format("TLP mode {}: the firmware knows 0 (single), 1 (stream write), 2 (stream read)", index), where);
        if (pending_bulk) stall(fmt::format("a new TLP while a {} is armed and its bulk transfer has not come", pending_bulk->what), where);
        const tlp::Request r = tlp::Request::decode(value, index, std::span<const std::byte, 12>(data.data(), 12));
        const bool memory = r.fmt_type == tlp::kMRd64 || r.fmt_type == tlp::kMWr64;
        if (!memory && !tlp::is_config(r.fmt_type)) stall(fmt::format("unsupported TLP fmt/type {:#04x}", r.fmt_type), where);
        ++counters.tlps;
        if (r.mode != tlp::Mode::Single) {
            const bool write = r.mode == tlp::Mode::StreamWrite;
            if (r.fmt_type != (write ? tlp::kMWr64 : tlp::kMRd64) || r.byte_enables != 0x0f) {
                stall(fmt::format("stream {} with fmt/type {:#04x}, byte enables {:#x}: expected {:#04x}, 0xf", write ? "write" : "read",
                                  r.fmt_type, r.byte_enables, write ? tlp::kMWr64 : tlp::kMRd64),
                      where);
            }
            if (r.value == 0 || r.address % 4 != 0) stall(fmt::format("stream of {} DW at {:#x}", r.value, r.address), where);
            pending_bulk = Armed{write ? a24::kBulkOut : a24::kBulkIn, uint64_t{r.value} * 4, r.address, false, 0,
                                 r.describe()};
            return;
        }
        if (r.byte_enables == 0 || r.byte_enables > 0xf) stall(fmt::format("byte enables {:#x}", r.byte_enables), where);
        if (tlp::is_posted(r.fmt_type)) {
            if (memory) single_memory(r, true);
            completion.reset();
            return;
        }
        // Non-posted: the completion is latched for 0xF0 IN.
        tlp::Completion c{};
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
        if (r.address % 4 != 0) stall(fmt::format("memory TLP at unaligned address {:#x}", r.address), r.describe());
        const unsigned be = r.byte_enables;
        const unsigned lane = static_cast<unsigned>(std::countr_zero(be));
        const unsigned width = static_cast<unsigned>(std::popcount(be));
        std::array<std::byte, 4> bytes{};
        if (write) {
            const uint32_t v = r.value >> (8 * lane);
            std::memcpy(bytes.data(), &v, 4);
            if (link_down() || !tree.memory_write(r.address + lane, std::span(bytes.data(), width))) {
                record("posted write that nothing claims (dropped)", r.describe(), "PCI Express Base Specification 2.3.1");
            }
            return {};
        }
        if (!tree.memory_read(r.address + lane, std::span(bytes.data(), width))) {
            return tlp::Completion{0, tlp::CompletionStatus::UnsupportedRequest, 0};
        }
        uint32_t v = 0;
        std::memcpy(&v, bytes.data(), 4);
        return tlp::Completion{v << (8 * lane), tlp::CompletionStatus::Successful, 0};
    }

    void sram_arm(uint16_t value, uint16_t index) {
        const std::string where = fmt::format("vendor request 0xF2 (wValue {:#06x}, wIndex {:#06x})", value, index);
        if (pending_bulk) stall(fmt::format("SRAM armed while a {} is still armed", pending_bulk->what), where);
        const uint64_t sectors = value & 0x7fff;
        const bool read = (value & a24::kSramArmRead) != 0;
        const unsigned slot = index & 0xff, nslots = index >> 8;
        const uint64_t bytes = sectors * a24::kSectorBytes;
        if (sectors == 0 || nslots == 0 || slot + nslots > a24::kSramSlots || bytes > uint64_t{nslots} * a24::kSramSlotBytes) {
            stall(fmt::format("{} sectors into slots {}..{}: the engine has {} slots of 16 KB", sectors, slot, slot + nslots, a24::kSramSlots),
                  where);
        }
        pending_bulk = Armed{read ? a24::kBulkIn : a24::kBulkOut, bytes, 0, true, slot, read ? "SRAM read" : "SRAM write"};
    }

    // The data phase of an armed stream or SRAM transfer.
    void bulk_data(uint8_t endpoint, std::span<std::byte> data) {
        const std::string where = fmt::format("bulk {:#04x} of {} bytes", endpoint, data.size());
        if (endpoint != a24::kBulkOut && endpoint != a24::kBulkIn) stall(fmt::format("no such endpoint {:#04x}", endpoint), where);
        if (!pending_bulk) stall("bulk transfer with nothing armed (no 0xF0 stream or 0xF2 before it)", where);
        Armed armed = *pending_bulk;
        pending_bulk.reset();
        if (armed.endpoint != endpoint || armed.bytes != data.size()) {
            stall(fmt::format("the armed {} wants {} bytes on {:#04x}", armed.what, armed.bytes, armed.endpoint), where);
        }
        if (armed.sram) {
            if (endpoint == a24::kBulkIn) settle();
            std::lock_guard lock(tree.sram_mutex());
            std::span<std::byte> s = tree.sram().subspan(armed.slot * a24::kSramSlotBytes, data.size());
            if (endpoint == a24::kBulkOut) std::memcpy(s.data(), data.data(), data.size());
            else std::memcpy(data.data(), s.data(), data.size());
            return;
        }
        if (endpoint == a24::kBulkOut) {
            if (link_down() || !tree.memory_write(armed.address, data)) {
                record(fmt::format("streamed write of {} bytes that nothing claims (dropped)", data.size()), armed.what,
                       "PCI Express Base Specification 2.3.1 (posted request, Unsupported Request)");
            }
        } else if (link_down() || !tree.memory_read(armed.address, data)) {
            // A read nobody completes returns all-ones to the requester (PCIe 2.3.2 / a master abort).
            std::memset(data.data(), 0xff, data.size());
            record(fmt::format("streamed read of {} bytes that nothing claims (all-ones)", data.size()), armed.what,
                   "PCI Express Base Specification 2.3.1 (Unsupported Request)");
        }
    }

    SimAsm24Bridge& self;
    PcieTree tree;
    std::array<uint8_t, 65536> xdata{};
    uint8_t ltssm = 0;
    bool gone = false;
    bool claimed = false;
    std::optional<tlp::Completion> completion;
    struct Armed {
        uint8_t endpoint;
        uint64_t bytes;
        uint64_t address;
        bool sram;
        unsigned slot;
        std::string what;
    };
    std::optional<Armed> pending_bulk;
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
                               std::chrono::milliseconds) {
    std::lock_guard lock(impl_->mutex);
    Impl& m = *impl_;
    const std::string where = fmt::format("vendor request {:#04x} (bmRequestType {:#04x}, wValue {:#06x}, wIndex {:#06x})", request,
                                          request_type, value, index);
    m.begin_transfer(where);
    ++m.counters.control;
    m.charge_control();
    if (!m.claimed) m.stall("vendor request before interface 0 was claimed", where);
    if (request_type == usb::kVendorIn && request == a24::kReqXdataRead) {
        if (data.empty() || data.size() > a24::kXdataReadMax || value + data.size() > m.xdata.size()) {
            m.stall(fmt::format("XDATA read of {} bytes at {:#06x} (1..255 bytes per request)", data.size(), value), where);
        }
        if (value >= a24::kXdataSysBuf && value < a24::kXdataBulkWindow) m.settle();  // the host reads GPU-written SRAM
        for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(m.xdata_read(static_cast<uint16_t>(value + i)));
        return data.size();
    }
    if (request_type == usb::kVendorOut && request == a24::kReqXdataWrite) {
        if (!data.empty() || index > 0xff) m.stall("XDATA write carries one byte in wIndex and no data stage", where);
        m.xdata_write(value, static_cast<uint8_t>(index));
        return 0;
    }
    if (request_type == usb::kVendorOut && request == a24::kReqTlp) {
        m.tlp_out(value, index, data);
        return data.size();
    }
    if (request_type == usb::kVendorIn && request == a24::kReqTlp) {
        if (data.size() != 8) m.stall(fmt::format("completion read of {} bytes, expected 8", data.size()), where);
        if (!m.completion) m.stall("completion read with no non-posted TLP outstanding", where);
        const std::array<std::byte, 8> bytes = tlp::encode_completion(*m.completion);
        std::memcpy(data.data(), bytes.data(), 8);
        m.completion.reset();
        return 8;
    }
    if (request_type == usb::kVendorOut && request == a24::kReqSramArm) {
        m.sram_arm(value, index);
        return 0;
    }
    if (request_type == usb::kVendorOut && request == a24::kReqPciePower) {
        if (value > 1) m.stall("PCIe power takes wValue 1 (on) or 0 (off)", where);
        m.ltssm = value == 1 ? a24::kLtssmL0 : 0x00;
        return 0;
    }
    m.stall("unknown vendor request", where);
}

std::optional<SimAsm24Bridge::ArmedTransfer> SimAsm24Bridge::armed() const {
    std::lock_guard lock(impl_->mutex);
    if (!impl_->pending_bulk) return std::nullopt;
    return ArmedTransfer{impl_->pending_bulk->endpoint, impl_->pending_bulk->bytes};
}

size_t SimAsm24Bridge::bulk(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds) {
    std::lock_guard lock(impl_->mutex);
    Impl& m = *impl_;
    m.begin_transfer(fmt::format("bulk {:#04x} of {} bytes", endpoint, data.size()));
    (endpoint & usb::kEndpointIn ? m.counters.bulk_in : m.counters.bulk_out)++;
    (endpoint & usb::kEndpointIn ? m.counters.bytes_in : m.counters.bytes_out) += data.size();
    m.charge_bulk_sync(data.size());
    m.bulk_data(endpoint, data);
    return data.size();
}

usb::UsbBackend::Tag SimAsm24Bridge::submit_bulk(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds) {
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
        a.done_at = m.charge_bulk_async(data.size());
        m.bulk_data(endpoint, data);
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
