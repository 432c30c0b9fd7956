// Registers by name. Each definition is (IP block, BASE_IDX, dword offset) as Linux's asic_reg
// <ip>_<ver>_offset.h gives it (regX, regX_BASE_IDX); the absolute dword address is the IP's
// discovery base[BASE_IDX] + offset (tinygrad amdev.py AMDev._run_discovery). No base is hard-coded: they all come
// from the discovery table. Mmio carries the accesses: BAR5 directly when the byte address fits
// in it, otherwise through the NBIO/NBIF RSMU index/data pair, counting both.
#pragma once

#include "drivers/am/asic.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace baregpu::pci {
class PciDevice;
class MmioRegion;
}  // namespace baregpu::pci

namespace baregpu::am {

// Hardware ids of the IP blocks drivers/am programs (Linux include/soc15_hw_ip.h).
enum class HwIp : uint16_t {
    mp1 = 1,      // MP1_HWID: the SMU
    gc = 11,      // GC_HWID
    mmhub = 34,   // MMHUB_HWID
    osssys = 40,  // OSSSYS_HWID: the interrupt handler
    hdp = 41,     // HDP_HWID
    sdma0 = 42,   // SDMA0_HWID
    sdma1 = 43,   // SDMA1_HWID
    nbio = 108,   // NBIF_HWID: NBIO on GC 11, NBIF on GC 12 (amdgpu_discovery.c hw_id_map)
    mp0 = 255,    // MP0_HWID: the PSP
};
std::string_view to_string(HwIp ip);

struct RegDef {
    std::string_view name;  // Linux's name without the "reg" prefix
    HwIp ip = HwIp::gc;
    uint8_t base_idx = 0;
    uint32_t offset = 0;  // dwords
    bool valid() const { return !name.empty(); }
};

// The registers bring-up touches, for one ASIC (its IP versions). Members named as in Linux;
// GC-hub and MM-hub registers share a layout, so they are grouped per hub.
struct VmHubRegs {
    RegDef agp_base, agp_bot, agp_top;
    RegDef system_aperture_low, system_aperture_high, system_aperture_default_lsb, system_aperture_default_msb;
    RegDef fault_default_addr_lo, fault_default_addr_hi;
    RegDef mx_l1_tlb_cntl, l2_cntl, l2_cntl2, l2_cntl3, l2_cntl4, l2_cntl5, l2_protection_fault_cntl2;
    RegDef l2_protection_fault_cntl, l2_protection_fault_status, l2_protection_fault_addr_lo,
        l2_protection_fault_addr_hi;
    RegDef context0_cntl, context0_pt_base_lo, context0_pt_base_hi, context0_pt_start_lo, context0_pt_start_hi,
        context0_pt_end_lo, context0_pt_end_hi;
    RegDef invalidate_eng17_sem, invalidate_eng17_req, invalidate_eng17_ack;
    // VM_INVALIDATE_ENG0_ADDR_RANGE_LO32; engine n's LO32/HI32 pair is at +2n/+2n+1 (every header).
    RegDef invalidate_eng0_addr_range_lo32;
    RegDef l2_bank_select_reserved_cid2;  // MM hub only (the private invalidation, gmc_v11_0.c)
    bool gc12_context_layout = false;     // VM_CONTEXT*_CNTL fields as gc_12_0_0 / mmhub_4_1_0 have them
};

struct RegisterTable {
    // MP0 (PSP) C2PMSG mailbox: mp_13_0_0_offset.h regMP0_SMN_C2PMSG_n / mp_14_0_2_offset.h regMPASP_SMN_C2PMSG_n
    RegDef psp_c2pmsg_35, psp_c2pmsg_36, psp_c2pmsg_64, psp_c2pmsg_67, psp_c2pmsg_69, psp_c2pmsg_70, psp_c2pmsg_71,
        psp_c2pmsg_81;
    // MP1 (SMU) mailboxes: mp_13_0_0_offset.h / mp_14_0_2_offset.h regMP1_SMN_C2PMSG_n
    RegDef smu_msg_66, smu_param_82, smu_resp_90, smu_debug_msg_75, smu_debug_param_53, smu_debug_resp_54;
    // GC
    RegDef scratch_reg6, scratch_reg7, cp_stat, rlc_rlcs_bootload_status;
    VmHubRegs gc_hub;
    // MMHUB
    RegDef mmmc_vm_fb_location_base, mmmc_vm_fb_location_top;
    VmHubRegs mm_hub;
    // OSSSYS (IH ring 0)
    RegDef ih_rb_cntl, ih_rb_rptr, ih_rb_wptr, ih_rb_base, ih_rb_base_hi, ih_rb_wptr_addr_hi, ih_rb_wptr_addr_lo,
        ih_doorbell_rptr;
    // Compute queues on MEC 1 and SDMA0 queue 0, both chips: gc_11_0_0_offset.h and
    // gc_12_0_0_offset.h (SDMA 6 and SDMA 7 queue registers live in GC's space). A table that
    // leaves them invalid makes AmHcqDevice::create refuse the chip.
    RegDef grbm_gfx_cntl, cp_mec_rs64_cntl, cp_mqd_base_addr, cp_hqd_active, cp_hqd_dequeue_request;
    // The MEC's start and doorbell window, the shader memory config (per VMID through GRBM_GFX_CNTL).
    RegDef cp_mec_rs64_prgrm_cntr_start, cp_mec_rs64_prgrm_cntr_start_hi, cp_mec_doorbell_range_lower,
        cp_mec_doorbell_range_upper, sh_mem_config, sh_mem_bases;
    // SDMA engine 0: SDMA0_F32_CNTL (SDMA 6) or SDMA0_MCU_CNTL (SDMA 7), the hang watchdog, UTCL1.
    RegDef sdma0_engine_cntl, sdma0_watchdog_cntl, sdma0_utcl1_cntl, sdma0_utcl1_page;
    // GRBM_CNTL (READ_TIMEOUT), TCP_CNTL (a GC 11 golden value), RLC_SRM_CNTL.
    RegDef grbm_cntl, tcp_cntl, rlc_srm_cntl;
    bool sdma7 = false;
    RegDef sdma0_queue0_rb_cntl, sdma0_queue0_rb_base, sdma0_queue0_rb_base_hi, sdma0_queue0_rb_rptr,
        sdma0_queue0_rb_rptr_hi, sdma0_queue0_rb_wptr, sdma0_queue0_rb_wptr_hi, sdma0_queue0_rb_rptr_addr_hi,
        sdma0_queue0_rb_rptr_addr_lo, sdma0_queue0_ib_cntl, sdma0_queue0_doorbell, sdma0_queue0_doorbell_offset,
        sdma0_queue0_rb_wptr_poll_addr_hi, sdma0_queue0_rb_wptr_poll_addr_lo, sdma0_queue0_minor_ptr_update;
    // NBIO / NBIF
    RegDef rsmu_index, rsmu_data, remap_hdp_mem_flush_cntl, doorbell_aper_en, rcc_dev0_epf2_strap2;
    // The doorbell routing table (S2A_DOORBELL_ENTRY_n_CTRL on NBIO 4.3, GDC_S2A0_S2A_DOORBELL_ENTRY_n_CTRL
    // on NBIF 6.3.1): entry 0 and 3 route to the CP, entry 2 to SDMA.
    RegDef s2a_doorbell_entry0_ctrl, s2a_doorbell_entry2_ctrl, s2a_doorbell_entry3_ctrl;
};

const RegisterTable& register_table(const AsicInfo& asic);

// Fields used by the driver, from <ip>_<ver>_sh_mask.h.
namespace field {
// nbio_4_3_0_sh_mask.h / nbif_6_3_1_sh_mask.h RCC_DEV0_EPF2_STRAP2__STRAP_NO_SOFT_RESET_DEV0_F2_MASK
inline constexpr uint32_t kStrapNoSoftResetDev0F2 = 0x00000080;
// psp_v13_0.c / psp_v14_0.c: the bootloader and the sOS ring signal "ready/done" in bit 31.
inline constexpr uint32_t kPspReady = 0x80000000;
// gc_11_0_0_sh_mask.h / gc_12_0_0_sh_mask.h RLC_RLCS_BOOTLOAD_STATUS__BOOTLOAD_COMPLETE_MASK
inline constexpr uint32_t kRlcBootloadComplete = 0x80000000;
// osssys_6_0_0_sh_mask.h / osssys_7_0_0_sh_mask.h IH_RB_CNTL: RB_ENABLE bit 0, RB_SIZE bits 5:1,
// WPTR_WRITEBACK_ENABLE bit 8, WPTR_OVERFLOW_ENABLE bit 16, ENABLE_INTR bit 17, WPTR_OVERFLOW_CLEAR 31.
inline constexpr uint32_t kIhRbEnable = 1u << 0;
inline constexpr uint32_t kIhRbSizeShift = 1;
inline constexpr uint32_t kIhWptrWritebackEnable = 1u << 8;
inline constexpr uint32_t kIhWptrOverflowEnable = 1u << 16;
inline constexpr uint32_t kIhEnableIntr = 1u << 17;
inline constexpr uint32_t kIhWptrOverflowClear = 1u << 31;
// IH_RB_WPTR / IH_RB_RPTR: OFFSET field bits 17:2 holds a BYTE offset (Linux ih_v6_0.c ih_v6_0_irq_init,
// amdgpu_ih.c: the pointers count bytes).
inline constexpr uint32_t kIhPtrOffsetMask = 0x3fffc;
// IH_RB_CNTL.MC_SNOOP bit 20, MC_SPACE bits 30:28 (osssys_6_0_0_sh_mask.h, osssys_7_0_0_sh_mask.h).
inline constexpr uint32_t kIhMcSnoop = 1u << 20;
inline constexpr unsigned kIhMcSpaceShift = 28;
// GRBM_GFX_CNTL: PIPEID 1:0, MEID 3:2, VMID 7:4, QUEUEID 10:8 (gc_11_0_0_sh_mask.h = gc_12_0_0_sh_mask.h).
constexpr uint32_t grbm_select(uint32_t me, uint32_t pipe, uint32_t queue, uint32_t vmid) {
    return (pipe & 3) | (me & 3) << 2 | (vmid & 0xf) << 4 | (queue & 7) << 8;
}
// CP_MEC_RS64_CNTL: MEC_INVALIDATE_ICACHE 4, MEC_PIPEn_RESET 16+n, MEC_PIPEn_ACTIVE 26+n, MEC_HALT 30
// (the same in gc_11_0_0_sh_mask.h and gc_12_0_0_sh_mask.h).
inline constexpr uint32_t kMecInvalidateIcache = 1u << 4;
inline constexpr uint32_t kMecPipeResetAll = 0xfu << 16;
inline constexpr uint32_t kMecPipeActiveAll = 0xfu << 26;
inline constexpr uint32_t kMecHalt = 1u << 30;
// SDMA0_F32_CNTL (SDMA 6): HALT 0, TH1_RESET 13. SDMA0_MCU_CNTL (SDMA 7): HALT 0, RESET 1.
inline constexpr uint32_t kSdmaHalt = 1u << 0;
inline constexpr uint32_t kSdmaF32Th1Reset = 1u << 13;
inline constexpr uint32_t kSdmaMcuReset = 1u << 1;
// SDMA0_QUEUE0_RB_CNTL: RB_ENABLE 0, RB_SIZE 5:1, WPTR_POLL_ENABLE 8, F32_WPTR_POLL_ENABLE (SDMA 6) /
// MCU_WPTR_POLL_ENABLE (SDMA 7) 11, RPTR_WRITEBACK_ENABLE 12, RPTR_WRITEBACK_TIMER 20:16, RB_PRIV 23.
inline constexpr uint32_t kSdmaRbEnable = 1u << 0;
inline constexpr uint32_t kSdmaRbSizeMask = 0x1fu << 1;
inline constexpr uint32_t kSdmaWptrPollEnable = 1u << 8;
inline constexpr uint32_t kSdmaEngineWptrPollEnable = 1u << 11;
inline constexpr uint32_t kSdmaRptrWritebackEnable = 1u << 12;
inline constexpr uint32_t kSdmaRbPriv = 1u << 23;
// SDMA0_UTCL1_CNTL: REDO_DELAY 4:0, RESP_MODE 10:9. SDMA0_UTCL1_PAGE: RD_L2_POLICY 13:12,
// WR_L2_POLICY 15:14, LLC_NOALLOC 24 (SDMA 6). SDMA0_WATCHDOG_CNTL.QUEUE_HANG_COUNT 7:0.
inline constexpr uint32_t kSdmaUtcl1RedoDelayMask = 0x1fu, kSdmaUtcl1RespModeMask = 3u << 9;
inline constexpr uint32_t kSdmaUtcl1PageLlcNoalloc = 1u << 24;
inline constexpr uint32_t kSdmaWatchdogQueueHangCountMask = 0xffu;
// SH_MEM_CONFIG: ADDRESS_MODE 0, ALIGNMENT_MODE 3:2, INITIAL_INST_PREFETCH 15:14. SH_MEM_BASES:
// PRIVATE_BASE 15:0, SHARED_BASE 31:16 (both headers).
inline constexpr unsigned kShMemAlignmentModeShift = 2, kShMemInitialInstPrefetchShift = 14;
// MMVM_L2_BANK_SELECT_RESERVED_CID2.RESERVED_CACHE_PRIVATE_INVALIDATION (mmhub_3_0_0 and mmhub_4_1_0).
inline constexpr uint32_t kMmhubPrivateInvalidation = 1u << 25;
// S2A_DOORBELL_ENTRY_n_CTRL (nbio_4_3_0_sh_mask.h; GDC_S2A0_ in nbif_6_3_1_sh_mask.h): ENABLE 0, AWID 5:1,
// RANGE_OFFSET 16:7, RANGE_SIZE 24:17, AWADDR_31_28_VALUE 31:28.
constexpr uint32_t s2a_entry(uint32_t awid, uint32_t range_offset, uint32_t range_size, uint32_t awaddr_31_28) {
    return 1u | (awid & 0x1f) << 1 | (range_offset & 0x3ff) << 7 | (range_size & 0xff) << 17 | (awaddr_31_28 & 0xf) << 28;
}
}  // namespace field

// The IP bases discovery found: bases[ip][base_idx], instance 0.
class IpBases {
public:
    void set(HwIp ip, std::array<uint32_t, 8> bases, unsigned count);
    bool has(HwIp ip) const;
    // Absolute dword address of `reg`. Throws ProtocolError when its IP or BASE_IDX is missing.
    uint32_t address(const RegDef& reg, const std::string& device) const;

private:
    struct Entry {
        uint16_t hw_id = 0;
        unsigned count = 0;
        std::array<uint32_t, 8> bases{};
    };
    std::array<Entry, 16> entries_{};
    unsigned used_ = 0;
};

// The register path: BAR5 for addresses whose byte offset fits, the RSMU index/data pair past it.
class Mmio {
public:
    Mmio(pci::PciDevice& device, pci::MmioRegion& bar5);

    // Once NBIO's base is known: where the indirect pair lives (absolute dword addresses).
    void set_indirect(uint32_t index_addr, uint32_t data_addr);
    bool direct(uint32_t addr) const { return uint64_t{addr} * 4 + 4 <= bar5_size_; }

    // `what` names the register in errors. A read of all-ones is checked against the link:
    // config space all-ones means the device is gone (DeviceLostError).
    uint32_t read(uint32_t addr, std::string_view what = {});
    void write(uint32_t addr, uint32_t value);

    uint64_t reads() const { return reads_; }
    uint64_t writes() const { return writes_; }
    pci::PciDevice& device() { return device_; }

private:
    pci::PciDevice& device_;
    pci::MmioRegion& bar5_;
    uint64_t bar5_size_ = 0;
    uint32_t index_addr_ = 0, data_addr_ = 0;
    bool have_indirect_ = false;
    uint64_t reads_ = 0, writes_ = 0;
};

// Registers resolved against discovery, read and written by name.
class Registers {
public:
    Registers(Mmio& mmio, const RegisterTable& table, IpBases bases);
    const RegisterTable& table() const { return table_; }
    const IpBases& bases() const { return bases_; }
    uint32_t address(const RegDef& reg) const;
    uint32_t read(const RegDef& reg);
    void write(const RegDef& reg, uint32_t value);
    Mmio& mmio() { return mmio_; }

private:
    Mmio& mmio_;
    const RegisterTable& table_;
    IpBases bases_;
};

}  // namespace baregpu::am
