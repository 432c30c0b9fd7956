// The GC's registers the model banks or latches, and the doorbell path from BAR2 to an engine.
//  * CP_MEC_RS64_PRGRM_CNTR_START/_HI are per MEC pipe (GRBM_GFX_CNTL selects ME 1 and the pipe, as
//    gfx_v11_0_config_gfx_rs64 writes them); a pipe takes the start address when it leaves reset
//    (CP_MEC_RS64_CNTL.MEC_PIPEn_RESET 1 -> 0: "reset given PIPE to take effect of ..._PRGRM_CNTR_START",
//    gfx_v11_0.c). Power-on: 0x800 / 0 (gc_11_0_0_default.h), the PC each pipe starts at.
//  * SH_MEM_CONFIG / SH_MEM_BASES are per VMID (GRBM_GFX_CNTL.VMID, gfx_v11_0_constants_init).
//  * A BAR2 doorbell reaches an engine only through NBIO/NBIF's S2A routing table
//    (S2A_DOORBELL_ENTRY_n_CTRL; nbio_v4_3.c / nbif_v6_3_1.c program entries 0 and 3 for the CP and 2 for
//    SDMA) and, on the CP, only inside CP_MEC_DOORBELL_RANGE_LOWER..UPPER (gc_11_0_0_sh_mask.h: bits
//    11:2, byte offsets). Anything else is dropped, counted and reported.
#pragma once

#include "drivers/sim/amdgpu/chip.hpp"
#include "drivers/sim/amdgpu/register_catalog.hpp"
#include "drivers/sim/amdgpu/reference_firmware.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace baregpu::sim::amdgpu {

class GcRegs {
public:
    GcRegs(Chip& chip, const RegisterCatalog& catalog, ReferenceFirmware& firmware);

    bool read(uint32_t address, uint32_t& value);
    bool write(uint32_t address, uint32_t value);
    void power_on();  // the banks and latches back to their reset values

    // The program counter (dwords) MEC1 pipe `pipe` runs from, and the one the MEC image's header says
    // (gfx_firmware_header_v2_0 ucode_start_addr_hi:lo >> 2, read from the real file); nullopt when
    // the reference firmware is not available.
    uint64_t mec_pc(uint32_t pipe) const;
    std::optional<uint64_t> firmware_mec_pc();
    uint32_t sh_mem_config(uint32_t vmid) const;
    uint32_t sh_mem_bases(uint32_t vmid) const;

    enum class Route { cp, sdma, dropped };
    // Where a doorbell at BAR2 byte `offset` goes; for a dropped one, `why` and the Linux function
    // whose step was missing (`source`).
    Route route(uint64_t offset, std::string& why, std::string& source);
    // A CP-routed doorbell inside CP_MEC_DOORBELL_RANGE_LOWER..UPPER.
    bool mec_accepts(uint64_t offset, std::string& why, std::string& source);
    // Dropped: counted; a violation naming the missing step.
    void drop(uint64_t offset, const std::string& why, const std::string& source);
    uint32_t dropped_doorbells() const;

private:
    uint32_t selected_pipe() const;   // GRBM_GFX_CNTL.PIPEID when MEID is 1, else ~0u
    uint32_t selected_vmid() const;   // GRBM_GFX_CNTL.VMID

    Chip& chip_;
    ReferenceFirmware& firmware_;
    uint32_t grbm_gfx_cntl_, mec_rs64_cntl_, pc_start_, pc_start_hi_, doorbell_lower_, doorbell_upper_, sh_mem_config_,
        sh_mem_bases_;
    uint32_t s2a_[4];
    uint32_t sdma_doorbell_, sdma_doorbell_offset_;
};

}  // namespace baregpu::sim::amdgpu
