// A falcon engine (GSP at 0x110000, SEC2 at 0x840000) as the boot drives it: engine reset and the
// memory-scrubbing wait, core select (falcon / RISC-V), DMA of an image from VRAM into IMEM/DMEM in
// 256-byte blocks, and running a heavy-secure (HS) ucode through the BROM. Register offsets
// (relative to the falcon base) from open-gpu-kernel-modules 570.144 swref: dev_falcon_v4.h
// (MAILBOX0/1 0x40/0x44, OS 0x80, RM 0x84, HWCFG2 0xf4, CPUCTL 0x100, BOOTVEC 0x104, DMACTL 0x10c,
// DMATRFBASE 0x110, DMATRFMOFFS 0x114, DMATRFCMD 0x118, DMATRFFBOFFS 0x11c, DMATRFBASE1 0x128,
// CPUCTL_ALIAS 0x130, ENGINE 0x3c0), dev_falcon_second_pri.h (BROM MOD_SEL 0x1180, CURR_UCODE_ID
// 0x1198, ENGIDMASK 0x119c, PARAADDR(0) 0x1210), dev_riscv_pri.h (RISCV_CPUCTL 0x1388, BCR_CTRL
// 0x1668), dev_fbif_v4.h (TRANSCFG(0) 0x600, CTL 0x624). Sequence: kernel_falcon_ga102.c and
// kernel_gsp_falcon_ga102.c (kflcnReset, s_dmaTransfer, kflcnSetupBootromArgs).
#pragma once

#include "drivers/pci/pci_device.hpp"

#include <cstdint>
#include <span>
#include <string>

namespace baregpu::nv {

// An HS ucode placed in VRAM, ready for the BROM: IMEM (secure) and DMEM images at VRAM offsets.
struct HsUcodeLoad {
    std::string name;         // "FWSEC-FRTS", "booter_load": errors name it
    uint64_t imem_vram = 0;   // VRAM byte offset of the IMEM image (256-byte aligned)
    uint32_t imem_size = 0;   // bytes, rounded up to 256
    uint32_t imem_dst = 0;    // IMEM byte offset it loads at (the physical address)
    uint32_t imem_tag = 0;    // the code's virtual address, the IMEM tag of its first block (256-byte aligned)
    uint64_t dmem_vram = 0;
    uint32_t dmem_size = 0;
    uint32_t pkc_data_offset = 0;  // BROM PARAADDR(0): the signature's place in DMEM
    uint32_t engine_id_mask = 0;   // BROM ENGIDMASK
    uint32_t ucode_id = 0;         // BROM CURR_UCODE_ID
    uint32_t boot_vector = 0;      // BOOTVEC
    // An optional non-secure IMEM part loaded before the secure one (the booter's OS code).
    uint64_t nmem_vram = 0;
    uint32_t nmem_size = 0;        // 0: none
    uint32_t nmem_dst = 0;
};

class Falcon {
public:
    Falcon(pci::PciDevice& device, std::string name, uint32_t base);

    const std::string& name() const { return name_; }
    uint32_t base() const { return base_; }

    uint32_t read(uint32_t rel) const;
    void write(uint32_t rel, uint32_t value) const;

    // ENGINE.RESET pulse, then waits until HWCFG2.MEM_SCRUBBING clears; selects the falcon core
    // (BCR_CTRL.CORE_SELECT = falcon, waits VALID) and writes the chip id into FALCON_RM.
    void reset(uint32_t chip_id);
    // DMA `size` bytes (multiple of 256) from VRAM offset `vram` into IMEM or DMEM at `dst`.
    // `tag`: the virtual address of the first block (IMEM tags; 0 for DMEM and untagged code).
    void dma_load(bool imem, uint64_t vram, uint32_t dst, uint32_t size, bool secure, uint32_t tag = 0);
    // Loads the ucode, programs the BROM, starts the CPU and waits for it to halt. mailbox0/1 are
    // written first (the booter reads its argument there). Returns MAILBOX0 after the halt.
    uint32_t execute_hs(const HsUcodeLoad& ucode, uint32_t mailbox0 = 0, uint32_t mailbox1 = 0);
    // MAILBOX0 = low half, MAILBOX1 = high half of a 64-bit argument (an address).
    void set_mailboxes(uint64_t value) const;
    uint32_t mailbox0() const;
    // CPUCTL.STARTCPU (through CPUCTL_ALIAS when CPUCTL.ALIAS_EN says so), and CPUCTL.HALTED.
    void start_cpu() const;
    bool halted() const;
    // BCR_CTRL.CORE_SELECT = RISC-V with BRFETCH (GSP before the booter runs).
    void select_riscv();
    bool riscv_active() const;

private:
    pci::PciDevice& device_;
    std::string name_;
    uint32_t base_;
};

}  // namespace baregpu::nv
