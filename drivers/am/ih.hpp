// The interrupt handler (OSSSYS): ring 0 in boot memory, which the hardware fills with 32-byte
// entries (Linux amdkfd/soc15_int.h) and whose WPTR it writes back to memory. Nothing is delivered
// by MSI here; drivers/am polls the ring. RPTR/WPTR are BYTE offsets (ih_v6_0.c / navi10_ih.c;
// tinygrad uses dword indices, which Linux does not).
#pragma once

#include "drivers/am/registers.hpp"
#include "drivers/am/skip_step.hpp"
#include "drivers/am/vram.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace baregpu::am {

// include/soc15_ih_clientid.h (SOC21_IH_CLIENTID_*)
inline constexpr uint8_t kIhClientGfx = 0x0a;     // SOC21_IH_CLIENTID_GFX (the GC hub's UTCL2)
inline constexpr uint8_t kIhClientVmc = 0x12;     // SOC21_IH_CLIENTID_VMC (the MM hub)
inline constexpr uint8_t kIhClientGrbmCp = 0x14;  // SOC21_IH_CLIENTID_GRBM_CP
// include/ivsrcid/vmc/irqsrcs_vmc_1_0.h VMC_1_0__SRCID__VM_FAULT, ivsrcid/gfx UTCL2_1_0__SRCID__FAULT
inline constexpr uint8_t kIhSrcVmFault = 0;
// include/ivsrcid/gfx/irqsrcs_gfx_11_0_0.h GFX_11_0_0__SRCID__CP_EOP_INTERRUPT (tinygrad skips it by a
// name that never matches; we match the number)
inline constexpr uint8_t kIhSrcCpEop = 181;

struct IhEntry {
    uint8_t client_id = 0, src_id = 0, ring_id = 0, vmid = 0;
    bool vmid_type = false;
    uint64_t timestamp = 0;
    uint16_t pasid = 0;
    uint8_t node_id = 0;
    std::array<uint32_t, 4> src_data{};

    enum class Kind { page_fault, end_of_pipe, other };
    Kind kind() const;
    // Page faults: the faulting GPU VA (gmc_v11_0_process_interrupt / gmc_v12_0: src_data[0] << 12 |
    // (src_data[1] & 0xf) << 44). Whether it was a read or a write is not in the entry on GC 11/12:
    // Linux reads it from the hub's latched L2_PROTECTION_FAULT_STATUS (see PageFault).
    uint64_t fault_address() const;
    std::string hub() const;  // "GC" (client GFX) or "MM" (client VMC)
    std::string describe() const;
};

IhEntry decode_ih_entry(const std::array<uint32_t, 8>& dwords);

// gc_11_0_0_sh_mask.h / gc_12_0_0_sh_mask.h GCVM_L2_PROTECTION_FAULT_STATUS(_LO32): MORE_FAULTS bit 0,
// WALKER_ERROR 3:1, PERMISSION_FAULTS 7:4, MAPPING_ERROR 8, CID 17:9 (9 bits on both generations, as
// tinygrad's generated regs.py lists the field), RW 18, VMID 23:20.
namespace fault_status {
inline constexpr uint32_t kMoreFaults = 1u << 0;
inline constexpr uint32_t kMappingError = 1u << 8;
inline constexpr unsigned kCidShift = 9;
inline constexpr uint32_t kCidMask = 0x1ffu << 9;
inline constexpr uint32_t kRw = 1u << 18;
inline constexpr unsigned kVmidShift = 20;
inline constexpr uint32_t kClearStatusAddr = 1u << 0;  // L2_PROTECTION_FAULT_CNTL.CLEAR_PROTECTION_FAULT_STATUS_ADDR
}  // namespace fault_status

// A page fault as Linux's gmc_v11_0_process_interrupt reports it: the IH entry's address and
// client, and the hub's latched status (read/write, the UTCL2 client id, mapping error).
struct PageFault {
    std::string hub;        // "GC" or "MM"
    uint64_t address = 0;   // GPU VA, page-aligned
    uint8_t ih_client = 0;  // SOC21_IH_CLIENTID_*
    uint32_t status = 0;    // the latched L2_PROTECTION_FAULT_STATUS
    bool write() const { return (status & fault_status::kRw) != 0; }
    unsigned cid() const { return (status & fault_status::kCidMask) >> fault_status::kCidShift; }
    bool mapping_error() const { return (status & fault_status::kMappingError) != 0; }
    std::string describe() const;
};

class Ih {
public:
    // zero_ring: clear the ring at init. Entries are read only between rptr and the written wptr,
    // both reset here, so a link where each VRAM write is a round trip (256 KiB is seconds over a
    // USB bridge) leaves the old contents.
    Ih(Registers& regs, Vram& vram, uint64_t fb_base, uint64_t ring, uint64_t wptr_page, SkipStep skip = SkipStep::none,
       bool zero_ring = true);
    // ih_v6_0_irq_init order: base, size/cntl, wptr writeback, pointers, enable last.
    void init_hw();
    // Entries between RPTR and the written-back WPTR, without consuming them.
    std::vector<IhEntry> pending();
    // Consumes everything pending (RPTR = WPTR) and returns it.
    std::vector<IhEntry> drain();
    // The write pointer the hardware last wrote back (a memory read, no register access): what a
    // poller compares with the value it last saw to learn whether anything arrived.
    uint32_t written_wptr();

private:
    Registers& regs_;
    Vram& vram_;
    uint64_t fb_base_, ring_, wptr_;
    SkipStep skip_;
    bool zero_ring_;
};

}  // namespace baregpu::am
