// A fake kernel interface tree in a temp dir: sysfs (PCI functions with config, resource,
// resourceN, enable, reset, driver links, driver_override; IOMMU groups; drivers) and /dev, for
// the sysfs and vfio backends' tests. Paths mirror the real ones under OpenOptions' roots.
#pragma once

#include "drivers/pci/open.hpp"
#include "drivers/pci/pci_address.hpp"

#include <atomic>
#include <cstdint>
#include <thread>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::pci::testing {

struct FakeFunction {
    std::vector<uint8_t> config;  // 256 or 4096 bytes (or fewer, to look like a non-root view)
    std::string resource;  // the `resource` file's text; empty: no such file
    std::vector<std::pair<unsigned, uint64_t>> resource_files;  // resourceN files and their sizes
    uint32_t class_code = 0x030000;
    bool reset_file = true;
};

class FakeKernel {
public:
    FakeKernel();
    ~FakeKernel();
    FakeKernel(const FakeKernel&) = delete;
    FakeKernel& operator=(const FakeKernel&) = delete;

    const std::string& root() const { return root_; }
    std::string sysfs() const { return root_ + "/sys"; }
    std::string dev() const { return root_ + "/dev"; }
    std::string device_dir(PciAddress a) const;

    // OpenOptions aimed at this tree (proc stays the real /proc: pagemap needs the real one).
    OpenOptions options(Backend backend) const;

    void add_function(PciAddress a, const FakeFunction& f);
    // A driver directory under bus/pci/drivers with its bind/unbind files.
    void add_driver(const std::string& driver);
    void bind(PciAddress a, const std::string& driver);  // driver link (creates the driver)
    void unbind(PciAddress a);
    void add_to_group(PciAddress a, unsigned group, const std::string& name = "");

    // Plain files standing in for device nodes (/dev/vfio/vfio, /dev/iommu, ...).
    void add_dev_file(const std::string& relative);

    void write_file(const std::string& path, const std::string& text) const;
    std::string read_file(const std::string& path) const;  // "" when missing
    std::vector<uint8_t> read_bytes(const std::string& path, uint64_t offset, size_t n) const;

private:
    std::string root_;
};

// Plays the PCI core while it lives: when drivers_probe names a function whose driver_override
// says vfio-pci, that function is bound to vfio-pci (a thread polls every millisecond).
class FakePciCore {
public:
    explicit FakePciCore(FakeKernel& kernel);
    ~FakePciCore();

private:
    FakeKernel& kernel_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

// An AMD Navi 31-like function (1002:744c, class 0x030000): 64-bit prefetchable BAR0 (256 MiB)
// and BAR2 (2 MiB), I/O BAR4, 32-bit BAR5 (1 MiB); capabilities vendor -> PM -> PCIe (FLR) ->
// MSI -> MSI-X; extended AER -> Resizable BAR.
FakeFunction navi31_like();

// Runs `body` in a child process that has dropped root (uid/gid 65534) and returns what it wrote
// to the pipe given to it, or "cannot drop root" when setresuid fails.
std::string run_as_nobody(const std::function<std::string()>& body);

}  // namespace baregpu::pci::testing
