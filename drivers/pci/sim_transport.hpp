// The cost model of a simulated link: what one config access, MMIO access or DMA transfer
// costs in modelled time. Nothing sleeps; the bus adds these up so tests and benchmarks can
// report bring-up cost and copy throughput in modelled time and round trips.
#pragma once

#include <cstdint>
#include <string>

namespace baregpu::pci::sim {

struct Transport {
    std::string name;
    uint64_t config_ns = 0;  // one config read or write, round trip
    uint64_t mmio_read_ns = 0;  // non-posted: the CPU waits for the completion
    uint64_t mmio_write_ns = 0;  // posted: the CPU's cost to issue it
    double mmio_bytes_per_ns = 0;  // block transfers through a BAR (memcpy to VRAM)
    uint64_t dma_setup_ns = 0;  // per device-initiated transfer
    double dma_bytes_per_ns = 0;  // device-initiated bandwidth (1 byte/ns = 1 GB/s)
    uint64_t completion_timeout_ns = 0;  // what a read that never completes costs
    // Whether the host can map a memory BAR into its address space (PCIe: yes; a USB bridge
    // forwards every access as a transfer: no). Models' BarSpec::cpu_mappable needs it.
    bool bar_mmap = true;

    // A GPU in a PCIe 4.0 x16 slot: ~1 µs uncached read round trip, ~25 GB/s DMA; the PCIe
    // completion timeout defaults to the 50 µs–50 ms range (PCIe Base Spec 2.4.3), 50 ms taken.
    static Transport pcie_gen4_x16() {
        return {"pcie-gen4-x16", 1500, 1000, 100, 8.0, 500, 25.0, 50'000'000};
    }
    // A GPU behind an ASM2464 bridge over USB 3.2 Gen 2: every register access is a USB
    // control transfer plus a bulk transfer (~125 µs microframes), bulk data ~0.32 GB/s
    // (the copy-in rate tinygrad's commits report for its custom firmware, about 320 MB/s).
    static Transport usb_tunnel() {
        return {"usb-asm24", 250'000, 250'000, 125'000, 0.32, 125'000, 0.32, 50'000'000, /*bar_mmap=*/false};
    }
};

}  // namespace baregpu::pci::sim
