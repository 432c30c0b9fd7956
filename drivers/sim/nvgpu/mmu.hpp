// The simulated AD102's GPU MMU: walks the page tables a driver wrote into VRAM (or system memory)
// and translates a GPU VA into a VRAM offset or a bus address. Every engine access (PBDMA fetches,
// semaphores, QMDs, CE copies) goes through it; a bad VA gives an MmuFault instead of bytes.
// The entry formats are typed here again on the model's own, from open-gpu-kernel-modules
// kernel-open/nvidia-uvm/hwref/turing/tu102/dev_mmu.h (NV_MMU_VER2_*, 49-bit VA, levels at shifts
// 47/38/29/21/12 with index bits 2/9/9/8/9, uvm_pascal_mmu.c) and hopper/gh100/dev_mmu.h
// (NV_MMU_VER3_*, 57-bit VA, shifts 56/47/38/29/21/12, index bits 1/9/9/9/8/9, uvm_hopper_mmu.c),
// not shared with drivers/nv, so a wrong bit on one side fails a walk. No TLB is modelled: every
// access walks, so a driver that forgets to invalidate is not caught (README "not modelled").
#pragma once

#include "drivers/pci/sim_device_model.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>

namespace baregpu::sim::nvgpu {

enum class MmuFormat { v2, v3 };
enum class MmuAccess { read, write };

// Fault kinds, after NV_PFAULT_FAULT_TYPE in dev_fault.h (PDE, PTE, RO_VIOLATION, ...).
enum class MmuFaultType {
    pde_invalid,      // a directory entry on the path is invalid (APERTURE_INVALID)
    pte_invalid,      // the leaf is not VALID
    read_only,        // a write to a READ_ONLY (v2) / RO PCF (v3) page
    va_limit,         // the VA is outside the format's VA bits
    unbound,          // the table or page lies outside VRAM, or system memory the bus will not DMA
};
const char* mmu_fault_type_name(MmuFaultType t);

struct MmuFault {
    uint64_t va = 0;
    MmuAccess access = MmuAccess::read;
    MmuFaultType type = MmuFaultType::pte_invalid;
    unsigned level = 0;  // the walk level the fault was found at (0 = root)
    std::string describe() const;
};

struct MmuTranslation {
    bool vram = true;        // false: `address` is a bus address
    uint64_t address = 0;    // VRAM offset or bus address of the VA
    uint64_t page_size = 0;  // leaf size: 4 KiB, 2 MiB or 512 MiB
    bool read_only = false;
};

class Mmu {
public:
    // `port` may be null (no system memory: system apertures fault as unbound).
    Mmu(std::span<std::byte> vram, pci::sim::SimPort* port) : vram_(vram), port_(port) {}

    // `pdb`: VRAM offset of the root page directory.
    std::variant<MmuTranslation, MmuFault> translate(uint64_t pdb, MmuFormat format, uint64_t va,
                                                     MmuAccess access) const;
    // Whole accesses: every page is translated before a byte moves, so a fault changes nothing.
    std::optional<MmuFault> read(uint64_t pdb, MmuFormat format, uint64_t va, std::span<std::byte> out) const;
    std::optional<MmuFault> write(uint64_t pdb, MmuFormat format, uint64_t va, std::span<const std::byte> in) const;

    // The VRAM bytes behind [va, va + bytes) when one leaf in VRAM covers them, else nullptr.
    std::byte* vram_pointer(uint64_t pdb, MmuFormat format, uint64_t va, uint64_t bytes, MmuAccess access) const;

private:
    std::span<std::byte> vram_;
    pci::sim::SimPort* port_;
    bool read_table_qword(bool vram, uint64_t address, uint64_t& out) const;
    template <typename Span, typename Copy>
    std::optional<MmuFault> access(uint64_t pdb, MmuFormat format, uint64_t va, Span data, MmuAccess kind,
                                   Copy copy) const;
};

}  // namespace baregpu::sim::nvgpu
