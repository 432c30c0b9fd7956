// The interrupt handler (OSSSYS): ring 0 in boot memory, which the hardware fills with 32-byte
// entries (Linux amdkfd/soc15_int.h) and whose WPTR it writes back to memory. Nothing is delivered
// by MSI here; drivers/am polls the ring. RPTR/WPTR are BYTE offsets (ih_v6_0.c / navi10_ih.c;
// tinygrad uses dword indices, which Linux does not).
#pragma once

#include "drivers/am/registers.hpp"
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
    // Page faults: the faulting GPU VA (gmc_v11_0_process_interrupt: src_data[0] << 12 |
    // (src_data[1] & 0xf) << 44) and whether it was a write (src_data[1] bit 5, the
    // AMDGPU_GMC9_FAULT_SOURCE_DATA_WRITE bit every gmc_v9+ handler uses).
    uint64_t fault_address() const;
    bool fault_write() const;
    std::string hub() const;  // "GC" (client GFX) or "MM" (client VMC)
    std::string describe() const;
};

IhEntry decode_ih_entry(const std::array<uint32_t, 8>& dwords);

class Ih {
public:
    Ih(Registers& regs, Vram& vram, uint64_t fb_base, uint64_t ring, uint64_t wptr_page);
    // ih_v6_0_irq_init order: base, size/cntl, wptr writeback, pointers, enable last.
    void init_hw();
    // Entries between RPTR and the written-back WPTR, without consuming them.
    std::vector<IhEntry> pending();
    // Consumes everything pending (RPTR = WPTR) and returns it.
    std::vector<IhEntry> drain();

private:
    Registers& regs_;
    Vram& vram_;
    uint64_t fb_base_, ring_, wptr_;
};

}  // namespace baregpu::am
