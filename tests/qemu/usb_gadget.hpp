// A USB device emulated from userspace inside the guest, through the real Linux USB stack:
// dummy_hcd (a virtual host controller wired to a virtual device controller), a configfs gadget
// and one FunctionFS function served by this process. It carries the ASM24xx bridge's IDs
// (174c:2464) and one vendor-class interface with a bulk OUT and a bulk IN endpoint, so that our
// libusb backend finds and opens it like a bridge. It does not speak the bridge's protocol yet:
// it echoes (see EchoGadget) so that the transfers themselves can be checked byte for byte.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <sys/types.h>

namespace baregpu::qemu {

// What the gadget answers:
// - a vendor OUT control request stores its data stage; a vendor IN control request returns the
//   stored bytes (zero-padded to wLength), so an OUT then IN of the same length round-trips;
// - every bulk OUT packet is answered on bulk IN with the same bytes inverted (~b).
// Starts the gadget in a forked process and returns its pid once the device is bound to
// dummy_udc.0 (the host side then enumerates it). Throws TestFailure naming the configfs or
// FunctionFS file that failed; SkipTest when dummy_hcd or configfs is absent.
pid_t start_echo_gadget();

// The general form: a gadget with these IDs and the same interface (bulk OUT 0x02 = FunctionFS
// ep1, bulk IN 0x81 = ep2), whose ep0 is served by `serve` in the forked process (it never
// returns; the test kills the process).
struct GadgetSpec {
    uint16_t vendor_id = 0;
    uint16_t product_id = 0;
    std::string product;
};
pid_t start_gadget(const GadgetSpec& spec, const std::function<void(int ep0)>& serve);
// Stops the gadget process and takes the gadget down (unbinds the UDC, unmounts FunctionFS,
// removes the configfs tree), so that the next test can build its own. Never throws.
void stop_gadget(pid_t pid);
// FunctionFS paths of the bulk endpoints' files.
std::string gadget_bulk_out_path();
std::string gadget_bulk_in_path();

}  // namespace baregpu::qemu
