// usb_bench: the costs of a GPU behind the ASM2464 bridge, in modelled time with the default
// latency model (100 µs per USB round trip, 10 Gb/s bulk), on the simulated Navi31 behind the
// simulated bridge: am:usb:sim, opened through the registry like any other device. Prints a table
// for BENCHMARKS.md.
//
//   usb_bench [--firmware DIR] [--mib N]
//
// Every figure is measured: transfers are the bridge's counters, time is its modelled clock (both
// through registry::sim_usb_bridge).
#include "base/error.hpp"
#include "drivers/am/am_device.hpp"
#include "drivers/am/sram_copy.hpp"
#include "drivers/registry.hpp"
#include "drivers/registry_am.hpp"
#include "drivers/usb/asm24_controller.hpp"
#include "drivers/usb/usb_backend.hpp"
#include "hcq/registry.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

using namespace baregpu;
namespace fs = std::filesystem;

namespace {

struct Opened {
    registry::AmTarget target;
    uint64_t ns = 0;  // the bring-up, in the bridge's modelled time
    uint64_t transfers = 0;
};

registry::SimUsbBridge bridge_of(const registry::AmTarget& target) {
    std::optional<registry::SimUsbBridge> b = registry::sim_usb_bridge(target);
    if (!b) throw Error(target.uri, "not a simulated bridge");
    return *b;
}

// The bridge's clock and counters start with it: what they read after the open is the bring-up's.
Opened open_chip() {
    Opened out;
    out.target = registry::open_am("am:usb:sim");
    const registry::SimUsbBridge b = bridge_of(out.target);
    out.ns = b.now_ns;
    out.transfers = b.transfers;
    return out;
}

double mb_per_s(uint64_t bytes, uint64_t ns) { return ns == 0 ? 0 : static_cast<double>(bytes) / 1e6 / (static_cast<double>(ns) / 1e9); }

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        // The registry's simulated devices search $BAREGPU_FIRMWARE_PATH first (drivers/sim/firmware_path.hpp).
        if (std::string(argv[i]) == "--firmware") ::setenv("BAREGPU_FIRMWARE_PATH", argv[i + 1], 1);
    }
    uint64_t mib = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::string(argv[i]) == "--mib") mib = std::strtoull(argv[i + 1], nullptr, 0);
    }
    std::string tmpl = (fs::temp_directory_path() / "usb-bench-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return 1;
    const fs::path root = tmpl;
    fs::create_directories(root / "locks");
    // A chip of its own: its state file and lock in a fresh directory (cold, then warm).
    ::setenv("BAREGPU_LOCK_DIR", (root / "locks").c_str(), 1);
    ::setenv("BAREGPU_SIM_STATE_DIR", root.c_str(), 1);
    ::unsetenv("BAREGPU_AM_RESET");
    int rc = 0;
    try {
        fmt::print("usb_bench: simulated Navi31 behind the simulated ASM2464, 100 us per USB round trip, 10 Gb/s bulk\n\n");
        {
            Opened cold = open_chip();
            fmt::print("| cold bring-up (bridge setup + full AM boot) | {:.1f} ms | {} USB transfers | {} register ops |\n", cold.ns / 1e6,
                       cold.transfers, cold.target.device->report().mmio_ops());
        }
        {
            // The HCQ device as a program gets it: the warm chip, queues, the SRAM windows mapped.
            // Its link clock starts with the bridge, so what it reads after the open is the open's.
            hcq::Registry devices;
            registry::register_backends(devices);
            std::shared_ptr<hcq::Device> hcq_dev = devices.open("am:usb:sim");
            fmt::print("| HCQ device open (warm start, queues, SRAM windows mapped) | {:.1f} ms |\n", double(hcq_dev->link_clock_ns().value_or(0)) / 1e6);
        }
        Opened warm = open_chip();
        fmt::print("| warm start (bridge setup + AM warm path)     | {:.1f} ms | {} USB transfers | {} register ops |\n", warm.ns / 1e6,
                   warm.transfers, warm.target.device->report().mmio_ops());
        am::AmDevice& dev = *warm.target.device;
        pci::PciDevice& pci = dev.pci();
        auto count = [&] { return bridge_of(warm.target).transfers; };
        auto now = [&] { return bridge_of(warm.target).now_ns; };

        // One register write / read (BAR5, non-prefetchable: never batched).
        uint64_t c0 = count(), t0 = now();
        const unsigned n = 1000;
        for (unsigned i = 0; i < n; ++i) (void)pci.bar(5).read32(BarOffset(0));
        fmt::print("| register read  | {:.2f} USB transfers | {:.1f} us |\n", double(count() - c0) / n, (now() - t0) / 1e3 / n);
        // Isolated VRAM dword writes (not adjacent: one stream each) and adjacent ones (batched).
        c0 = count(), t0 = now();
        for (unsigned i = 0; i < n; ++i) pci.bar(0).write32(BarOffset(0x20000000 + uint64_t{i} * 64), i);
        (void)pci.bar(5).read32(BarOffset(0));  // flushes
        fmt::print("| MMIO write, isolated | {:.2f} USB transfers | {:.1f} us |\n", double(count() - c0 - 2) / n,
                   (now() - t0 - 200'000) / 1e3 / n);
        c0 = count(), t0 = now();
        for (unsigned i = 0; i < n; ++i) pci.bar(0).write32(BarOffset(0x20100000 + uint64_t{i} * 4), i);
        (void)pci.bar(5).read32(BarOffset(0));
        fmt::print("| MMIO write, adjacent dwords batched | {:.4f} USB transfers | {:.2f} us |\n", double(count() - c0 - 2) / n,
                   (now() - t0 - 200'000) / 1e3 / n);

        // Bulk copies through BAR0 (streaming MWr / MRd TLPs, 1 MiB per stream).
        std::vector<std::byte> data(mib << 20);
        for (size_t i = 0; i < data.size(); i += 4096) data[i] = std::byte(i >> 12);
        c0 = count(), t0 = now();
        pci.bar(0).write_block(BarOffset(0x20000000), data);
        const uint64_t in_ns = now() - t0, in_tr = count() - c0;
        std::vector<std::byte> back(data.size());
        c0 = count(), t0 = now();
        pci.bar(0).read_block(BarOffset(0x20000000), back);
        const uint64_t out_ns = now() - t0, out_tr = count() - c0;
        if (back != data) throw Error("usb:sim", "copy-out returned different bytes than copy-in wrote");
        fmt::print("| copy-in, BAR0 streams ({} MiB)  | {:.0f} MB/s | {:.4f} USB transfers per KiB |\n", mib, mb_per_s(data.size(), in_ns),
                   double(in_tr) / double(data.size() / 1024));
        fmt::print("| copy-out, BAR0 streams ({} MiB) | {:.0f} MB/s | {:.4f} USB transfers per KiB |\n", mib, mb_per_s(back.size(), out_ns),
                   double(out_tr) / double(back.size() / 1024));

        // The pipelined copy through the bridge SRAM and SDMA0 (sentinels and fences).
        {
            am::SramCopy copy(dev, am::AmDevice::heap_begin());
            const uint64_t dst = am::AmDevice::heap_begin() + (64 << 20);
            c0 = count(), t0 = now();
            copy.copy_in(dst, data);
            const uint64_t sin_ns = now() - t0, sin_tr = count() - c0;
            std::fill(back.begin(), back.end(), std::byte{0});
            c0 = count(), t0 = now();
            copy.copy_out(dst, back);
            const uint64_t sout_ns = now() - t0, sout_tr = count() - c0;
            if (back != data) throw Error("usb:sim", "SRAM copy-out returned different bytes than SRAM copy-in wrote");
            fmt::print("| copy-in, SRAM + SDMA with sentinels ({} MiB)  | {:.0f} MB/s | {:.4f} USB transfers per KiB | {} extra fence polls |\n", mib,
                       mb_per_s(data.size(), sin_ns), double(sin_tr) / double(data.size() / 1024), copy.stats().fence_polls);
            fmt::print("| copy-out, SRAM + SDMA with fences ({} MiB)    | {:.0f} MB/s | {:.4f} USB transfers per KiB |\n", mib,
                       mb_per_s(back.size(), sout_ns), double(sout_tr) / double(back.size() / 1024));
        }

        // Host -> bridge SRAM through the bulk engine, 256 KB chunks into slots 0 and 16:
        // synchronous, then two asynchronous transfers in flight.
        usb::Asm24Controller direct(registry::open_sim_usb_bridge());
        auto bridge_now = [&] { return static_cast<uint64_t>(direct.usb().now().count()); };
        const uint64_t chunk = 256 * 1024;
        std::vector<std::vector<std::byte>> wire(2, std::vector<std::byte>(chunk));
        t0 = bridge_now();
        for (uint64_t done = 0; done < data.size(); done += chunk) direct.sram_write((done / chunk % 2) * 16 * 16384, wire[0]);
        const uint64_t sync_ns = bridge_now() - t0;
        t0 = bridge_now();
        std::vector<usb::UsbBackend::Tag> inflight(2, 0);
        for (uint64_t done = 0, i = 0; done < data.size(); done += chunk, ++i) {
            if (inflight[i % 2] != 0) direct.reap(inflight[i % 2]);  // that window's previous transfer finished
            inflight[i % 2] = direct.sram_write_async((i % 2) * 16 * 16384, wire[i % 2]);
        }
        for (auto t : inflight)
            if (t != 0) direct.reap(t);
        const uint64_t async_ns = bridge_now() - t0;
        fmt::print("| host -> SRAM engine, synchronous 256 KB chunks | {:.0f} MB/s |\n", mb_per_s(data.size(), sync_ns));
        fmt::print("| host -> SRAM engine, 2 asynchronous in flight  | {:.0f} MB/s |\n", mb_per_s(data.size(), async_ns));
        for (const std::string& v : bridge_of(warm.target).violations) {
            fmt::print(stderr, "violation: {}\n", v);
            rc = 1;
        }
    } catch (const Error& e) {
        fmt::print(stderr, "usb_bench: {}\n", e.what());
        rc = 1;
    }
    std::error_code ec;
    fs::remove_all(root, ec);
    return rc;
}
