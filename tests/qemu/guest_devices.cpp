#include "tests/qemu/guest_devices.hpp"

#include "base/error.hpp"
#include "drivers/sim/edu.hpp"
#include "tests/qemu/guest_runner.hpp"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iterator>
#include <thread>

namespace baregpu::qemu {

namespace edu = sim::edu;

pci::PciAddress address(std::string_view text) {
    auto parsed = pci::PciAddress::parse(text);
    if (!parsed) throw TestFailure{fmt::format("{} is not a PCI address", text)};
    return *parsed;
}

bool device_present(std::string_view addr) {
    return std::filesystem::exists(fmt::format("/sys/bus/pci/devices/{}", addr));
}

std::string bound_driver(std::string_view addr) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(fmt::format("/sys/bus/pci/devices/{}/driver", addr), ec);
    return ec ? std::string{} : target.filename().string();
}

std::unique_ptr<pci::PciDevice> open_vfio(std::string_view addr) {
    if (!device_present(addr)) throw SkipTest{fmt::format("{}: not attached by the harness", addr)};
    pci::OpenOptions options;
    options.backend = pci::Backend::Vfio;
    options.bind_vfio = true;
    options.vfio_interface = pci::VfioInterface::Group;
    return pci::open_device(address(addr), options);
}

void edu_dma(pci::PciDevice& dev, EduDirection direction, uint64_t bus_address, uint64_t edu_offset, uint64_t count,
             bool irq) {
    pci::MmioRegion& bar = dev.bar(0);
    uint64_t device_side = edu::kBufferAddress + edu_offset;
    bool to_ram = direction == EduDirection::FromDevice;
    bar.write64(BarOffset{edu::kRegDmaSource}, to_ram ? device_side : bus_address);
    bar.write64(BarOffset{edu::kRegDmaDestination}, to_ram ? bus_address : device_side);
    bar.write64(BarOffset{edu::kRegDmaCount}, count);
    uint32_t command = edu::kDmaStart | (to_ram ? edu::kDmaToRam : 0) | (irq ? edu::kDmaIrqOnDone : 0);
    bar.write32(BarOffset{edu::kRegDmaCommand}, command);
    // edu runs the transfer from a timer 100 ms (virtual) after the command; under TCG that is
    // roughly as long in wall time. The start bit clears when it is done.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((bar.read32(BarOffset{edu::kRegDmaCommand}) & edu::kDmaStart) != 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            throw TestFailure{fmt::format("{}: edu DMA of {} bytes {} bus 0x{:x} still running after 10 s (command "
                                          "register 0x{:x})",
                                          dev.name(), count, to_ram ? "to" : "from", bus_address,
                                          bar.read32(BarOffset{edu::kRegDmaCommand}))};
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

bool break_dma_requested() {
    std::ifstream cmdline("/proc/cmdline");
    std::string text{std::istreambuf_iterator<char>(cmdline), std::istreambuf_iterator<char>()};
    return text.find("baregpu.break=dma") != std::string::npos;
}

}  // namespace baregpu::qemu
