// guest_usb_tests: the guest's USB batch. Dynamically linked (Debian ships libusb-1.0 only with
// libudev, which has no static library); the harness copies it and its shared libraries (ldd)
// into the initramfs.
#include "tests/qemu/guest_runner.hpp"
#include "tests/qemu/guest_tests.hpp"

#include <array>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    using namespace baregpu::qemu;
    const std::array tests{
        GuestTest{"libusb-echo-gadget-dummy-hcd", libusb_echo_gadget},
        GuestTest{"usb-asm24-transport-config-and-memory-tlps", usb_asm24_transport_tlps},
    };
    std::vector<std::string> only(argv + 1, argv + argc);
    return run_batch(tests, only, std::chrono::seconds(60)) == 0 ? 0 : 1;
}
