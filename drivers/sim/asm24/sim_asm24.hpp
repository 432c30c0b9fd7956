// A simulated ASM2464 bridge running tinygrad's custom firmware or ASMedia's stock firmware
// (SCSI over UAS or BOT: stock_firmware.cpp), seen through the UsbBackend seam: the vendor requests (tinygrad usb.py), the TLP engine, the SRAM bulk engine and windows
// (tinygrad system.py USBPCIDevice), a PCIe tree of four bridge headers on buses 0..3 with one
// endpoint (a drivers/sim model, e.g. the simulated Navi) at 04:00.0, a per-transfer latency model in
// modelled time, and faults. The rules are the custom firmware's own (tinygrad/asm2464pd-firmware
// handmade/src/main.c, pcie_pio.h): it never stalls a request, it answers what it can and leaves
// the rest to the host's timeout; what a driver should not rely on is recorded as a violation.
#pragma once

#include "drivers/pci/sim_device_model.hpp"
#include "drivers/usb/usb_backend.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::sim::asm24 {

// Modelled costs (Options::latency changes them). The round trip is assumed; the rates are the
// firmware author's measurements (asm2464pd-firmware README.md).
struct Latency {
    uint64_t round_trip_ns = 100'000;
    // The 0xF2 SRAM engine: "700 MB/s read+write on 10 Gbps USB3".
    double bulk_bytes_per_ns = 0.7;
    // 0xF0 streams are 8051 programmed I/O, one single-dword TLP per dword (pcie_pio.h
    // pcie_write_chunk / pcie_read_chunk): "3.6 MB/s write, 1.8 MB/s read".
    uint64_t stream_write_ns_per_dword = 1'111;
    uint64_t stream_read_ns_per_dword = 2'222;
    // The stock firmware (SCSI). A command without a data phase (0xE4 / 0xE5) costs the 8051 this
    // long (assumed; no measurement is public). A WRITE(16) costs 0.4 ms for its first 4 KiB (the
    // figure reported for one 4 KiB SCSI write to a stock-firmware bridge, taken as the cost of one
    // command) and the rest at bulk_bytes_per_ns.
    uint64_t scsi_command_ns = 20'000;
    uint64_t scsi_write_command_ns = 400'000;
};

enum class FaultKind {
    Stall,  // the next `count` transfers stall (libusb: LIBUSB_ERROR_PIPE)
    Disconnect,  // after `after` more transfers the device is gone: that transfer and every later one fail
    CompleterAbort,  // the next `count` non-posted TLPs complete with CA
    ConfigRetry,  // the next `count` non-posted TLPs complete with CRS
    TransportError,  // the next `count` non-posted TLPs report a transport error (byte 7 of the completion)
    LinkDown,  // LTSSM leaves L0 and stays down: TLPs fail in transport, stream reads return stale data
    SlowCompletion,  // the next `count` non-posted TLPs complete only after `after` ms (a slow completer)
    CommandTimeout,  // stock firmware: the next SCSI command is never answered, and nothing after it, until a reset
};

struct Fault {
    FaultKind kind = FaultKind::Stall;
    uint64_t count = 1;
    uint64_t after = 0;  // Disconnect: transfers before it; SlowCompletion: milliseconds
};

struct Violation {
    std::string what;
    std::string where;
    std::string source;
    std::string describe() const;
};

struct UsbCounters {
    uint64_t control = 0;
    uint64_t bulk_out = 0;
    uint64_t bulk_in = 0;
    uint64_t bytes_out = 0;
    uint64_t bytes_in = 0;
    uint64_t tlps = 0;  // TLPs put on the PCIe link (a stream counts one per dword, as the firmware sends them)
    uint64_t timeouts = 0;  // transfers the firmware never answered (the host's timeout ran out)
    uint64_t total() const { return control + bulk_out + bulk_in; }
};

class SimAsm24Bridge final : public usb::UsbBackend {
public:
    struct Options {
        std::string name = "usb:sim";
        Latency latency;
        uint16_t vendor_id = 0x3801;
        uint16_t product_id = 0x0001;
        std::string product = "custom ASM2464 (simulated)";
        // Custom: tinygrad's custom firmware (vendor requests). Uas / Bot: ASMedia's stock firmware
        // (mass storage: BOT at alternate setting 0, and UAS at 1 for Uas), driven by SCSI
        // commands (stock_firmware.cpp).
        enum class Interfaces { Custom, Uas, Bot } interfaces = Interfaces::Custom;
        bool link_trained = false;  // LTSSM in L0 at power-on (false: the driver must send 0xF3)
        // A USB 2 fallback: the firmware answers at most 64 bytes of a 0xE4 read (main.c, is_usb2).
        bool usb2 = false;
    };

    // `endpoint` sits at 04:00.0 behind the four bridge headers; may be null (an empty slot).
    SimAsm24Bridge(Options options, std::unique_ptr<pci::sim::SimDeviceModel> endpoint);
    ~SimAsm24Bridge() override;

    // UsbBackend
    const std::string& name() const override { return options_.name; }
    usb::DeviceDescriptor descriptor() override;
    void claim_interface(uint8_t interface, uint8_t alt_setting) override;
    void release_interface(uint8_t interface) override;
    size_t control(uint8_t request_type, uint8_t request, uint16_t value, uint16_t index, std::span<std::byte> data,
                   std::chrono::milliseconds timeout) override;
    size_t bulk(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout) override;
    Tag submit_bulk(uint8_t endpoint, std::span<std::byte> data, std::chrono::milliseconds timeout, uint32_t stream = 0) override;
    size_t reap(Tag tag) override;
    unsigned alloc_streams(unsigned count, std::span<const uint8_t> endpoints) override;
    void clear_halt(uint8_t endpoint) override;
    std::chrono::nanoseconds now() override { return std::chrono::nanoseconds(clock_ns_.load()); }
    void sleep(std::chrono::nanoseconds duration) override { clock_ns_.fetch_add(static_cast<uint64_t>(duration.count())); }

    // The bulk data phase the last request armed (a 0xF0 stream or a 0xF2 SRAM arm): which
    // endpoint and how many bytes; nullopt when none is pending. A device-side adapter needs it
    // to know what to send on bulk IN (tests/qemu serves this model through FunctionFS).
    // `ready`: the engine would serve it now; false for an SRAM read the device has not yet
    // released by writing the CQ window (an adapter must not answer the bulk IN before that).
    struct ArmedTransfer {
        uint8_t endpoint = 0;
        uint64_t bytes = 0;
        bool ready = true;
    };
    std::optional<ArmedTransfer> armed();

    // For tests and benchmarks.
    void inject(Fault fault);
    void clear_faults();
    std::vector<Violation> violations() const;
    void clear_violations();
    UsbCounters counters() const;
    uint64_t now_ns() const { return clock_ns_.load(); }
    std::span<std::byte> sram();
    pci::sim::SimDeviceModel* endpoint_model();
    uint8_t ltssm() const;

    struct Impl;

private:
    Options options_;
    std::atomic<uint64_t> clock_ns_{0};
    std::unique_ptr<Impl> impl_;
};

}  // namespace baregpu::sim::asm24
