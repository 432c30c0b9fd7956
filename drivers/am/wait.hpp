// Every wait in drivers/am: a bounded poll that says what it waited for. Time is the device's
// clock (PciDevice::now), and the pause between polls is PciDevice::delay, growing from 1 us to
// 1 ms, so on the simulated bus a 10 s timeout costs modelled time, not wall time.
#pragma once

#include "drivers/am/registers.hpp"
#include "drivers/pci/pci_device.hpp"

#include <algorithm>
#include <chrono>
#include <string_view>

namespace baregpu::am {

// Polls `check` until it returns true or `timeout` passes on the device clock. Returns whether it
// succeeded; callers turn false into a TimeoutError that names what they waited for.
// A template, not std::function: queue teardown and TLB flushes poll on the HCQ hot path (memory
// retiring during submit), which must not allocate.
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

// Waits until (reg & mask) == expected. Throws TimeoutError naming `why`, the register, its
// address, expected and last value.
uint32_t wait_reg(Registers& regs, const RegDef& reg, uint32_t mask, uint32_t expected,
                  std::chrono::nanoseconds timeout, std::string_view why);

inline constexpr std::chrono::nanoseconds kDefaultTimeout = std::chrono::seconds(10);  // tinygrad wait_cond

}  // namespace baregpu::am
