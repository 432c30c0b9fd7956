// ScsiTransport: SCSI commands to the bridge's stock firmware over USB mass storage — Bulk-Only
// Transport (USB Mass Storage Class Bulk-Only Transport 1.0) or USB Attached SCSI with USB 3
// streams (T10 UAS; the host side as Linux drivers/usb/storage/uas.c). Both check what comes back
// (CSW signature, tag and status; IU IDs and tags) and recover from a stall or a timeout without
// losing the device: BOT with reset recovery (BOT 1.0 5.3.4), UAS with a LOGICAL UNIT RESET task
// management function. Endpoints are tinygrad usb.py's for the ASM2464 (data in 0x81, data out
// 0x02, status 0x83, command 0x04).
#pragma once

#include "drivers/usb/bridge.hpp"
#include "drivers/usb/scsi.hpp"
#include "drivers/usb/usb_backend.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace baregpu::usb {

struct ScsiCommand {
    std::array<uint8_t, 16> cdb{};
    uint8_t cdb_length = 0;
    std::span<std::byte> data_in;  // filled by a command that reads
    std::span<const std::byte> data_out;  // sent by a command that writes
    // Out: the SCSI status (GOOD 0x00, CHECK CONDITION 0x02) and, on CHECK CONDITION, the sense.
    uint8_t status = 0;
    scsi::Sense sense;
    uint64_t residue = 0;  // bytes of the data phase the device did not move

    template <size_t N>
    static ScsiCommand of(const std::array<uint8_t, N>& cdb) {
        ScsiCommand c;
        std::copy(cdb.begin(), cdb.end(), c.cdb.begin());
        c.cdb_length = static_cast<uint8_t>(N);
        return c;
    }
    std::string describe() const;  // "SCSI E4 05 00 B2 96 00"
};

namespace scsi_pipe {
inline constexpr uint8_t kDataIn = 0x81, kDataOut = 0x02, kStatus = 0x83, kCommand = 0x04;
}

class ScsiTransport {
public:
    virtual ~ScsiTransport() = default;
    virtual std::string describe() const = 0;  // "SCSI over UAS (30 commands in flight)"
    // Runs the commands in order (UAS: several in flight at once, the firmware serves them in
    // order). A command the device completes with CHECK CONDITION returns with its status and
    // sense; a transport failure (stall, timeout, a malformed CSW or IU) is recovered from and
    // then thrown, naming the command.
    virtual void execute(std::span<ScsiCommand> commands) = 0;
};

// BOT on interface 0 alternate setting 0 (already claimed).
std::unique_ptr<ScsiTransport> make_bot_transport(UsbBackend& usb, TransferCounters& counters);
// UAS on interface 0 alternate setting 1 (already claimed), with `streams` streams per pipe (>= 2).
std::unique_ptr<ScsiTransport> make_uas_transport(UsbBackend& usb, TransferCounters& counters, unsigned streams);

// The timeouts: tinygrad usb.py's 1 s per transfer (2 s for a CSW), 10 s for the bulk data of a
// large write.
inline constexpr std::chrono::milliseconds kScsiTimeout{1000};
inline constexpr std::chrono::milliseconds kScsiStatusTimeout{2000};
inline constexpr std::chrono::milliseconds kScsiDataTimeout{10000};

}  // namespace baregpu::usb
