// The one place that composes (ARCHITECTURE.md, the dependency rule): which devices this build
// has besides the GPUs found on the PCI bus. Today that is the host CPU and the simulated devices
// in drivers/sim; registry.cpp keeps them in one table, so a new simulated GPU ("sim-am:navi31",
// "sim-nv:ad102") is one entry there. It is also where each HCQ backend's scheme is registered
// with hcq's registry.
//
// This header names no driver and no model: a tool asks for descriptions, never for types.
#pragma once

#include "hcq/registry.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::registry {

struct BuiltinDevice {
    std::string name;  // the device URI: "cpu", "sim-edu", later "sim-am:navi31"
    std::string kind;  // "cpu", "simulated", or "usb" (a GPU behind an ASM24xx bridge, found by libusb)
    bool hcq_device = false;  // runs HCQ queues; false for test devices of lower layers
    std::string summary;  // one line for humans: what it is
};

// The host CPU first, then every simulated device in table order. Simulated entries are
// described by building the model on a simulated bus and reading what it presents (IDs, BARs),
// so a description cannot drift from the model.
std::vector<BuiltinDevice> builtin_devices();

// Registers every HCQ backend this build has with `registry` (cpu, sim-am). Call once, before
// opening devices; tools and tests that open devices do.
void register_backends(hcq::Registry& registry);

// Fault injection on a simulated device opened through the registry, for tests of fault
// handling and recovery. Returns false (and does nothing) when `device` is not a simulated chip
// that can do it. inject_dispatch_hang: while set, the compute queue's next dispatch never
// completes (the simulated MEC stays on it) until cleared, or until the queue is dequeued
// (Device::recover does that).
bool inject_dispatch_hang(hcq::Device& device, bool hang);
// The same for sim-qcom devices (the simulated KGSL device): inject_kgsl_hang: while set, every
// context's command processor stops before its next submission (its timestamps stop retiring);
// inject_kgsl_wait_error: every IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID fails with errno `err`
// until set back to 0; inject_kgsl_fault: every context takes a GPU fault (invalidated, as KGSL
// does with KGSL_CONTEXT_NO_FAULT_TOLERANCE), its kernel log saying `why`.
bool inject_kgsl_hang(hcq::Device& device, bool hang);

// The simulated bus under a sim-am / sim-nv device (peer-to-peer tests, `baregpu p2p`): what the
// device's DMA moved to and from host memory and to and from peers' BARs, its IOMMU faults, and
// the bus's modelled clock. nullopt when `device` is not on a simulated bus.
struct SimBusTraffic {
    uint64_t host_bytes_read = 0;  // device reads of host memory
    uint64_t host_bytes_written = 0;
    uint64_t peer_bytes_read = 0;  // device reads of another function's BAR through a peer mapping
    uint64_t peer_bytes_written = 0;
    uint64_t iommu_faults = 0;
    uint64_t bus_now_ns = 0;  // the bus's modelled clock
    uint64_t dma_ns = 0;  // modelled link time of the device's own DMA (host and peer), in ns
};
std::optional<SimBusTraffic> sim_bus_traffic(hcq::Device& device);
// The device's IOMMU faults as the bus recorded them (each names the missing peer mapping when
// it was one), oldest first.
std::vector<std::string> sim_iommu_faults(hcq::Device& device);
// Removes every peer mapping from the device's IOMMU domain behind its driver's back (a platform
// tearing them down): the next peer DMA faults. Returns how many went.
size_t drop_sim_peer_mappings(hcq::Device& device);
bool inject_kgsl_wait_error(hcq::Device& device, int err);
bool inject_kgsl_fault(hcq::Device& device, const std::string& why);

// "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz, 2 cores" from /proc/cpuinfo's text and the number
// of online CPUs. Reads "model name" (x86), else "Model"/"Hardware"/"CPU part" (Arm); "unknown
// CPU model" when none is there. Pure, for tests.
std::string describe_cpu(std::string_view proc_cpuinfo, unsigned online_cpus);

}  // namespace baregpu::registry
