// Every wait in drivers/am: a bounded poll that says what it waited for. Time is the device's
// clock (PciDevice::now), and the pause between polls is PciDevice::delay, growing from 1 us to
// 1 ms, so on the simulated bus a 10 s timeout costs modelled time, not wall time.
#pragma once

#include "drivers/am/registers.hpp"

#include <chrono>
#include <functional>
#include <string_view>

namespace baregpu::am {

// Polls `check` until it returns true or `timeout` passes on the device clock. Returns whether it
// succeeded; callers turn false into a TimeoutError that names what they waited for.
bool poll_until(pci::PciDevice& device, std::chrono::nanoseconds timeout, const std::function<bool()>& check);

// Waits until (reg & mask) == expected. Throws TimeoutError naming `why`, the register, its
// address, expected and last value.
uint32_t wait_reg(Registers& regs, const RegDef& reg, uint32_t mask, uint32_t expected,
                  std::chrono::nanoseconds timeout, std::string_view why);

inline constexpr std::chrono::nanoseconds kDefaultTimeout = std::chrono::seconds(10);  // tinygrad wait_cond

}  // namespace baregpu::am
