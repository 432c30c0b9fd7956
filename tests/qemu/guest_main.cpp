// guest_tests: the static program /init runs in the QEMU guest (tests/qemu/run_qemu_tests.py).
// With no arguments it runs the whole batch; names on the command line run just those.
#include "tests/qemu/guest_runner.hpp"
#include "tests/qemu/guest_tests.hpp"

#include <array>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    using namespace baregpu::qemu;
    // Order matters once: the sysfs test needs edu on no driver, before vfio-pci takes it.
    const std::array tests{
        GuestTest{"sysfs-edu-resource0-pagemap-dma", edu_sysfs_backend},
        GuestTest{"vfio-edu-bind", edu_bind_vfio},
        GuestTest{"vfio-edu-config-space", edu_config_space},
        GuestTest{"vfio-edu-bar0-registers", edu_bar0_registers},
        GuestTest{"vfio-edu-dma-both-ways", edu_dma_both_ways},
        GuestTest{"vfio-edu-msi-interrupt", edu_msi_interrupt},
        GuestTest{"vfio-edu-unmapped-iova-faults", edu_unmapped_iova_faults},
        GuestTest{"device-lock-two-processes", device_lock_two_processes},
        GuestTest{"vfio-group-not-viable", group_not_viable},
        GuestTest{"vfio-nvme-registers", nvme_registers},
        GuestTest{"vfio-nvme-identify-read-block", nvme_identify_and_read},
        GuestTest{"vfio-peer-bar-edu-reads-nvme", vfio_peer_bar_dma},
    };
    std::vector<std::string> only(argv + 1, argv + argc);
    return run_batch(tests, only, std::chrono::seconds(60)) == 0 ? 0 : 1;
}
