// Peer-to-peer DMA targets: a range of one device's bus view (an IOVA behind its IOMMU, or a
// plain bus address without one) that reaches memory the device does not own — another device's
// BAR (VRAM through the BAR), or host memory another device allocated (its signals). A driver
// asks its PciDevice for one (PciDevice::map_peer_bar / map_foreign_host) and puts the address in
// its page tables; destroying the BusMapping removes the IOMMU mapping again.
//
// Whether two devices can reach each other is the platform's business; what refuses and why is
// decided here, so every backend says it the same way:
//   - no peer access: a device behind a USB bridge forwards only its own transfers;
//   - different root complexes: peer writes are not forwarded between host bridges
//     (the PCIe Base Spec leaves routing between root ports to the implementation; Linux's
//     drivers/pci/p2pdma.c allows it only through a common upstream bridge or a whitelisted host);
//   - small BAR: a peer reaches only what the BAR decodes; with a 256 MiB BAR in front of 24 GiB
//     of VRAM the rest is out of reach (enable Resizable BAR / "Above 4G decoding").
#pragma once

#include "base/address.hpp"
#include "drivers/pci/pci_address.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>
#include <string>
#include <string_view>

namespace baregpu::pci {

class PciDevice;

class BusMapping {
public:
    // `release` removes the mapping; it must not throw.
    BusMapping(BusAddress address, uint64_t size, std::string what, std::function<void()> release);
    ~BusMapping();
    BusMapping(const BusMapping&) = delete;
    BusMapping& operator=(const BusMapping&) = delete;

    // Where the requesting device's DMA reaches the memory: an IOVA in its IOMMU domain, or the
    // bus address itself when nothing translates (sysfs).
    BusAddress address() const { return address_; }
    uint64_t size() const { return size_; }
    // "BAR1+0x400000 of 0000:01:00.0 (bus address 0x4000400000)", for messages.
    const std::string& what() const { return what_; }

private:
    BusAddress address_;
    uint64_t size_;
    std::string what_;
    std::function<void()> release_;
};

// The sysfs path of each device (the link /sys/bus/pci/devices/<address> resolves to, e.g.
// "/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0"): nullopt when peers can reach each other
// through a common host bridge, else why not. Both paths must be resolved (realpath).
std::optional<std::string> peer_path_refusal(std::string_view requester_path, std::string_view owner_path);

// What a GPU driver tells a peer's driver about its memory, so the peer can map it (drivers/am
// and drivers/nv implement it on their HCQ devices; a peer's driver finds it with dynamic_cast).
class PeerMemoryExporter {
public:
    struct Segment {
        uint64_t size = 0;
        uint64_t bar_offset = 0;  // device memory: where it sits in peer_bar()
        std::span<std::byte> host;  // host memory (the exporter's DMA buffers): its bytes; empty for device memory
    };
    // The function a peer DMAs into, and the BAR that shows device memory (AMD BAR0, NVIDIA BAR1).
    virtual PciDevice& peer_pci() = 0;
    virtual unsigned peer_bar() const = 0;
    // How much device memory that BAR must show (the large-BAR requirement).
    virtual uint64_t peer_memory_bytes() const = 0;
    // The memory behind [va, va + size) of the exporter's GPU VA space (page aligned), in order.
    // Throws Error naming the address when part of it is not mapped.
    virtual std::vector<Segment> peer_segments(uint64_t va, uint64_t size) = 0;

protected:
    ~PeerMemoryExporter() = default;
};

// peer_path_refusal for two functions under <sysfs_root>/bus/pci/devices (vfio and sysfs backends).
std::optional<std::string> sysfs_peer_refusal(const std::string& sysfs_root, PciAddress requester, PciAddress owner);

// The large-BAR requirement: every byte of `memory_bytes` of device memory must be decoded by the
// BAR peers target. Throws UnsupportedError naming the device, the BAR and both sizes.
void require_large_bar(PciDevice& owner, unsigned bar, uint64_t memory_bytes);

}  // namespace baregpu::pci
