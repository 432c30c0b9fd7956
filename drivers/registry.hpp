// The one place that composes (ARCHITECTURE.md, the dependency rule): it registers every HCQ
// backend's scheme with hcq's registry and builds the simulated devices' models for the drivers
// that run on them. registry.cpp holds what is shared; each vendor's backends are in
// registry_am.cpp (sim-am, am), registry_nv.cpp (sim-nv, sim-nvrm, nv) and registry_qcom.cpp
// (qcom, sim-qcom).
//
// Real GPUs (am:<pci address>, nv:<pci address>) are found under $BAREGPU_SYSFS_ROOT when it is
// set, else /sys: tests point it at a fake sysfs tree (tests/pci/fake_sysfs.hpp).
//
// This header names no driver and no model: a tool asks for descriptions, never for types.
#pragma once

#include "hcq/registry.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::registry {

struct BuiltinDevice {
    std::string name;  // the device URI: "cpu", "sim-edu", "sim-am:navi31"
    std::string kind;  // "cpu", "simulated", "usb" (a GPU behind an ASM24xx bridge, found by libusb) or "kgsl" (qcom:0)
    bool hcq_device = false;  // runs HCQ queues; false for test devices of lower layers
    std::string summary;  // one line for humans: what it is
};

// The host CPU first, then every simulated device in table order. Simulated entries are
// described by building the model on a simulated bus and reading what it presents (IDs, BARs),
// so a description cannot drift from the model.
std::vector<BuiltinDevice> builtin_devices();

// Registers every HCQ backend this build has with `registry`: cpu; am, nv, qcom (real hardware, in
// the order the default device tries them); sim-am, sim-nv, sim-nvrm, sim-qcom. Call once, before
// opening devices; tools and tests that open devices do.
void register_backends(hcq::Registry& registry);

// How the registry opens a real GPU's URI, decided without opening it: the backend, the transport
// (nv: "nvrm" when nvidia.ko is bound, else "nvpci"; ?transport= overrides) and how the PCI
// function is reached ("vfio", "sysfs" with ?access=sysfs; "" for nvrm, which goes through
// nvidia.ko). `baregpu devices` prints the same backend and transport for each GPU. Throws what
// opening would for a GPU that is not there or not driven (naming the URI: "there is no PCI
// function at ..."), and for a URI that is not a real PCI GPU's (am:usb:..., sim-am:...).
struct Route {
    std::string backend;    // "am", "nv"
    std::string transport;  // "nvrm", "nvpci"; "" for am
    std::string access;     // "vfio", "sysfs", or ""
};
Route route(std::string_view uri);

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
// The shader work a sim-am device's chip has interpreted (its own machine code, isa=native),
// summed since the model was made: wave instructions by unit ("salu", "smem", "valu", "vmem_load",
// "vmem_store", "lds", "branch", "other", "instructions"; "vopd": the VALU instructions that were
// dual-issued pairs), "bytes_loaded", "bytes_stored", "footprint_bytes" and "dram_bytes" (the
// distinct pages touched; the DRAM traffic the time model charged),
// "modelled_ns" (drivers/sim/amdgpu/native_exec.hpp's time model). nullopt for other devices.
std::optional<std::map<std::string, double>> sim_shader_counters(hcq::Device& device);
bool inject_kgsl_wait_error(hcq::Device& device, int err);
bool inject_kgsl_fault(hcq::Device& device, const std::string& why);
// Removes the device from its simulated bus (sim-am, sim-nv): `gone` false is a surprise removal
// (config and MMIO reads return all-ones), true a device its backend knows is gone (every
// access throws DeviceLostError). False when `device` is not on a simulated bus.
bool inject_bus_removal(hcq::Device& device, bool gone);

}  // namespace baregpu::registry
