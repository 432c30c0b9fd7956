// Opening an AM device by URI, for tools: "sim-am:navi31" / "sim-am:navi48" build the simulated
// chip (drivers/sim/amdgpu) on a private simulated bus, "am:<pci address>" opens real hardware
// through drivers/pci. The composition lives in registry.cpp, the one place that may see both a
// model and a driver; callers get an AmDevice and never a model type.
#pragma once

#include "drivers/am/am_device.hpp"

#include <memory>
#include <optional>
#include <sys/types.h>
#include <string>
#include <string_view>

namespace baregpu::registry {

struct AmTarget {
    std::string uri;                 // what was opened
    std::string note;                // e.g. "no AMD GPU on the PCI bus: using sim-am:navi31"
    std::shared_ptr<void> keepalive;  // the simulated bus, when there is one (outlives `device`)
    std::unique_ptr<am::AmDevice> device;

    AmTarget() = default;
    AmTarget(AmTarget&&) = default;
    AmTarget& operator=(AmTarget&&) = default;
    ~AmTarget() { device.reset(); }  // the device goes before the bus it sits on
};

// True for "am:..." and "sim-am:...".
bool is_am_uri(std::string_view uri);
// The first supported AMD GPU on the PCI bus as "am:<address>", else "sim-am:navi31"; `note`
// says which and why.
std::string default_am_uri(std::string* note = nullptr);
// Opens and brings up. options.lock_key is filled in when empty ("sim-am-navi31", "am-<address>").
// sim_link picks the simulated bus's cost model for sim-am:* ("pcie", the default, or "usb": a
// 100 µs round trip per register access, issue 5's USB latency model); ignored for am:*.
AmTarget open_am(std::string_view uri, am::AmOptions options = {}, std::string_view sim_link = {});
// The owner of `uri`'s lock, if any (amctl status without taking the device).
std::optional<pid_t> am_owner(std::string_view uri);

}  // namespace baregpu::registry
