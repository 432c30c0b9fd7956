// The simulated ASM2464's state, shared by the two firmwares it can run: sim_asm24.cpp (the USB
// side and tinygrad's custom firmware) and stock_firmware.cpp (ASMedia's stock firmware: SCSI over
// BOT and UAS, the XDATA TLP engine). Internal to drivers/sim/asm24.
#pragma once

#include "base/error.hpp"
#include "drivers/sim/asm24/pcie_tree.hpp"
#include "drivers/sim/asm24/sim_asm24.hpp"
#include "drivers/usb/asm24_protocol.hpp"
#include "drivers/usb/scsi.hpp"
#include "drivers/usb/tlp.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <deque>
#include <map>
#include <optional>

namespace baregpu::sim::asm24 {

namespace a24 = usb::asm24;
namespace tlp = usb::tlp;

inline constexpr const char* kBridgeSource = "tinygrad runtime/support/usb.py (the custom-firmware requests) and test/mockgpu/usb.py";
inline constexpr const char* kFirmware = "asm2464pd-firmware handmade/src/main.c handle_usb_control";
inline constexpr const char* kSramTrigger =
    "asm2464pd-firmware README.md (\"The SRAM read needs a write from the PCIe device side at 0x822000 to trigger the read\") "
    "and pcie/test_sram_verify.py (arm 0xF2 for bulk IN, SDMA-write the completion entry, then bulk IN)";
inline constexpr const char* kPio = "asm2464pd-firmware handmade/src/pcie_pio.h pcie_read_chunk (the data registers are stored whatever the status)";

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
        begin_transfer_lazy([&] { return what; });
    }
    // The same, with the transfer's description built only when something fails.
    template <class What>
    void begin_transfer_lazy(const What& what_of) {
        if (faults.empty() && !gone) return;
        const std::string what = what_of();
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

    tlp::Completion single_memory(const tlp::Request& r, bool write, bool settle_first = true) {
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
        if (settle_first) settle(kBarReadSettle);
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

    // ---- ASMedia's stock firmware: SCSI over BOT or UAS (stock_firmware.cpp) ----
    bool stock() const { return self.options_.interfaces != SimAsm24Bridge::Options::Interfaces::Custom; }
    struct ScsiOutcome {
        uint8_t status = usb::scsi::kStatusGood;
        usb::scsi::Sense sense;
        std::vector<std::byte> in;  // the data-in phase
        bool hang = false;  // CommandTimeout: the firmware never answers it
    };
    // What a CDB moves in its data phase (the device's view: Dn, Di, Do in BOT 1.0 6.7).
    struct Phase {
        enum Dir { None, In, Out } dir = None;
        uint32_t bytes = 0;
    };
    Phase phase_of(std::span<const uint8_t> cdb) const;
    // Where a SCSI command came from, described only when a rule is broken (the hot path formats nothing).
    struct ScsiWhere {
        std::span<const uint8_t> cdb;
        uint16_t tag = 0;  // UAS tag; 0 for BOT
        std::string str() const;
    };
    ScsiOutcome execute_cdb(std::span<const uint8_t> cdb, std::span<const std::byte> data_out, const ScsiWhere& where);
    void stock_xdata_write(uint16_t at, uint8_t value, const ScsiWhere& where);
    void tlp_engine_launch(const ScsiWhere& where);
    uint8_t tlp_engine_status();
    void charge_firmware(uint64_t ns);
    void stock_claim(uint8_t interface, uint8_t alt);
    size_t stock_control(uint8_t request_type, uint8_t request, uint16_t value, uint16_t index, std::span<std::byte> data,
                         std::chrono::milliseconds timeout);
    size_t bot_bulk(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout);
    Tag uas_submit(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout, uint32_t stream);
    size_t uas_reap(Tag tag);
    void uas_progress();
    void scsi_reset(const std::string& why);

    struct Stock {
        uint8_t alt = 0;  // claimed alternate setting: 0 BOT, 1 UAS
        unsigned streams = 0;
        uint64_t firmware_free_at = 0;  // the 8051 serves one command at a time
        usb::scsi::Sense sense;  // for REQUEST SENSE (BOT)
        bool hung = false;  // a command the firmware never answers, until a reset
        // BOT (Bulk-Only Transport 1.0)
        enum class BotPhase { Command, DataOut, DataIn, Status } phase = BotPhase::Command;
        bool needs_reset = false;  // an invalid CBW: both pipes stall until Reset Recovery (BOT 6.6.1)
        uint32_t cbw_tag = 0, cbw_length = 0;
        bool phase_error = false;
        std::vector<uint8_t> cdb;
        std::vector<std::byte> pending_in;
        std::array<std::byte, usb::scsi::kCswBytes> csw{};
        // The SCSI write path (tinygrad usb.py scsi_write): re-armed by XDATA 0x07EF = 0, which
        // counts only after the previous WRITE(16)'s fixups (0x0171..3 = ff, 0xCE6E..F = 0).
        bool write_armed = false;
        unsigned fixups_seen = 0;  // bit per fixup byte written since the last WRITE(16)
        bool fixups_due = false;
        // The TLP engine: a launched non-posted request is done at this modelled time (SlowCompletion).
        uint64_t tlp_done_at = 0;
        // UAS windows (the transfers submitted before the host reaps them all): a window's reads
        // are served back to back, microseconds apart, so the GPU's engines settle once per window.
        uint64_t window = 0, settled_window = UINT64_MAX;
        // UAS (T10 UAS, with USB 3 streams)
        struct Transfer {
            uint8_t endpoint = 0;
            uint32_t stream = 0;
            std::span<std::byte> data;
            std::chrono::milliseconds timeout{};
            bool done = false;
            size_t moved = 0;
            uint64_t done_at = 0;
            std::optional<std::string> error;
            bool used = false;  // claimed by a command
        };
        std::map<Tag, Transfer> transfers;
        std::deque<std::vector<std::byte>> commands;  // command-pipe IUs not yet served, in arrival order
        std::map<uint16_t, bool> hung_tags;
    };
    Stock st;

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

}  // namespace baregpu::sim::asm24
