// Opening an AM device by URI, for tools: "sim-am:navi31" / "sim-am:navi48" build the simulated
// chip (drivers/sim/amdgpu) on a private simulated bus, "am:<pci address>" opens real hardware
// through drivers/pci (VFIO; "?access=sysfs" for the sysfs backend, root only), "am:usb:<bus>-<port>"
// a GPU behind an ASM24xx bridge and "am:usb:sim" the simulated Navi31 behind the simulated bridge.
// The composition lives in registry_am.cpp, part of the one place that may see both a model and a
// driver; callers get an AmDevice and never a model type.
#pragma once

#include "drivers/am/am_device.hpp"

#include <memory>
#include <optional>
#include <sys/types.h>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::usb {
class UsbBackend;
}

namespace baregpu::registry {

struct AmTarget {
    std::string uri;                 // what was opened
    std::string note;                // e.g. "no AMD GPU on the PCI bus: using sim-am:navi31"
    std::shared_ptr<void> keepalive;  // what the device sits on (a simulated bus); outlives `device`
    std::unique_ptr<am::AmDevice> device;

    AmTarget() = default;
    AmTarget(AmTarget&&) = default;
    AmTarget& operator=(AmTarget&&) = default;
    ~AmTarget() { device.reset(); }  // the device goes before the bus it sits on
};

// True for "am:..." and "sim-am:...".
bool is_am_uri(std::string_view uri);
// The first AMD GPU on the PCI bus that drivers/am drives as "am:<address>", else "sim-am:navi31";
// `note` says which and why.
std::string default_am_uri(std::string* note = nullptr);
// Opens and brings up. options.lock_key is filled in when empty ("sim-am-navi31", "am-<address>").
// sim_link picks the simulated bus's cost model for sim-am:* ("pcie", the default, or "usb": a
// 100 µs round trip per register access, a USB bridge's latency); ignored for am:*.
AmTarget open_am(std::string_view uri, am::AmOptions options = {}, std::string_view sim_link = {});
// The directories `uri`'s firmware is searched in, in order (a simulated chip's: the firmware the
// build carries first; a real GPU's: $BAREGPU_FIRMWARE_PATH and /lib/firmware).
std::vector<std::string> am_firmware_dirs(std::string_view uri);
// The owner of `uri`'s lock, if any (amctl status without taking the device).
std::optional<pid_t> am_owner(std::string_view uri);

// The simulated bridge under an am:usb:sim target (bench/usb_bench): its modelled clock, the USB
// transfers it has carried since it was built, and the protocol violations it saw (described).
// nullopt for any other target.
struct SimUsbBridge {
    uint64_t now_ns = 0;
    uint64_t transfers = 0;
    std::vector<std::string> violations;
};
std::optional<SimUsbBridge> sim_usb_bridge(const AmTarget& target);
// A simulated ASM2464 with nothing behind it: the bridge alone (its SRAM and bulk engine), for
// usb_bench's host -> SRAM figures through usb::Asm24Controller.
std::unique_ptr<usb::UsbBackend> open_sim_usb_bridge();

}  // namespace baregpu::registry
