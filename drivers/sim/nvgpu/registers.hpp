// Every BAR0 register the simulated AD102 gives meaning to, typed here from the public headers on
// the model's own (drivers/nv keeps its own copy: a wrong offset on one side fails a handshake).
// open-gpu-kernel-modules 570.144, src/common/inc/swref/published/:
//   turing/tu102/dev_boot.h                                   NV_PMC_BOOT_0 (0x0), NV_PMC_BOOT_42 (0xa00)
//   turing/tu102/dev_fb.h                                     NV_PFB_PRI_MMU_WPR2_ADDR_LO/HI (0x1fa824/8, 4 KiB units)
//   ada/ad102/dev_gc6_island.h                                NV_PGC6_AON_SECURE_SCRATCH_GROUP_05(0), _42,
//                                                             _05_PRIV_LEVEL_MASK, NV_PGC6_BSI_SECURE_SCRATCH_14
//   turing/tu102/dev_gsp.h, dev_sec_pri.h                     GSP falcon 0x110000, SEC2 0x840000, NV_PGSP_QUEUE_HEAD(i)
//   turing/tu102/dev_falcon_v4.h, ampere/ga102/dev_falcon_second_pri.h, dev_riscv_pri.h, dev_fbif_v4.h
//                                                             the falcon-relative offsets below
//   turing/tu102/dev_bus.h                                    NV_PBUS_BAR1_BLOCK (0x1704)
//   NV_PROM_DATA (0x300000): the VBIOS window (tu102/dev_ext_devices.h).
#pragma once

#include <cstdint>

namespace baregpu::sim::nvgpu::reg {

inline constexpr uint32_t kPmcBoot0 = 0x000000;
inline constexpr uint32_t kPmcBoot42 = 0x000a00;  // ARCHITECTURE 29:24, IMPLEMENTATION 23:20
inline constexpr uint32_t kPbusBar1Block = 0x001704;  // PTR 27:0 (instance >> 12), TARGET 29:28, MODE 31 (1 VIRTUAL)
inline constexpr uint32_t kPbusBar1BlockModeVirtual = 1u << 31;
inline constexpr uint32_t kVirtualFunctionPrivMmuInvalidate = 0xb80000 + 0x30b0;  // tu102 dev_vm.h
inline constexpr uint32_t kPgc6BsiSecureScratch14 = 0x1180f8;  // BOOT_STAGE_3_HANDOFF 26:26
inline constexpr uint32_t kBootStage3Handoff = 1u << 26;
inline constexpr uint32_t kPgc6AonSecureScratchGroup05PrivLevelMask = 0x118128;  // READ_PROTECTION_LEVEL0 0:0
inline constexpr uint32_t kPgc6AonSecureScratchGroup05_0 = 0x118234;  // GFW boot progress 7:0, 0xff = done
inline constexpr uint32_t kPgc6AonSecureScratchGroup42 = 0x1183a4;  // usable FB size in MiB
inline constexpr uint32_t kPfbPriMmuWpr2AddrLo = 0x1fa824;
inline constexpr uint32_t kPfbPriMmuWpr2AddrHi = 0x1fa828;
inline constexpr uint32_t kPromData = 0x300000;  // the ROM window, 1 MiB
inline constexpr uint32_t kPromSize = 0x100000;
inline constexpr uint32_t kPbusVbiosScratch0e = 0x001438;  // NV_PBUS_VBIOS_SCRATCH(0x0e): FWSEC FRTS error 31:16

inline constexpr uint32_t kGspBase = 0x110000;
inline constexpr uint32_t kSec2Base = 0x840000;
inline constexpr uint32_t kFalconSpan = 0x2000;  // falcon + falcon2 + RISC-V windows
inline constexpr uint32_t kGspQueueHead0 = 0x110c00;  // NV_PGSP_QUEUE_HEAD(0): the command doorbell
inline constexpr uint32_t kGspQueueTail0 = 0x110c80;  // NV_PGSP_QUEUE_TAIL(0)

// The channel doorbell: NV_VIRTUAL_FUNCTION_DOORBELL 0x30090 in the VF window that BAR0 shows at
// NV_VIRTUAL_FUNCTION_FULL_PHYS_OFFSET 0xb80000 (turing/tu102/dev_vm.h); the same register as the
// usermode class's NOTIFY_CHANNEL_PENDING 0x90 (class/clc361.h). Data: the channel's work submit token.
inline constexpr uint32_t kVirtualFunctionDoorbell = 0xb80000 + 0x30090;

// Falcon-relative (dev_falcon_v4.h).
inline constexpr uint32_t kMailbox0 = 0x040, kMailbox1 = 0x044;
inline constexpr uint32_t kFalconOs = 0x080;
inline constexpr uint32_t kFalconRm = 0x084;
inline constexpr uint32_t kHwcfg2 = 0x0f4;  // RISCV 10:10, MEM_SCRUBBING 12:12, RISCV_BR_PRIV_LOCKDOWN 13:13
inline constexpr uint32_t kHwcfg2Riscv = 1u << 10, kHwcfg2MemScrubbing = 1u << 12;
inline constexpr uint32_t kCpuctl = 0x100;  // STARTCPU 1:1, HALTED 4:4, ALIAS_EN 6:6
inline constexpr uint32_t kCpuctlStartCpu = 1u << 1, kCpuctlHalted = 1u << 4, kCpuctlAliasEn = 1u << 6;
inline constexpr uint32_t kBootvec = 0x104;
inline constexpr uint32_t kDmactl = 0x10c;
inline constexpr uint32_t kDmatrfbase = 0x110, kDmatrfmoffs = 0x114, kDmatrfcmd = 0x118, kDmatrffboffs = 0x11c;
inline constexpr uint32_t kDmatrfbase1 = 0x128;
inline constexpr uint32_t kCpuctlAlias = 0x130;
inline constexpr uint32_t kEngine = 0x3c0;  // RESET 0:0
// DMATRFCMD fields (dev_falcon_v4.h): FULL 0:0, IDLE 1:1, SEC 3:2, IMEM 4:4, WRITE 5:5, SIZE 10:8 (6 = 256 B), CTXDMA 14:12.
inline constexpr uint32_t kDmaFull = 1u << 0, kDmaIdle = 1u << 1, kDmaImem = 1u << 4, kDmaWrite = 1u << 5;
inline constexpr uint32_t kDmaSizeShift = 8, kDmaSize256 = 6;
// FBIF (dev_fbif_v4.h): TRANSCFG(0) +0x600 (TARGET 1:0, MEM_TYPE 2:2), CTL +0x624 (ALLOW_PHYS_NO_CTX 7:7).
inline constexpr uint32_t kFbifTranscfg0 = 0x600, kFbifCtl = 0x624, kFbifCtlAllowPhysNoCtx = 1u << 7;
// Falcon2 BROM (dev_falcon_second_pri.h): MOD_SEL +0x1180, CURR_UCODE_ID +0x1198, ENGIDMASK +0x119c, PARAADDR(0) +0x1210.
inline constexpr uint32_t kBromModSel = 0x1180, kBromCurrUcodeId = 0x1198, kBromEngidmask = 0x119c,
                          kBromParaaddr0 = 0x1210;
// RISC-V (dev_riscv_pri.h): CPUCTL +0x1388 (STARTCPU 0:0, ACTIVE_STAT 7:7), BCR_CTRL +0x1668
// (VALID 0:0, CORE_SELECT 4:4 — 0 falcon, 1 RISC-V, BRFETCH 8:8).
inline constexpr uint32_t kRiscvCpuctl = 0x1388, kRiscvCpuctlStart = 1u << 0, kRiscvCpuctlActive = 1u << 7;
inline constexpr uint32_t kRiscvBcrCtrl = 0x1668, kBcrValid = 1u << 0, kBcrCoreRiscv = 1u << 4, kBcrBrfetch = 1u << 8;

}  // namespace baregpu::sim::nvgpu::reg
