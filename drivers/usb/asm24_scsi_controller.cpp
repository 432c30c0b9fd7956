#include "drivers/usb/asm24_scsi_controller.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

namespace baregpu::usb {

using namespace asm24;

namespace {
uint64_t whole_sectors(uint64_t bytes) { return (bytes + kSectorBytes - 1) / kSectorBytes * kSectorBytes; }
std::array<std::byte, 4> be32(uint32_t v) { return {std::byte(v >> 24), std::byte(v >> 16), std::byte(v >> 8), std::byte(v)}; }
uint32_t get_be32(std::span<const std::byte> b) { return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | uint32_t(b[3]); }
// The TLP engine's registers the read-back batch covers: data at 0xB220..0xB223, the completion word at 0xB22A.
constexpr size_t kRegsBytes = kTlpCompletion + 2 - kTlpData;
constexpr unsigned kStreams = 31;  // tinygrad usb.py: 31 streams per pipe
constexpr std::chrono::milliseconds kLinkWait{1000};
}  // namespace

std::span<std::byte> Asm24ScsiController::add_read(Batch& batch, uint16_t address, size_t length) {
    // What is read is no longer known to hold what was written (the engine's data register holds completions).
    for (size_t i = 0; i < length; ++i) cache_[static_cast<uint16_t>(address + i)] = -1;
    batch.buffers.push_back(std::make_unique<std::byte[]>(length));
    std::span<std::byte> out(batch.buffers.back().get(), length);
    ScsiCommand c = ScsiCommand::of(scsi::cdb_xdata_read(address, static_cast<uint8_t>(length)));
    c.data_in = out;
    batch.commands.push_back(c);
    return out;
}

Asm24ScsiController::Asm24ScsiController(std::unique_ptr<UsbBackend> usb, BridgeProtocol protocol)
    : Bridge(std::move(usb)), protocol_(protocol) {
    cache_.fill(-1);
    if (protocol_ == BridgeProtocol::Uas) {
        usb_->claim_interface(0, 1);
        // Halts left by an earlier process, then the streams (tinygrad usb.py USB3.__init__).
        for (uint8_t ep : {scsi_pipe::kDataOut, scsi_pipe::kDataIn, scsi_pipe::kStatus, scsi_pipe::kCommand}) usb_->clear_halt(ep);
        const std::array<uint8_t, 3> stream_pipes{scsi_pipe::kDataOut, scsi_pipe::kDataIn, scsi_pipe::kStatus};
        const unsigned streams = usb_->alloc_streams(kStreams, stream_pipes);
        if (streams >= 2) {
            transport_ = make_uas_transport(*usb_, counters_, streams);
        } else {
            // No streams (a USB 2 link, or a host controller without them): BOT on alternate setting 0.
            usb_->release_interface(0);
            usb_->claim_interface(0, 0);
            protocol_ = BridgeProtocol::Bot;
        }
    } else {
        usb_->claim_interface(0, 0);
    }
    if (!transport_) transport_ = make_bot_transport(*usb_, counters_);
    Batch init;
    for (const XdataInit& w : kStockInit) add_write(init, w.address, std::as_bytes(std::span(w.bytes, w.length)), false);
    run(init);
}

std::string Asm24ScsiController::firmware() const { return "stock firmware, " + transport_->describe(); }

void Asm24ScsiController::run(Batch& batch) {
    if (batch.commands.empty()) return;
    transport_->execute(batch.commands);
    for (const ScsiCommand& c : batch.commands) {
        // tinygrad usb.py accepts a failed status for WRITE(16) alone: the patched firmware's write
        // handler exits with code 5 once the data sits in the SRAM (extra/usbgpu/patch.py).
        if (c.status != scsi::kStatusGood && c.cdb[0] != scsi::kOpWrite16) {
            throw ProtocolError(name(), fmt::format("{}: status {:#04x} ({}), sense {}", c.describe(), c.status,
                                                    c.status == scsi::kStatusCheckCondition ? "CHECK CONDITION" : "not GOOD",
                                                    scsi::describe(c.sense)));
        }
        if (c.cdb[0] == scsi::kOpXdataRead && c.residue != 0) {
            throw ProtocolError(name(), fmt::format("{}: XDATA read returned {} of {} bytes", c.describe(), c.data_in.size() - c.residue,
                                                    c.data_in.size()));
        }
    }
}

void Asm24ScsiController::add_write(Batch& batch, uint16_t address, std::span<const std::byte> data, bool cached) {
    for (size_t i = 0; i < data.size(); ++i) {
        const uint16_t at = static_cast<uint16_t>(address + i);
        const uint8_t v = static_cast<uint8_t>(data[i]);
        if (cached && cache_[at] == v) continue;
        cache_[at] = cached ? v : -1;
        batch.commands.push_back(ScsiCommand::of(scsi::cdb_xdata_write(at, v)));
    }
}

void Asm24ScsiController::xdata_read(uint16_t address, std::span<std::byte> out) {
    Batch batch;
    std::vector<std::span<std::byte>> parts;
    for (size_t done = 0; done < out.size(); done += kXdataReadMax) {
        const size_t n = std::min<size_t>(kXdataReadMax, out.size() - done);
        parts.push_back(add_read(batch, static_cast<uint16_t>(address + done), n));
    }
    run(batch);
    size_t at = 0;
    for (std::span<std::byte> p : parts) {
        std::memcpy(out.data() + at, p.data(), p.size());
        at += p.size();
    }
}

void Asm24ScsiController::xdata_write(uint16_t address, std::span<const std::byte> data) {
    Batch batch;
    add_write(batch, address, data, false);
    run(batch);
}

void Asm24ScsiController::bring_link_up() {
    // The stock firmware trains the link on its own at power-on (it has no 0xF3 request): wait a
    // bounded while for L0.
    const auto deadline = usb_->now() + std::chrono::nanoseconds(kLinkWait);
    uint8_t state = xdata_read8(kXdataLtssm);
    while (state != kLtssmL0 && usb_->now() < deadline) {
        usb_->sleep(std::chrono::milliseconds(10));
        state = xdata_read8(kXdataLtssm);
    }
    if (state != kLtssmL0) {
        throw DeviceLostError(name(), fmt::format("PCIe link not up after {} ms: LTSSM state {:#04x} at XDATA {:#06x}, expected {:#04x} "
                                                  "(L0); is the GPU seated and powered?",
                                                  kLinkWait.count(), state, kXdataLtssm, kLtssmL0));
    }
}

void Asm24ScsiController::add_tlp(Batch& batch, const tlp::Request& request) {
    const bool with_data = request.fmt_type == tlp::kMWr64 || tlp::is_config_write(request.fmt_type);
    if (with_data) add_write(batch, kTlpData, be32(request.value), true);
    add_write(batch, kTlpAddressLow, be32(static_cast<uint32_t>(request.address & ~uint64_t{3})), true);
    add_write(batch, kTlpAddressHigh, be32(static_cast<uint32_t>(request.address >> 32)), true);
    const std::byte be{request.byte_enables}, fmt{request.fmt_type}, arm{kTlpArmValue}, launch{kTlpLaunch};
    add_write(batch, kTlpByteEnables, std::span(&be, 1), true);
    add_write(batch, kTlpFmtType, std::span(&fmt, 1), true);
    add_write(batch, kTlpArm, std::span(&arm, 1), false);
    add_write(batch, kTlpStatus, std::span(&launch, 1), false);
}

uint32_t Asm24ScsiController::complete(const tlp::Request& request, std::span<const std::byte> flags, std::span<const std::byte> regs,
                                       bool& retry) {
    retry = false;
    const uint16_t word = static_cast<uint16_t>(uint16_t(regs[kTlpCompletion - kTlpData]) << 8 | uint16_t(regs[kTlpCompletion + 1 - kTlpData]));
    const auto cs = static_cast<tlp::CompletionStatus>((word >> 13) & 7);
    const unsigned count = word & 0xfff;
    const bool config = tlp::is_config(request.fmt_type);
    const unsigned expected = config ? 4 : static_cast<unsigned>(std::popcount(request.byte_enables));
    if (cs == tlp::CompletionStatus::ConfigRetry) {
        retry = true;
        return 0;
    }
    if (cs != tlp::CompletionStatus::Successful) {
        throw ProtocolError(name(), fmt::format("{}: completion status {}, expected Successful Completion (SC)", request.describe(),
                                                tlp::describe(cs)));
    }
    // The engine's completion checks (usb.py pcie_request): a byte count of 4 for config requests,
    // the request's size for memory reads; data with a config read and none with a config write.
    if (count != expected) {
        throw ProtocolError(name(), fmt::format("{}: completion byte count {} at XDATA {:#06x}, expected {}", request.describe(), count,
                                                kTlpCompletion, expected));
    }
    const bool has_data = (uint8_t(flags[0]) & 1) != 0;
    if (config && has_data != !tlp::is_config_write(request.fmt_type)) {
        throw ProtocolError(name(), fmt::format("{}: completion {} data (XDATA {:#06x} = {:#04x}), expected {}", request.describe(),
                                                has_data ? "with" : "without", kTlpCompletionHasData, uint8_t(flags[0]),
                                                has_data ? "none" : "data"));
    }
    return get_be32(regs.subspan(0, 4));
}

uint32_t Asm24ScsiController::single_tlp(const tlp::Request& request) {
    if (request.mode != tlp::Mode::Single) throw Error(name(), fmt::format("{}: the TLP engine sends single TLPs only", request.describe()));
    for (unsigned attempt = 0;; ++attempt) {
        Batch batch;
        add_tlp(batch, request);
        if (tlp::is_posted(request.fmt_type)) {
            run(batch);
            return 0;
        }
        // The launch and a first look at the result in one batch: when the engine is done by the
        // time the status read is served, the completion registers read after it are current.
        std::span<std::byte> status = add_read(batch, kTlpStatus, 1);
        std::span<std::byte> flags = add_read(batch, kTlpCompletionHasData, 1);
        std::span<std::byte> regs = add_read(batch, kTlpData, kRegsBytes);
        run(batch);
        uint8_t st = static_cast<uint8_t>(status[0]);
        std::vector<std::byte> keep_flags(flags.begin(), flags.end()), keep_regs(regs.begin(), regs.end());
        // Not done yet: poll the status register (bounded), then read the completion.
        const auto deadline = usb_->now() + std::chrono::nanoseconds(kTlpTimeout);
        while ((st & (kTlpDone | kTlpError)) == 0) {
            if (usb_->now() >= deadline) {
                throw TimeoutError(name(), fmt::format("{}: the TLP engine never finished (XDATA {:#06x} = {:#04x} for {} ms)", request.describe(),
                                                       kTlpStatus, st, kTlpTimeout.count()));
            }
            st = xdata_read8(kTlpStatus);
            if ((st & kTlpDone) != 0) {
                xdata_read(kTlpCompletionHasData, keep_flags);
                xdata_read(kTlpData, keep_regs);
            }
        }
        bool retry = (st & kTlpError) != 0;
        uint32_t data = 0;
        if (retry) {
            const std::byte clear{kTlpError};
            xdata_write(kTlpStatus, std::span(&clear, 1));
        } else {
            data = complete(request, keep_flags, keep_regs, retry);
        }
        if (!retry) return data;
        if (attempt + 1 >= kTlpRetries) {
            throw ProtocolError(name(), fmt::format("{}: no completion after {} tries (last: XDATA {:#06x} = {:#04x})", request.describe(),
                                                    kTlpRetries, kTlpStatus, st));
        }
        ++counters_.tlp_retries;
        usb_->sleep(kTlpRetryDelay);
    }
}

void Asm24ScsiController::mem_write(uint64_t address, std::span<const std::byte> data) {
    if (address % 4 != 0 || data.size() % 4 != 0 || data.empty()) {
        throw Error(name(), fmt::format("memory write of {} bytes at {:#x}: address and size must be non-zero dword multiples", data.size(),
                                        address));
    }
    Batch batch;
    for (size_t at = 0; at < data.size(); at += 4) {
        uint32_t v = 0;
        std::memcpy(&v, data.data() + at, 4);
        add_tlp(batch, tlp::Request{tlp::kMWr64, 0x0F, tlp::Mode::Single, address + at, v});
        if ((at / 4 + 1) % kTlpsPerBatch == 0) {
            run(batch);
            batch.commands.clear();
        }
    }
    run(batch);
}

void Asm24ScsiController::mem_read(uint64_t address, std::span<std::byte> out) {
    if (address % 4 != 0 || out.size() % 4 != 0 || out.empty()) {
        throw Error(name(), fmt::format("memory read of {} bytes at {:#x}: address and size must be non-zero dword multiples", out.size(),
                                        address));
    }
    // Several reads per batch, each launched and then looked at (status, flag, completion) in the
    // same batch: the firmware serves commands in order, so what it reads back after a launch is
    // that TLP's completion once the status says done. A read not done by then goes through
    // single_tlp's polling.
    constexpr size_t kReadsPerBatch = 5;  // about 6 commands each: one UAS window
    for (size_t at = 0; at < out.size(); at += 4 * kReadsPerBatch) {
        const size_t n = std::min(kReadsPerBatch, (out.size() - at) / 4);
        Batch batch;
        struct Slot {
            tlp::Request request;
            std::span<std::byte> status, flags, regs;
        };
        std::array<Slot, kReadsPerBatch> slots;
        for (size_t i = 0; i < n; ++i) {
            Slot& sl = slots[i];
            sl.request = tlp::Request{tlp::kMRd64, 0x0F, tlp::Mode::Single, address + at + 4 * i, 0};
            add_tlp(batch, sl.request);
            sl.status = add_read(batch, kTlpStatus, 1);
            sl.flags = add_read(batch, kTlpCompletionHasData, 1);
            sl.regs = add_read(batch, kTlpData, kRegsBytes);
        }
        run(batch);
        for (size_t i = 0; i < n; ++i) {
            const Slot& sl = slots[i];
            uint32_t v = 0;
            bool retry = (uint8_t(sl.status[0]) & kTlpDone) == 0;
            if (!retry) v = complete(sl.request, sl.flags, sl.regs, retry);
            if (retry) v = single_tlp(sl.request);  // not done yet, an error or CRS: the bounded path
            std::memcpy(out.data() + at + 4 * i, &v, 4);
        }
    }
}

void Asm24ScsiController::sram_write(uint64_t offset, std::span<const std::byte> data) {
    if (offset % kSectorBytes != 0 || offset + whole_sectors(data.size()) > kSramBytes || data.empty()) {
        throw Error(name(), fmt::format("SRAM write of {} bytes at offset {:#x}: whole 512-byte sectors inside the {} KB SRAM", data.size(),
                                        offset, kSramBytes / 1024));
    }
    const size_t wire = whole_sectors(data.size());
    Batch batch;
    batch.buffers.push_back(std::make_unique<std::byte[]>(wire));
    std::byte* image = batch.buffers.back().get();
    std::memcpy(image, data.data(), data.size());
    std::memset(image + data.size(), 0, wire - data.size());
    static constexpr std::byte kZero{0};
    static constexpr std::byte kOnes[3] = {std::byte{0xff}, std::byte{0xff}, std::byte{0xff}};
    static constexpr std::byte kZeros[4] = {};
    for (size_t done = 0; done < wire; done += scsi::kMaxWriteBytes) {
        const size_t n = std::min<size_t>(scsi::kMaxWriteBytes, wire - done);
        add_write(batch, kScsiWriteRearm, std::span(&kZero, 1), false);
        ScsiCommand w = ScsiCommand::of(scsi::cdb_sram_write((offset + done) / kSectorBytes, static_cast<uint32_t>(n / kSectorBytes)));
        w.data_out = std::span<const std::byte>(image + done, n);
        batch.commands.push_back(w);
        add_write(batch, kScsiWriteDone, kOnes, false);
        add_write(batch, kScsiWriteClear, std::span(kZeros, 2), false);
    }
    if (wire > kScsiWriteLarge) add_write(batch, kScsiWriteLargeClear, kZeros, false);
    run(batch);
}

void Asm24ScsiController::sram_read_arm(uint64_t, uint64_t) {
    throw UnsupportedError(name(), "the stock firmware has no SRAM read engine (sram_access().readable is false): read device memory "
                                   "through TLPs");
}

void Asm24ScsiController::sram_read_data(std::span<std::byte>) { sram_read_arm(0, 0); }

}  // namespace baregpu::usb
