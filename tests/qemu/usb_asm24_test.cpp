// Our whole USB path on a real kernel: libusb finds the emulated bridge (usb_bridge_gadget.hpp)
// by its custom-firmware IDs, drivers/usb's transport brings the link up and round-trips config
// TLPs (through the four bridge headers to the endpoint at 04:00.0) and memory TLPs (BAR0 of
// the edu model behind it) over the Linux USB stack, as pci::open_usb_device does for a GPU.
#include "base/error.hpp"
#include "drivers/pci/usb_pci_device.hpp"
#include "drivers/sim/edu.hpp"
#include "drivers/usb/libusb_backend.hpp"
#include "tests/qemu/guest_runner.hpp"
#include "tests/qemu/guest_tests.hpp"
#include "tests/qemu/usb_bridge_gadget.hpp"
#include "tests/qemu/usb_gadget.hpp"

#include <csignal>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <vector>

namespace baregpu::qemu {

namespace edu = sim::edu;

void usb_asm24_transport_tlps() {
    pid_t gadget = start_asm24_gadget();
    struct Reap {
        pid_t pid;
        ~Reap() { stop_gadget(pid); }
    } reap{gadget};
    std::vector<usb::BridgeInfo> found;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((found = usb::enumerate_bridges()).empty()) {
        check(std::chrono::steady_clock::now() < deadline,
              "usb: the emulated bridge (3801:0001 on dummy_udc.0) was not enumerated by libusb within 10 s");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::printf("libusb found %04x:%04x at %s\n", found[0].vendor_id, found[0].product_id, found[0].location.c_str());
    auto dev = pci::open_usb_device(usb::open_libusb(found[0].location));
    pci::PciIdentity id = dev->identity();
    check(id.vendor_id == edu::kVendorId && id.device_id == edu::kDeviceId,
          fmt::format("{}: config TLPs read {:04x}:{:04x} at 04:00.0, expected {:04x}:{:04x}", dev->name(), id.vendor_id,
                      id.device_id, edu::kVendorId, edu::kDeviceId));
    uint32_t ident = dev->bar(0).read32(BarOffset{edu::kRegId});
    check(ident == edu::kIdValue,
          fmt::format("{}: BAR0 ID through memory TLPs 0x{:08x}, expected 0x{:08x}", dev->name(), ident, edu::kIdValue));
    dev->bar(0).write32(BarOffset{edu::kRegLiveness}, 0x13572468);
    uint32_t back = dev->bar(0).read32(BarOffset{edu::kRegLiveness});
    check(back == ~0x13572468u, fmt::format("{}: liveness through memory TLPs read 0x{:08x}, expected 0x{:08x}",
                                            dev->name(), back, ~0x13572468u));
    // The bridge's SRAM through its bulk engine: bulk OUT then bulk IN of the same window.
    pci::LinkCapabilities link = dev->link_capabilities();
    check(!link.dma_windows.empty(), fmt::format("{}: the usb backend reports no DMA windows", dev->name()));
    std::vector<std::byte> out(4096), in(4096);
    for (size_t i = 0; i < out.size(); ++i) out[i] = std::byte(static_cast<uint8_t>(i * 5 + 3));
    BusAddress window{link.dma_windows[0].bus_address};
    dev->dma_window_write(window, out);
    // The engine releases a read only after a device write to the CQ window (asm2464pd-firmware
    // README.md): arm, let edu DMA four bytes there, then read. Nothing reads a register in
    // between: a BAR read streams its data over the same bulk IN pipe the released SRAM data
    // already waits in.
    dev->dma_window_read_arm(window, in.size());
    dev->set_bus_master(true);
    pci::MmioRegion& r = dev->bar(0);
    r.write64(BarOffset{edu::kRegDmaSource}, edu::kBufferAddress);
    r.write64(BarOffset{edu::kRegDmaDestination}, link.dma_windows[0].read_trigger + 12);
    r.write32(BarOffset{edu::kRegDmaCount}, 4);
    r.write32(BarOffset{edu::kRegDmaCommand}, edu::kDmaStart | edu::kDmaToRam);
    dev->dma_window_read(window, in);
    check(in == out, fmt::format("{}: 4 KiB written to SRAM at bus 0x{:x} through bulk OUT came back different through "
                                 "bulk IN",
                                 dev->name(), window.value()));
    dev.reset();
    std::ifstream violations(kAsm24GadgetViolations);
    std::string first;
    check(!std::getline(violations, first),
          fmt::format("the bridge model behind the gadget recorded a violation or stalled: {} (all in {})", first,
                      kAsm24GadgetViolations));
    std::printf("config and memory TLPs, and SRAM through the bulk engine, round-trip through libusb and the Linux "
                "USB stack\n");
}

}  // namespace baregpu::qemu
