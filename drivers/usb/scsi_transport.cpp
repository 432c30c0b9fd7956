#include "drivers/usb/scsi_transport.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <vector>

namespace baregpu::usb {

using namespace scsi_pipe;

std::string ScsiCommand::describe() const {
    std::string out = "SCSI";
    for (unsigned i = 0; i < cdb_length; ++i) out += fmt::format(" {:02X}", cdb[i]);
    return out;
}

namespace {

// A transport failure, after the recovery that kept the device usable: the same kind of error,
// naming the command and what recovered it.
[[noreturn]] void rethrow_recovered(const std::string& device, const Error& e, const ScsiCommand& command, const std::string& how) {
    const std::string message = fmt::format("{}: {} (recovered: {})", command.describe(), e.what(), how);
    if (dynamic_cast<const TimeoutError*>(&e) != nullptr) throw TimeoutError(device, message);
    throw ProtocolError(device, message);
}

class BotTransport final : public ScsiTransport {
public:
    BotTransport(UsbBackend& usb, TransferCounters& counters) : usb_(usb), counters_(counters) {}

    std::string describe() const override { return "SCSI over BOT (one command at a time)"; }

    void execute(std::span<ScsiCommand> commands) override {
        for (ScsiCommand& c : commands) run(c, true);
    }

private:
    size_t bulk(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout) {
        const bool in = (endpoint & kEndpointIn) != 0;
        ++(in ? counters_.bulk_in : counters_.bulk_out);
        const size_t moved = usb_.bulk(endpoint, data, timeout);
        (in ? counters_.bytes_in : counters_.bytes_out) += moved;
        return moved;
    }

    void run(ScsiCommand& cmd, bool sense_on_failure) {
        const uint32_t tag = ++tag_;
        const bool in = !cmd.data_in.empty();
        const size_t length = in ? cmd.data_in.size() : cmd.data_out.size();
        ++counters_.scsi_commands;
        try {
            std::array<std::byte, scsi::kCbwBytes> cbw =
                scsi::encode_cbw(tag, static_cast<uint32_t>(length), in, std::span(cmd.cdb.data(), cmd.cdb_length));
            if (const size_t sent = bulk(kDataOut, cbw, kScsiTimeout); sent != cbw.size()) {
                throw ProtocolError(usb_.name(), fmt::format("CBW: {} of 31 bytes sent", sent));
            }
            size_t moved = 0;
            if (length != 0) {
                const uint8_t endpoint = in ? kDataIn : kDataOut;
                std::span<std::byte> data = in ? cmd.data_in : std::span(const_cast<std::byte*>(cmd.data_out.data()), length);
                try {
                    moved = bulk(endpoint, data, kScsiDataTimeout);
                } catch (const ProtocolError&) {
                    // A stalled data phase: clear the halt and read the CSW, which says what
                    // happened (BOT 1.0 6.7.2, 6.7.3).
                    usb_.clear_halt(endpoint);
                }
            }
            std::array<std::byte, scsi::kCswBytes> raw{};
            size_t got = 0;
            try {
                got = bulk(kDataIn, raw, kScsiStatusTimeout);
            } catch (const ProtocolError&) {
                // A stalled CSW is read once more after clearing the halt (BOT 1.0 5.3.3, figure 2).
                usb_.clear_halt(kDataIn);
                got = bulk(kDataIn, raw, kScsiStatusTimeout);
            }
            if (got != scsi::kCswBytes) throw ProtocolError(usb_.name(), fmt::format("CSW of {} bytes, expected 13", got));
            const scsi::Csw csw = scsi::decode_csw_any_status(usb_.name(), raw, tag);
            if (csw.status == scsi::kCswPhaseError || csw.status > scsi::kCswFailed) {
                throw ProtocolError(usb_.name(), fmt::format("CSW status {} ({}), residue {}", csw.status,
                                                             csw.status == scsi::kCswPhaseError ? "phase error" : "reserved", csw.residue));
            }
            cmd.residue = std::max<uint64_t>(csw.residue, length - std::min(length, moved));
            cmd.status = csw.status == scsi::kCswPassed ? scsi::kStatusGood : scsi::kStatusCheckCondition;
        } catch (const DeviceLostError&) {
            throw;
        } catch (const Error& e) {
            reset_recovery();
            rethrow_recovered(usb_.name(), e, cmd, "Bulk-Only Mass Storage Reset and clearing both bulk pipes' halts");
        }
        if (cmd.status == scsi::kStatusCheckCondition && sense_on_failure) request_sense(cmd);
    }

    // BOT has no sense in its status: REQUEST SENSE (SPC-4 6.39, fixed format) fetches it.
    void request_sense(ScsiCommand& failed) {
        std::array<std::byte, scsi::kFixedSenseBytes> data{};
        ScsiCommand rs = ScsiCommand::of(std::array<uint8_t, 6>{0x03, 0, 0, 0, static_cast<uint8_t>(scsi::kFixedSenseBytes), 0});
        rs.data_in = data;
        run(rs, false);
        if (rs.status == scsi::kStatusGood) failed.sense = scsi::decode_sense(data);
    }

    // BOT 1.0 5.3.4: the class-specific reset, then CLEAR_FEATURE(ENDPOINT_HALT) on Bulk-In and Bulk-Out.
    void reset_recovery() {
        ++counters_.recoveries;
        try {
            ++counters_.control;
            usb_.control(scsi::kBotResetRequestType, scsi::kBotResetRequest, 0, 0, {}, kScsiTimeout);
            usb_.clear_halt(kDataIn);
            usb_.clear_halt(kDataOut);
        } catch (const DeviceLostError&) {
            throw;
        } catch (const Error&) {
            // What failed first is what the caller needs to see; the next command will tell whether the device recovered.
        }
    }

    UsbBackend& usb_;
    TransferCounters& counters_;
    uint32_t tag_ = 0;
};

class UasTransport final : public ScsiTransport {
public:
    // Commands use tags 1..depth; tag depth + 1 is kept for task management (Linux uas.c also keeps
    // tags aside of its queue depth).
    UasTransport(UsbBackend& usb, TransferCounters& counters, unsigned streams)
        : usb_(usb), counters_(counters), depth_(std::min(streams, 31u) - 1) {}

    std::string describe() const override { return fmt::format("SCSI over UAS ({} commands in flight on USB 3 streams)", depth_); }

    void execute(std::span<ScsiCommand> commands) override {
        for (size_t at = 0; at < commands.size(); at += depth_) run_window(commands.subspan(at, std::min<size_t>(depth_, commands.size() - at)));
    }

private:
    UsbBackend::Tag submit(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout, uint32_t stream) {
        const bool in = (endpoint & kEndpointIn) != 0;
        ++(in ? counters_.bulk_in : counters_.bulk_out);
        (in ? counters_.bytes_in : counters_.bytes_out) += data.size();
        return usb_.submit_bulk(endpoint, data, timeout, stream);
    }

    struct Slot {
        std::array<std::byte, scsi::kCommandIuBytes> iu{};
        std::array<std::byte, scsi::kStatusIuMax> status{};
        UsbBackend::Tag command = 0, status_tag = 0, data = 0;
    };

    void run_window(std::span<ScsiCommand> window) {
        std::vector<Slot> slots(window.size());
        // Everything goes out before anything is reaped: the firmware serves the commands in order
        // while the host's round trips overlap.
        for (size_t i = 0; i < window.size(); ++i) {
            ScsiCommand& cmd = window[i];
            const uint16_t tag = static_cast<uint16_t>(i + 1);
            ++counters_.scsi_commands;
            slots[i].iu = scsi::encode_command_iu(tag, std::span(cmd.cdb.data(), cmd.cdb_length));
            slots[i].command = submit(kCommand, slots[i].iu, kScsiTimeout, 0);
            slots[i].status_tag = submit(kStatus, slots[i].status, kScsiStatusTimeout, tag);
            if (!cmd.data_in.empty()) slots[i].data = submit(kDataIn, cmd.data_in, kScsiDataTimeout, tag);
            if (!cmd.data_out.empty()) {
                slots[i].data = submit(kDataOut, std::span(const_cast<std::byte*>(cmd.data_out.data()), cmd.data_out.size()),
                                       kScsiDataTimeout, tag);
            }
        }
        // Every transfer is reaped (each bounded by its timeout), the first failure kept.
        std::optional<std::pair<size_t, std::string>> failure;
        bool timed_out = false;
        auto reap = [&](UsbBackend::Tag t, size_t i) -> size_t {
            if (t == 0) return 0;
            try {
                return usb_.reap(t);
            } catch (const DeviceLostError&) {
                throw;
            } catch (const Error& e) {
                if (!failure) failure = {i, e.what()};
                timed_out |= dynamic_cast<const TimeoutError*>(&e) != nullptr;
                return 0;
            }
        };
        for (size_t i = 0; i < window.size(); ++i) {
            ScsiCommand& cmd = window[i];
            reap(slots[i].command, i);
            const size_t status_bytes = reap(slots[i].status_tag, i);
            const size_t moved = reap(slots[i].data, i);
            if (failure) continue;
            try {
                const scsi::Iu iu = scsi::decode_iu(usb_.name(), std::span(slots[i].status.data(), status_bytes));
                if (iu.id != scsi::IuId::Status || iu.tag != i + 1) {
                    throw ProtocolError(usb_.name(), fmt::format("status pipe stream {}: IU ID {:#04x} tag {}, expected a sense IU with tag {}",
                                                                 i + 1, uint8_t(iu.id), iu.tag, i + 1));
                }
                cmd.status = iu.status;
                if (iu.status != scsi::kStatusGood) cmd.sense = scsi::decode_sense(iu.sense);
                const size_t length = cmd.data_in.empty() ? cmd.data_out.size() : cmd.data_in.size();
                cmd.residue = length - std::min(length, moved);
            } catch (const Error& e) {
                failure = {i, e.what()};
            }
        }
        if (!failure) return;
        recover();
        const ScsiCommand& cmd = window[failure->first];
        const std::string message = fmt::format("{}: {} (recovered: LOGICAL UNIT RESET and clearing the pipes' halts)", cmd.describe(),
                                                failure->second);
        if (timed_out) throw TimeoutError(usb_.name(), message);
        throw ProtocolError(usb_.name(), message);
    }

    // Clears every pipe's halt, then a LOGICAL UNIT RESET task management function aborts whatever
    // the firmware still holds (T10 UAS 6.2.4; uas.c uas_eh_device_reset_handler does the same).
    void recover() {
        ++counters_.recoveries;
        try {
            for (uint8_t ep : {kCommand, kStatus, kDataIn, kDataOut}) {
                ++counters_.control;
                usb_.clear_halt(ep);
            }
            const uint16_t tag = static_cast<uint16_t>(depth_ + 1);
            std::array<std::byte, scsi::kTaskManagementIuBytes> tmf = scsi::encode_task_management_iu(tag, scsi::kTmfLogicalUnitReset, 0);
            std::array<std::byte, scsi::kStatusIuMax> response{};
            const UsbBackend::Tag sent = submit(kCommand, tmf, kScsiTimeout, 0);
            const UsbBackend::Tag got = submit(kStatus, response, kScsiStatusTimeout, tag);
            usb_.reap(sent);
            const size_t n = usb_.reap(got);
            const scsi::Iu iu = scsi::decode_iu(usb_.name(), std::span(response.data(), n));
            if (iu.id != scsi::IuId::Response || (iu.response != scsi::kRcTmfComplete && iu.response != scsi::kRcTmfSucceeded)) {
                throw ProtocolError(usb_.name(), fmt::format("LOGICAL UNIT RESET answered IU {:#04x} response code {:#04x}", uint8_t(iu.id),
                                                             iu.response));
            }
        } catch (const DeviceLostError&) {
            throw;
        } catch (const Error&) {
            // The first failure is what the caller sees; the next command tells whether the device recovered.
        }
    }

    UsbBackend& usb_;
    TransferCounters& counters_;
    unsigned depth_;
};

}  // namespace

std::unique_ptr<ScsiTransport> make_bot_transport(UsbBackend& usb, TransferCounters& counters) {
    return std::make_unique<BotTransport>(usb, counters);
}

std::unique_ptr<ScsiTransport> make_uas_transport(UsbBackend& usb, TransferCounters& counters, unsigned streams) {
    if (streams < 2) throw Error(usb.name(), fmt::format("UAS with {} streams: at least 2 (one command and task management)", streams));
    return std::make_unique<UasTransport>(usb, counters, streams);
}

}  // namespace baregpu::usb
