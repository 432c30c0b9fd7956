// Every wait in drivers/nv's boot: a bounded poll on the device clock (PciDevice::now / delay, so
// on the simulated bus a 10 s timeout costs modelled time), the pause growing from 1 us to 1 ms.
#pragma once

#include "drivers/pci/pci_device.hpp"
#include "drivers/pci/poll.hpp"

#include <algorithm>
#include <chrono>

namespace baregpu::nv {

inline constexpr std::chrono::nanoseconds kBootTimeout = std::chrono::seconds(10);  // nouveau/tinygrad: 10 s

using pci::poll_until;  // drivers/pci/poll.hpp

}  // namespace baregpu::nv
