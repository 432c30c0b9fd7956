// Every wait in drivers/nv's boot: a bounded poll on the device clock (PciDevice::now / delay, so
// on the simulated bus a 10 s timeout costs modelled time), the pause growing from 1 us to 1 ms.
#pragma once

#include "drivers/pci/pci_device.hpp"

#include <algorithm>
#include <chrono>

namespace baregpu::nv {

inline constexpr std::chrono::nanoseconds kBootTimeout = std::chrono::seconds(10);  // nouveau/tinygrad: 10 s

// Polls `check` until it returns true or `timeout` passes. Returns whether it succeeded; callers
// turn false into a TimeoutError naming what they waited for and the last value seen.
template <class Check>
bool poll_until(pci::PciDevice& device, std::chrono::nanoseconds timeout, Check&& check) {
    const std::chrono::nanoseconds start = device.now();
    std::chrono::nanoseconds pause = std::chrono::microseconds(1);
    for (;;) {
        if (check()) return true;
        if (device.now() - start >= timeout) return check();
        device.delay(pause);
        pause = std::min<std::chrono::nanoseconds>(pause * 2, std::chrono::milliseconds(1));
    }
}

}  // namespace baregpu::nv
