#include "drivers/am/wait.hpp"

#include "base/error.hpp"
#include "drivers/pci/pci_device.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace baregpu::am {

uint32_t wait_reg(Registers& regs, const RegDef& reg, uint32_t mask, uint32_t expected,
                  std::chrono::nanoseconds timeout, std::string_view why) {
    uint32_t last = 0;
    bool ok = poll_until(regs.mmio().device(), timeout, [&] {
        last = regs.read(reg);
        return (last & mask) == expected;
    });
    if (!ok) {
        throw TimeoutError(regs.mmio().device().name(),
                           fmt::format("timed out after {} ms waiting for {}: {} (dword {:#x}) & {:#010x} should be "
                                       "{:#010x}, last read {:#010x}",
                                       std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count(), why,
                                       reg.name, regs.address(reg), mask, expected, last));
    }
    return last;
}

}  // namespace baregpu::am
