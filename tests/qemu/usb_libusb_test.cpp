// drivers/usb's libusb backend against a device on the real Linux USB stack (the echo gadget of
// usb_gadget.hpp, behind dummy_hcd): enumeration by the bridge IDs, descriptors, claiming,
// vendor control transfers both ways, bulk both ways, and asynchronous submit/reap.
#include "base/error.hpp"
#include "drivers/usb/libusb_backend.hpp"
#include "tests/qemu/guest_runner.hpp"
#include "tests/qemu/guest_tests.hpp"
#include "tests/qemu/usb_gadget.hpp"

#include <csignal>
#include <cstdio>
#include <fmt/format.h>
#include <sys/wait.h>
#include <thread>
#include <vector>

namespace baregpu::qemu {

namespace {

struct GadgetProcess {
    pid_t pid;
    ~GadgetProcess() { stop_gadget(pid); }
};

}  // namespace

void libusb_echo_gadget() {
    GadgetProcess gadget{start_echo_gadget()};
    std::vector<usb::BridgeInfo> found;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((found = usb::enumerate_bridges()).empty()) {
        check(std::chrono::steady_clock::now() < deadline,
              "usb: the echo gadget (174c:2464 on dummy_udc.0) was not enumerated by libusb within 10 s");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::printf("libusb found %04x:%04x at %s\n", found[0].vendor_id, found[0].product_id, found[0].location.c_str());
    auto dev = usb::open_libusb(found[0].location);
    usb::DeviceDescriptor d = dev->descriptor();
    check(d.vendor_id == 0x174c && d.product_id == 0x2464,
          fmt::format("{}: descriptor says {:04x}:{:04x}, expected 174c:2464", dev->name(), d.vendor_id, d.product_id));
    check(d.interfaces.size() == 1 && d.interfaces[0].interface_class == 0xff && d.interfaces[0].endpoints.size() == 2,
          fmt::format("{}: expected one vendor-class interface with two endpoints", dev->name()));
    uint8_t ep_out = 0, ep_in = 0;
    for (const usb::EndpointDescriptor& e : d.interfaces[0].endpoints) {
        ((e.address & usb::kEndpointIn) != 0 ? ep_in : ep_out) = e.address;
    }
    std::printf("bulk OUT 0x%02x, bulk IN 0x%02x\n", ep_out, ep_in);
    dev->claim_interface(0, 0);

    // Vendor control: OUT stores 64 bytes, IN returns them.
    std::vector<std::byte> sent(64), got(64);
    for (size_t i = 0; i < sent.size(); ++i) sent[i] = std::byte(static_cast<uint8_t>(0xa0 + i));
    auto timeout = std::chrono::milliseconds(2000);
    dev->control(usb::kVendorOut, 0xE5, 0x1234, 0, sent, timeout);
    size_t n = dev->control(usb::kVendorIn, 0xE4, 0x1234, 0, got, timeout);
    check(n == got.size() && got == sent,
          fmt::format("{}: vendor control OUT then IN of 64 bytes: {} bytes back, {}", dev->name(), n,
                      got == sent ? "equal" : "different"));

    // Bulk: 512 bytes out, the inverse back; then the same asynchronously, both in flight at once.
    std::vector<std::byte> out(512), in(512);
    for (size_t i = 0; i < out.size(); ++i) out[i] = std::byte(static_cast<uint8_t>(i * 3));
    dev->bulk(ep_out, out, timeout);
    n = dev->bulk(ep_in, in, timeout);
    for (size_t i = 0; i < out.size(); ++i) {
        check(n == in.size() && in[i] == ~out[i],
              fmt::format("{}: bulk echo byte {}: 0x{:02x}, expected 0x{:02x} ({} bytes back)", dev->name(), i,
                          static_cast<unsigned>(in[i]), static_cast<unsigned>(~out[i]), n));
    }
    std::vector<std::byte> in2(512);
    auto read_tag = dev->submit_bulk(ep_in, in2, timeout);
    auto write_tag = dev->submit_bulk(ep_out, in, timeout);
    check(dev->reap(write_tag) == 512, fmt::format("{}: async bulk OUT did not move 512 bytes", dev->name()));
    check(dev->reap(read_tag) == 512 && in2 == out,
          fmt::format("{}: async bulk round trip: the twice-inverted bytes differ from the original", dev->name()));
    dev->release_interface(0);
    std::printf("vendor control and bulk (sync and async) round-trip through the Linux USB stack\n");
}

}  // namespace baregpu::qemu
