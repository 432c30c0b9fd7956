// The not-viable refusal on a real kernel. The harness puts a second edu and a second NVMe
// behind one PCIe-to-PCI bridge: one IOMMU group. The kernel's nvme driver holds the NVMe, so
// once edu is on vfio-pci, opening it without --bind-vfio must be refused with the text that
// names the peer and its driver.
#include "base/error.hpp"
#include "drivers/pci/iommu_group.hpp"
#include "drivers/pci/vfio_bind.hpp"
#include "drivers/pci/vfio_device.hpp"
#include "tests/qemu/guest_devices.hpp"
#include "tests/qemu/guest_runner.hpp"
#include "tests/qemu/guest_tests.hpp"

#include <cstdio>
#include <fmt/format.h>
#include <thread>

namespace baregpu::qemu {

void group_not_viable() {
    if (!device_present(kEduBehindBridge) || !device_present(kNvmeBehindBridge)) {
        throw SkipTest{fmt::format("{} and {} (behind one bridge) not attached by the harness", kEduBehindBridge,
                                   kNvmeBehindBridge)};
    }
    // nvme probes asynchronously: give it a few seconds to take its controller.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (bound_driver(kNvmeBehindBridge) != "nvme") {
        check(std::chrono::steady_clock::now() < deadline,
              fmt::format("{}: not bound to nvme within 10 s (driver: {})", kNvmeBehindBridge,
                          bound_driver(kNvmeBehindBridge).empty() ? "(none)" : bound_driver(kNvmeBehindBridge)));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    auto group = pci::read_iommu_group("/sys", address(kEduBehindBridge));
    check(group.has_value(), fmt::format("{}: no IOMMU group", kEduBehindBridge));
    bool shares = false;
    for (const pci::GroupMember& m : group->members) {
        std::printf("group %u member %s driver %s\n", group->id, m.address.to_string().c_str(),
                    m.driver.value_or("(none)").c_str());
        shares = shares || m.address.to_string() == kNvmeBehindBridge;
    }
    check(shares, fmt::format("{} and {} are not in one IOMMU group (group {})", kEduBehindBridge, kNvmeBehindBridge,
                              group->id));
    pci::check_vfio_pci_loaded("/sys", std::string(kEduBehindBridge));
    for (const pci::GroupMember& m : group->members) {
        if (m.address.to_string() == kEduBehindBridge) pci::bind_to_vfio_pci("/sys", m, pci::kVfioBindTimeout);
    }
    pci::OpenOptions options;
    options.bind_vfio = false;
    options.vfio_interface = pci::VfioInterface::Group;
    try {
        auto dev = pci::open_device(address(kEduBehindBridge), options);
        throw TestFailure{fmt::format("{}: opened although {} in its group is on nvme", kEduBehindBridge,
                                      kNvmeBehindBridge)};
    } catch (const UnsupportedError& e) {
        std::string text = e.what();
        std::printf("refused: %s\n", text.c_str());
        for (std::string needle : {std::string("not viable"), std::string(kNvmeBehindBridge), std::string("nvme")}) {
            check(text.find(needle) != std::string::npos,
                  fmt::format("{}: the refusal does not mention '{}': {}", kEduBehindBridge, needle, text));
        }
    }
}

}  // namespace baregpu::qemu
