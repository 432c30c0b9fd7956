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
#include "base/error.hpp"
#include "drivers/pci/dma_buffer.hpp"
#include "drivers/pci/pci_address.hpp"

#include <algorithm>
#include <cstdint>
#include <fmt/format.h>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// What an exporter's peer_segments returns, from its mappings: a std::map from start VA to a
// mapping that has either `host` (a DmaBuffer) or device memory, whose pieces `pieces(mapping)`
// gives as {BAR offset, size} pairs in order. Throws Error naming `device` and the first address
// of [va, va + size) that nothing maps.
template <class Mappings, class Pieces>
std::vector<PeerMemoryExporter::Segment> exported_segments(const Mappings& mappings, uint64_t va, uint64_t size,
                                                           const std::string& device, Pieces pieces) {
    std::vector<PeerMemoryExporter::Segment> out;
    for (uint64_t at = va, left = size; left > 0;) {
        auto it = mappings.upper_bound(at);
        if (it == mappings.begin()) throw Error(device, fmt::format("GPU VA {:#x} is not mapped: a peer cannot reach it", at));
        --it;
        uint64_t offset = at - it->first;
        const uint64_t before = left;
        if (it->second.host) {
            const DmaBuffer& host = *it->second.host;
            if (offset < host.size()) {
                const uint64_t n = std::min(left, host.size() - offset);
                out.push_back({n, 0, host.cpu().subspan(offset, n)});
                left -= n;
            }
        } else {
            for (const auto& [bar_offset, piece] : pieces(it->second)) {
                if (left == 0) break;
                if (offset >= piece) {
                    offset -= piece;
                    continue;
                }
                const uint64_t n = std::min(left, piece - offset);
                out.push_back({n, bar_offset + offset, {}});
                left -= n;
                offset = 0;
            }
        }
        if (left == before) throw Error(device, fmt::format("GPU VA {:#x} is not mapped: a peer cannot reach it", at));
        at += before - left;
    }
    return out;
}

// peer_path_refusal for two functions under <sysfs_root>/bus/pci/devices (vfio and sysfs backends).
std::optional<std::string> sysfs_peer_refusal(const std::string& sysfs_root, PciAddress requester, PciAddress owner);

// The large-BAR requirement: every byte of `memory_bytes` of device memory must be decoded by the
// BAR peers target. Throws UnsupportedError naming the device, the BAR and both sizes.
void require_large_bar(PciDevice& owner, unsigned bar, uint64_t memory_bytes);

}  // namespace baregpu::pci
