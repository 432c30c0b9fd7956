// The `usb` backend: a PciDevice behind an ASM24xx USB bridge (drivers/usb). Config space is
// carried by configuration TLPs, BAR accesses by streaming memory TLPs (writes to prefetchable
// BARs batched into one stream, repeated doorbell values skipped), and the GPU's "host memory"
// is the bridge's SRAM. Bring-up programs the bridges' bus numbers and windows and assigns the
// GPU's BARs, as tinygrad's pci_setup_usb_bars does (runtime/support/system.py).
#pragma once

#include "drivers/pci/pci_device.hpp"
#include "drivers/usb/bridge.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::pci {

struct UsbOpenOptions {
    // BARs whose writes only the host makes (doorbells): a write of the value already written
    // there, with no other write to the device in between (a ring update or a reset would be new
    // work to announce), is skipped. The device must not change what it reads there, so only the
    // composer that knows the GPU names them.
    std::vector<unsigned> write_once_bars;
};

// Where the bring-up puts things (tinygrad system.py USBPCIDevice): the GPU on bus 4 behind
// bridges on buses 0..3, non-prefetchable BARs from 256 MB, prefetchable from 32 GB, each on a
// 2 MB boundary. Both stay clear of the SRAM windows at 0x200000..0x823000 the GPU DMAs into.
inline constexpr uint8_t kUsbGpuBus = 4;
inline constexpr uint64_t kUsbMemBase = 0x10000000;
inline constexpr uint64_t kUsbPrefMemBase = 32ull << 30;

// Opens the GPU behind the bridge `usb` speaks to, in whichever protocol its firmware speaks
// (usb::open_bridge). The PciDevice is named after the USB device ("usb:3-2", "usb:sim").
std::unique_ptr<PciDevice> open_usb_device(std::unique_ptr<usb::UsbBackend> usb, const UsbOpenOptions& options = {});

// The bridge's transfer counters, when `device` is a usb-backend device (nullptr otherwise).
const usb::TransferCounters* usb_transfer_counters(PciDevice& device);
// The bridge's firmware and transport ("stock firmware, SCSI over UAS ..."), for a usb-backend device.
std::optional<std::string> usb_bridge_firmware(PciDevice& device);
// Writes skipped because the value was unchanged (write_once_bars).
uint64_t usb_coalesced_writes(PciDevice& device);

}  // namespace baregpu::pci
