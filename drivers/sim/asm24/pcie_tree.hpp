// The PCIe side of the simulated ASM2464: four type-1 bridge headers on buses 0..3 (device 0)
// between the controller and the slot, the endpoint at 04:00.0, and the bridge SRAM the endpoint
// can DMA into. Routes configuration and memory requests the way PCI-to-PCI bridges do (PCI-to-PCI
// Bridge Architecture Specification 1.2, chapter 3: bus-number and memory-window forwarding),
// so a driver that forgets to number a bridge or open its windows gets Unsupported Request.
#pragma once

#include "drivers/pci/sim_config_space.hpp"
#include "drivers/pci/sim_device_model.hpp"
#include "drivers/usb/tlp.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::sim::asm24 {

inline constexpr uint8_t kEndpointBus = 4;  // tinygrad's gpu_bus (system.py USBPCIDevice)
inline constexpr unsigned kBridgeCount = 4;

// One type-1 header with register semantics for what a driver programs: command, bus numbers,
// memory and prefetchable windows, bridge control. Everything else reads as fixed values.
class BridgeHeader {
public:
    BridgeHeader();
    uint32_t read(uint16_t offset, unsigned width) const;
    // Returns a violation text when the write breaks a rule the hardware has ("" otherwise).
    std::string write(uint16_t offset, unsigned width, uint32_t value);

    uint16_t command() const { return static_cast<uint16_t>(read(0x04, 2)); }
    uint8_t secondary() const { return bytes_[0x19]; }
    uint8_t subordinate() const { return bytes_[0x1a]; }
    bool forwards_memory(uint64_t address) const;

private:
    std::array<uint8_t, 4096> bytes_{};
};

class PcieTree : public pci::sim::SimPort {
public:
    using ViolationSink = std::function<void(const std::string& what, const std::string& where, const std::string& source)>;

    PcieTree(std::string name, std::unique_ptr<pci::sim::SimDeviceModel> endpoint, std::atomic<uint64_t>& clock, ViolationSink sink);
    ~PcieTree() override;

    // A configuration request; status UR when nothing answers at that address.
    usb::tlp::Completion config(const usb::tlp::Request& request);
    // Memory requests from the host. false: no BAR behind open bridge windows claims the address
    // (the caller reports UR / returns all-ones).
    bool memory_read(uint64_t address, std::span<std::byte> out);
    bool memory_write(uint64_t address, std::span<const std::byte> data);

    std::span<std::byte> sram() { return sram_; }
    std::span<std::byte> sys_buf() { return sys_buf_; }
    std::span<std::byte> cq_buf() { return cq_buf_; }
    std::mutex& sram_mutex() { return sram_mutex_; }
    // Device writes that landed in the CQ window (PCIe 0x822000): what releases an SRAM read.
    uint64_t cq_writes() const { return cq_writes_.load(); }
    pci::sim::SimDeviceModel* model() { return model_.get(); }

    // SimPort: what the endpoint model sees.
    bool dma_read(BusAddress address, std::span<std::byte> out) override;
    bool dma_write(BusAddress address, std::span<const std::byte> data) override;
    std::byte* dma_host_memory(BusAddress address, uint64_t bytes) override;
    void raise_interrupt(unsigned vector) override;
    bool bus_master_enabled() override;
    std::span<std::byte> bar_memory(unsigned bar) override;
    void violation(const std::string& what, const std::string& where, const std::string& source) override;
    uint64_t now_ns() const override { return clock_.load(); }
    void spend_ns(uint64_t ns) override { clock_.fetch_add(ns); }
    uint64_t timestamp_ns() override;
    const std::string& device_name() const override { return name_; }

    uint64_t interrupts_dropped() const { return interrupts_dropped_.load(); }

private:
    struct Hit {
        unsigned bar;
        uint64_t offset;
    };
    std::optional<Hit> decode(uint64_t address, uint64_t length);
    bool upstream_path_open() const;
    std::span<std::byte> sram_span(uint64_t address, uint64_t length);

    std::string name_;
    std::atomic<uint64_t>& clock_;
    std::chrono::steady_clock::time_point epoch_;  // the timestamp counter's zero (timestamp_ns)
    ViolationSink sink_;
    std::vector<BridgeHeader> bridges_;
    std::unique_ptr<pci::sim::SimDeviceModel> model_;
    pci::sim::DeviceSpec spec_;
    std::optional<pci::sim::SimConfigSpace> config_;
    mutable std::mutex config_mutex_;
    std::array<std::span<std::byte>, 6> memory_{};
    std::array<std::vector<std::byte>, 6> owned_{};
    std::mutex sram_mutex_;
    std::vector<std::byte> sram_, sys_buf_, cq_buf_;
    std::atomic<uint64_t> interrupts_dropped_{0};
    std::atomic<uint64_t> cq_writes_{0};
};

}  // namespace baregpu::sim::asm24
