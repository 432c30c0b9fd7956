// Every wait in drivers/am: a bounded poll that says what it waited for. Time is the device's
// clock (PciDevice::now), and the pause between polls is PciDevice::delay, growing from 1 us to
// 1 ms, so on the simulated bus a 10 s timeout costs modelled time, not wall time.
#pragma once

#include "drivers/am/registers.hpp"
#include "drivers/pci/pci_device.hpp"
#include "drivers/pci/poll.hpp"

#include <algorithm>
#include <chrono>
#include <string_view>

namespace baregpu::am {

using pci::poll_until;  // drivers/pci/poll.hpp

// Waits until (reg & mask) == expected. Throws TimeoutError naming `why`, the register, its
// address, expected and last value.
uint32_t wait_reg(Registers& regs, const RegDef& reg, uint32_t mask, uint32_t expected,
                  std::chrono::nanoseconds timeout, std::string_view why);

inline constexpr std::chrono::nanoseconds kDefaultTimeout = std::chrono::seconds(10);  // tinygrad wait_cond

}  // namespace baregpu::am
