// Mode1 reset: the whole ASIC except the PCIe link, requested from the SMU. Only when the PSP sOS
// and the SMU are both alive (otherwise the chip is already in its power-on state), with bus
// mastering off so no DMA is in flight (smu_v13_0_0_mode1_reset / smu_v14_0_2_mode1_reset,
// amdgpu_device_mode1_reset).
#pragma once

#include "drivers/am/asic.hpp"
#include "drivers/am/smu.hpp"

#include <chrono>

namespace baregpu::am {

// How long the chip needs after the request: SMU13_MODE1_RESET_WAIT_TIME_IN_MS 500 ms
// (smu_v13_0_0_ppt.c, also tinygrad's wait); smu_v14_0_2_mode1_reset sleeps 1000 ms after the debug
// message (msleep(1000)).
inline constexpr std::chrono::milliseconds kMode1ResetWait{500};
inline constexpr std::chrono::milliseconds kMode1ResetWaitSmu14{1000};

// Returns the device time the reset took.
std::chrono::nanoseconds mode1_reset(pci::PciDevice& device, const AsicInfo& asic, Smu& smu);

}  // namespace baregpu::am
