// The ASM24xx bridge's USB interface, emulated in the guest: a FunctionFS gadget (usb_gadget.hpp)
// whose vendor requests and bulk transfers are answered by drivers/sim/asm24's bridge model with
// QEMU-edu's model in its slot. The host side is the real Linux USB stack, libusb and our
// drivers/usb transport — so what is tested is our transport on a real kernel, against the
// protocol as the model implements it.
#pragma once

#include <sys/types.h>

namespace baregpu::qemu {

// Starts it (custom-firmware IDs 3801:0001) in a forked process; returns the pid.
pid_t start_asm24_gadget();

// Every protocol violation the model recorded and every request it stalled is appended here
// (one line each), so that the host-side test can require a clean run: the gadget's process
// cannot throw into the test.
inline constexpr const char* kAsm24GadgetViolations = "/tmp/asm24-gadget-violations";

}  // namespace baregpu::qemu
