#include "drivers/pci/pci_device.hpp"

#include "base/error.hpp"

#include <cerrno>
#include <fmt/format.h>
#include <poll.h>
#include <thread>
#ifdef __linux__
#include <sys/eventfd.h>  // interrupt vectors (vfio, the simulated bus); the usb backend has none
#endif
#include <unistd.h>

namespace baregpu::pci {

PciDevice::PciDevice(std::string name, PciAddress address) : name_(std::move(name)), address_(address) {}

PciDevice::~PciDevice() = default;

PciIdentity PciDevice::identity() {
    PciIdentity id;
    id.vendor_id = config_read16(cfg::kVendorId);
    id.device_id = config_read16(cfg::kDeviceId);
    id.subsystem_vendor_id = config_read16(cfg::kSubsystemVendorId);
    id.subsystem_id = config_read16(cfg::kSubsystemId);
    uint32_t rev_class = config_read32(cfg::kRevisionId);
    id.revision = static_cast<uint8_t>(rev_class & 0xff);
    id.class_code = rev_class >> 8;
    return id;
}

const BarInfo& PciDevice::bar_info(unsigned index) const {
    if (index >= kBarCount) throw Error(name_, fmt::format("there is no BAR{}: a function has BAR0..BAR5", index));
    return bars_[index];
}

MmioRegion& PciDevice::bar(unsigned index) {
    const BarInfo& info = bar_info(index);
    if (!info.is_memory()) {
        throw Error(name_, fmt::format("cannot map {}", info.describe()));
    }
    if (!mapped_[index]) mapped_[index] = map_bar(index);
    return *mapped_[index];
}

void PciDevice::set_bus_master(bool enable) {
    uint16_t command = config_read16(cfg::kCommand);
    uint16_t wanted = enable ? (command | cfg::kCommandMaster) : (command & ~cfg::kCommandMaster);
    if (wanted != command) config_write16(cfg::kCommand, wanted);
    uint16_t now = config_read16(cfg::kCommand);
    if (now == 0xffff) throw DeviceLostError(name_, "command register reads all-ones: the device is gone");
    if (((now & cfg::kCommandMaster) != 0) != enable) {
        throw ProtocolError(name_, fmt::format("bus master enable did not stick: wrote command 0x{:04x}, read back "
                                               "0x{:04x}",
                                               wanted, now));
    }
}

int PciDevice::interrupt_fd(unsigned vector) const {
    if (vector >= irq_fds_.size()) {
        throw Error(name_, fmt::format("interrupt vector {} is not enabled ({} enabled)", vector, irq_fds_.size()));
    }
    return irq_fds_[vector].get();
}

uint64_t PciDevice::wait_interrupt(unsigned vector, std::chrono::nanoseconds timeout) {
    int fd = interrupt_fd(vector);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        // Round up so a sub-millisecond remainder still polls once more.
        int poll_ms = left.count() < 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30));
        pollfd pfd{fd, POLLIN, 0};
        int rc = ::poll(&pfd, 1, poll_ms);
        if (rc < 0) {
            if (errno == EINTR) continue;
            throw SystemError(name_, fmt::format("poll on the eventfd of interrupt vector {}", vector), errno);
        }
        if (rc == 0) {
            if (std::chrono::steady_clock::now() >= deadline) return 0;
            continue;
        }
        uint64_t count = 0;
        if (::read(fd, &count, sizeof count) != sizeof count) {
            if (errno == EAGAIN || errno == EINTR) continue;
            throw SystemError(name_, fmt::format("read of the eventfd of interrupt vector {}", vector), errno);
        }
        return count;
    }
}

bool PciDevice::supports_function_reset() {
    auto exp = find_capability(cfg::kCapPciExpress);
    if (!exp) return false;
    return (config_read32(static_cast<uint16_t>(*exp + cfg::kExpDevCap)) & cfg::kExpDevCapFlr) != 0;
}

void PciDevice::set_dma_address_bits(unsigned bits) {
    if (bits < 12 || bits > 64) {
        throw Error(name_, fmt::format("a DMA address width of {} bits is not plausible (12..64)", bits));
    }
    dma_address_bits_ = bits;
}

void PciDevice::dma_window_write(BusAddress address, std::span<const std::byte> data) {
    throw UnsupportedError(name_, fmt::format("dma_window_write of {} bytes at {:#x}: the {} backend has no DMA windows (use alloc_dma)",
                                              data.size(), address.value(), backend()));
}

void PciDevice::dma_window_read(BusAddress address, std::span<std::byte> out) {
    throw UnsupportedError(name_, fmt::format("dma_window_read of {} bytes at {:#x}: the {} backend has no DMA windows (use alloc_dma)",
                                              out.size(), address.value(), backend()));
}

void PciDevice::dma_window_read_arm(BusAddress address, uint64_t bytes) {
    throw UnsupportedError(name_, fmt::format("dma_window_read_arm of {} bytes at {:#x}: the {} backend has no DMA windows (use alloc_dma)",
                                              bytes, address.value(), backend()));
}

void PciDevice::delay(std::chrono::nanoseconds duration) { std::this_thread::sleep_for(duration); }

std::chrono::nanoseconds PciDevice::now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch());
}

void PciDevice::check_alive() {
    if (config_read16(cfg::kVendorId) == 0xffff) {
        throw DeviceLostError(name_, "config space reads all-ones: the device was removed or its link is down");
    }
}

UniqueFd PciDevice::make_eventfd(const std::string& device) {
#ifdef __linux__
    int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0) throw SystemError(device, "eventfd for an interrupt vector", errno);
    return UniqueFd(fd);
#else
    throw UnsupportedError(device, "interrupt eventfds are Linux-only (the usb backend, the one used elsewhere, polls)");
#endif
}

// ---- peer-to-peer ----

std::optional<std::string> PciDevice::peer_refusal(PciDevice& owner) {
    if (&owner == this) return std::string("a device does not reach its own BAR as a peer");
    if (owner.backend() == "usb") {
        return fmt::format("no peer access: {} sits behind a USB bridge, whose BARs are reached only through the bridge's own "
                           "transfers; peer-to-peer DMA needs both devices on PCIe", owner.name());
    }
    if (owner.backend() != backend()) {
        return fmt::format("{} is driven through {} and {} through {}: the two are not on one bus this process can map", name_,
                           backend(), owner.name(), owner.backend());
    }
    return std::nullopt;
}

std::unique_ptr<BusMapping> PciDevice::map_peer_bar(PciDevice& owner, unsigned bar, uint64_t offset, uint64_t size) {
    if (std::optional<std::string> why = peer_refusal(owner)) {
        throw UnsupportedError(name_, fmt::format("cannot reach BAR{} of {}: {}", bar, owner.name(), *why));
    }
    const BarInfo& info = owner.bar_info(bar);
    if (!info.is_memory()) throw UnsupportedError(name_, fmt::format("cannot reach {} of {}: not a memory BAR", info.describe(), owner.name()));
    if (size == 0 || offset > info.size || size > info.size - offset) {
        throw UnsupportedError(name_, fmt::format("small BAR: [{:#x}, {:#x}) is outside BAR{} of {} ({}); a peer reaches only what "
                                                  "the BAR decodes",
                                                  offset, offset + size, bar, owner.name(), format_size(info.size)));
    }
    return map_peer_bar_impl(owner, bar, offset, size);
}

std::unique_ptr<BusMapping> PciDevice::map_peer_bar_impl(PciDevice& owner, unsigned bar, uint64_t, uint64_t) {
    throw UnsupportedError(name_, fmt::format("cannot reach BAR{} of {}: the {} backend has no peer mappings", bar, owner.name(), backend()));
}

std::unique_ptr<BusMapping> PciDevice::map_foreign_host(std::span<std::byte> memory) {
    throw UnsupportedError(name_, fmt::format("cannot map {} of another device's host memory: the {} backend has no peer mappings",
                                              format_size(memory.size()), backend()));
}

}  // namespace baregpu::pci
