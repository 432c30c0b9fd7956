// The bounded poll every driver wait is built on: `check` until it returns true or `timeout` passes
// on the device's clock (PciDevice::now), pausing with PciDevice::delay between tries — from 1 us,
// doubling to 1 ms — so on the simulated bus a 10 s timeout costs modelled time, not wall time.
// Returns whether it succeeded; callers turn false into a TimeoutError that names what they waited
// for and the last value seen. A template, not std::function: drivers poll on HCQ hot paths
// (memory retiring during submit), which must not allocate.
#pragma once

#include "drivers/pci/pci_device.hpp"

#include <algorithm>
#include <chrono>

namespace baregpu::pci {

template <class Check>
bool poll_until(PciDevice& device, std::chrono::nanoseconds timeout, Check&& check) {
    const std::chrono::nanoseconds start = device.now();
    std::chrono::nanoseconds pause = std::chrono::microseconds(1);
    for (;;) {
        if (check()) return true;
        if (device.now() - start >= timeout) return check();
        device.delay(pause);
        pause = std::min<std::chrono::nanoseconds>(pause * 2, std::chrono::milliseconds(1));
    }
}

}  // namespace baregpu::pci
