#include "drivers/am/reset.hpp"

#include "drivers/pci/pci_device.hpp"

namespace baregpu::am {

std::chrono::nanoseconds mode1_reset(pci::PciDevice& device, const AsicInfo& asic, Smu& smu) {
    std::chrono::nanoseconds start = device.now();
    device.set_bus_master(false);
    if (asic.mode1_via_debug_mailbox) {
        smu.send_debug(kDebugSmcMsgMode1Reset);
    } else {
        smu.send(static_cast<SmuMsg>(0x2f));  // PPSMC_MSG_Mode1Reset (smu_v13_0_0_ppsmc.h)
    }
    device.delay(asic.mp1.major >= 14 ? kMode1ResetWaitSmu14 : kMode1ResetWait);
    return device.now() - start;
}

}  // namespace baregpu::am
