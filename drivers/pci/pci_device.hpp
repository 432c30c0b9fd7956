// PciDevice: one PCI function owned by this process, whatever carries it — VFIO, sysfs,
// the simulated bus, or a USB bridge. Drivers (drivers/am, drivers/nv) see only this.
#pragma once

#include "base/unique_fd.hpp"
#include "drivers/pci/bar.hpp"
#include "drivers/pci/config_space.hpp"
#include "drivers/pci/dma_buffer.hpp"
#include "drivers/pci/mmio_region.hpp"
#include "drivers/pci/pci_address.hpp"
#include "drivers/pci/peer_mapping.hpp"

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::pci {

enum class InterruptKind { Msi, MsiX };

// What the link between the host and the function can do. Drivers pick their strategy from it
// (ring sizes, where DMA targets live, polling vs interrupts) instead of asking which backend
// they run on. The defaults describe a PCIe slot; the usb backend overrides them.
struct LinkCapabilities {
    bool bar_mmap = true;  // BARs can be mapped into the host's address space (MmioRegion::direct)
    bool host_dma = true;  // alloc_dma works: the device can DMA into host memory the CPU maps
    bool interrupts = true;  // enable_interrupts works
    uint64_t host_dma_bytes = ~uint64_t{0};  // how much device-visible system memory there is
    bool register_round_trip = false;  // every register access is a transfer (USB): batch and poll rarely
    // When host_dma is false: the fixed bus ranges the device can DMA into instead (the USB
    // bridge's SRAM), reached from the host through dma_window_write / dma_window_read.
    struct Window {
        uint64_t bus_address = 0;
        uint64_t size = 0;
        uint64_t host_granule = 1;  // dma_window_write/read start on a multiple of this from the window's base
        // Non-zero: a host read of this window is a handshake. dma_window_read_arm first, then the
        // device writes anything to bus address `read_trigger`, then dma_window_read takes the data
        // (the ASM2464's SRAM: the engine sends nothing before a device write to 0x822000).
        uint64_t read_trigger = 0;
        // Without a read_trigger: how many bytes from the window's base the host reads directly
        // (dma_window_read with no arm); 0: the host cannot read the window back.
        uint64_t direct_read_bytes = 0;
    };
    std::vector<Window> dma_windows;
};

// One DMA of the device the IOMMU refused (no mapping at that IOVA).
struct IommuFaultRecord {
    BusAddress address;
    uint64_t length = 0;
    bool write = false;
};

struct PciIdentity {
    uint16_t vendor_id = 0;
    uint16_t device_id = 0;
    uint16_t subsystem_vendor_id = 0;
    uint16_t subsystem_id = 0;
    uint8_t revision = 0;
    uint32_t class_code = 0;  // base << 16 | sub << 8 | prog-if
};

class PciDevice : public ConfigSpace {
public:
    ~PciDevice() override;
    PciDevice(const PciDevice&) = delete;
    PciDevice& operator=(const PciDevice&) = delete;

    // The name errors carry: "0000:03:00.0", or "sim:0000:00:01.0" on the simulated bus.
    const std::string& name() const { return name_; }
    const PciAddress& address() const { return address_; }
    // "vfio", "sysfs", "sim", "usb"
    virtual std::string_view backend() const = 0;
    // What the user must know about how this device is driven (the sysfs backend and vfio's
    // no-IOMMU mode: no IOMMU protection); empty when there is nothing to say.
    const std::string& warning() const { return warning_; }

    std::string config_name() const override { return name_; }
    PciIdentity identity();

    // BARs. info is cached at open; bar() maps on first use and the mapping lives as long as
    // the device. Mapping an unimplemented or I/O BAR throws naming the BAR.
    const BarInfo& bar_info(unsigned index) const;
    MmioRegion& bar(unsigned index);

    // Bus mastering gates the device's DMA. Written and read back (a device that drops the
    // bit is reported).
    void set_bus_master(bool enable);
    bool bus_master() { return (config_read16(cfg::kCommand) & cfg::kCommandMaster) != 0; }

    // How many address bits the device can put on the bus when it DMAs (QEMU's edu: 28, AMD
    // GPUs: 44, NVIDIA: 47). alloc_dma() only hands out bus addresses below 1 << bits. Default 64.
    void set_dma_address_bits(unsigned bits);
    unsigned dma_address_bits() const { return dma_address_bits_; }
    uint64_t dma_address_limit() const {
        return dma_address_bits_ >= 64 ? ~uint64_t{0} : (uint64_t{1} << dma_address_bits_);
    }

    // Pinned host memory with bus addresses the device can use. size is rounded up to whole
    // pages. Throws UnsupportedError when the page size is unavailable (no huge pages reserved),
    // SystemError when pinning fails (RLIMIT_MEMLOCK: the message says so).
    virtual std::unique_ptr<DmaBuffer> alloc_dma(uint64_t size, PageSize page_size = PageSize::k4K) = 0;

    // Interrupts delivered to eventfds, one per vector. UnsupportedError where the backend has
    // no interrupt path (sysfs: drivers poll).
    virtual void enable_interrupts(InterruptKind kind, unsigned vectors) = 0;
    virtual void disable_interrupts() = 0;
    unsigned interrupt_vectors() const { return static_cast<unsigned>(irq_fds_.size()); }
    int interrupt_fd(unsigned vector) const;
    // Waits until `vector` fires and consumes it; returns how many times it fired since the
    // last wait (eventfd counter), 0 on timeout.
    uint64_t wait_interrupt(unsigned vector, std::chrono::nanoseconds timeout);

    // Function-level reset (PCIe DevCap FLR). reset_function() throws UnsupportedError naming
    // the device when it has none.
    bool supports_function_reset();
    virtual void reset_function() = 0;

    // Waits as the hardware requires (after FLR, between reset steps). Real backends sleep;
    // the simulated bus advances its modelled clock instead, so tests do not wait for real.
    virtual void delay(std::chrono::nanoseconds duration);
    // The clock waits measure themselves with: the steady clock on real backends, the modelled
    // clock on the simulated bus (which delay() advances), so a simulated timeout costs no wall time.
    virtual std::chrono::nanoseconds now();

    virtual LinkCapabilities link_capabilities() const { return {}; }
    // Host access to a LinkCapabilities::dma_windows range (no CPU mapping exists). The base
    // class has no windows and throws UnsupportedError naming the device.
    virtual void dma_window_write(BusAddress address, std::span<const std::byte> data);
    virtual void dma_window_read(BusAddress address, std::span<std::byte> out);
    // For a window with a read_trigger: ready a read of `bytes` at `address`; the next
    // dma_window_read of exactly that range returns once the device wrote the trigger.
    virtual void dma_window_read_arm(BusAddress address, uint64_t bytes);
    // The same write without waiting for it (pipelining): `data` must stay untouched until
    // dma_window_wait(token) returns. Where a backend cannot overlap (or for the byte-wise
    // windows) it writes synchronously and returns token 0, which dma_window_wait ignores.
    virtual uint64_t dma_window_write_async(BusAddress address, std::span<const std::byte> data) {
        dma_window_write(address, data);
        return 0;
    }
    virtual void dma_window_wait(uint64_t token) { (void)token; }

    // Throws DeviceLostError when config space reads all-ones (surprise removal, link down).
    void check_alive();

    // Peer-to-peer DMA (peer_mapping.hpp). Makes [offset, offset + size) of `owner`'s memory BAR
    // `bar` a DMA target of this device and returns where this device reaches it (an IOVA, or the
    // BAR's bus address where nothing translates). The caller owns the mapping; `owner` must
    // outlive it. Throws UnsupportedError naming the reason when the platform cannot: peer_refusal,
    // a range past the BAR's end, a backend without peer mappings.
    std::unique_ptr<BusMapping> map_peer_bar(PciDevice& owner, unsigned bar, uint64_t offset, uint64_t size);
    // Host memory another device allocated (a peer's signals), made a DMA target of this device.
    // `memory` (page aligned) must stay mapped while the BusMapping lives. The base class refuses.
    virtual std::unique_ptr<BusMapping> map_foreign_host(std::span<std::byte> memory);
    // Why this device cannot DMA into `owner`'s BARs, nullopt when it can. The base class refuses
    // across backends and for itself; backends add their topology rules.
    virtual std::optional<std::string> peer_refusal(PciDevice& owner);
    // The device's DMAs the IOMMU refused since the last call, where the platform tells us: the
    // simulated bus does. VFIO type1 does not (the host kernel logs them: AMD-Vi IO_PAGE_FAULT,
    // DMAR fault), so real backends return none and a refused posted write shows only as lost data.
    virtual std::vector<IommuFaultRecord> take_iommu_faults() { return {}; }

protected:
    PciDevice(std::string name, PciAddress address);

    // Called by backends once config space works: sizes/reads the BARs.
    void set_bar_infos(const std::array<BarInfo, kBarCount>& bars) { bars_ = bars; }
    // Backend hook: map BAR `index` (a memory BAR, checked by bar()).
    virtual MmioRegion map_bar(unsigned index) = 0;
    // Backend hook for map_peer_bar once the common checks passed. The base class refuses.
    virtual std::unique_ptr<BusMapping> map_peer_bar_impl(PciDevice& owner, unsigned bar, uint64_t offset, uint64_t size);

    std::vector<UniqueFd>& irq_fds() { return irq_fds_; }
    void set_warning(std::string text) { warning_ = std::move(text); }
    static UniqueFd make_eventfd(const std::string& device);

private:
    std::string name_;
    PciAddress address_;
    std::array<BarInfo, kBarCount> bars_{};
    std::array<std::optional<MmioRegion>, kBarCount> mapped_{};
    std::vector<UniqueFd> irq_fds_;
    std::string warning_;
    unsigned dma_address_bits_ = 64;
};

}  // namespace baregpu::pci
