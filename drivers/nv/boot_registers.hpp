// BAR0 registers the GSP boot touches, typed from open-gpu-kernel-modules 570.144
// src/common/inc/swref/published/ (drivers/sim/nvgpu keeps its own copy on purpose):
//   turing/tu102/dev_boot.h       NV_PMC_BOOT_0 (0x0), NV_PMC_BOOT_42 (0xa00: ARCHITECTURE 29:24, IMPLEMENTATION 23:20)
//   turing/tu102/dev_fb.h         NV_PFB_PRI_MMU_WPR2_ADDR_LO/HI (0x1fa824/8; VAL 31:4 in 4 KiB units)
//   ada/ad102/dev_gc6_island.h    NV_PGC6_AON_SECURE_SCRATCH_GROUP_05_PRIV_LEVEL_MASK (0x118128, READ_PROTECTION_LEVEL0 0:0),
//                                 NV_PGC6_AON_SECURE_SCRATCH_GROUP_05(0) (0x118234, GFW boot progress 7:0 = 0xff done),
//                                 NV_PGC6_AON_SECURE_SCRATCH_GROUP_42 (0x1183a4, FB size in MiB),
//                                 NV_PGC6_BSI_SECURE_SCRATCH_14 (0x1180f8, BOOT_STAGE_3_HANDOFF 26:26)
//   turing/tu102/dev_bus.h        NV_PBUS_VBIOS_SCRATCH(i) (0x1400 + 4i; FWSEC FRTS error in (0x0e) 31:16)
//   turing/tu102/dev_gsp.h        NV_PGSP_QUEUE_HEAD(i) (0x110c00 + 8i)
//   turing/tu102/dev_falcon_v4.h, ampere/ga102/dev_falcon_second_pri.h, dev_riscv_pri.h, dev_fbif_v4.h: falcon.hpp
//   NV_PROM_DATA (0x300000): the VBIOS ROM window.
#pragma once

#include <cstdint>

namespace baregpu::nv::reg {

inline constexpr uint32_t kPmcBoot0 = 0x000000;
inline constexpr uint32_t kPmcBoot42 = 0x000a00;
inline constexpr uint32_t kPfbPriMmuWpr2AddrLo = 0x1fa824;
inline constexpr uint32_t kPfbPriMmuWpr2AddrHi = 0x1fa828;
inline constexpr uint32_t kPgc6AonSecureScratchGroup05PrivLevelMask = 0x118128;
inline constexpr uint32_t kPgc6AonSecureScratchGroup05_0 = 0x118234;
inline constexpr uint32_t kPgc6AonSecureScratchGroup42 = 0x1183a4;
inline constexpr uint32_t kPgc6BsiSecureScratch14 = 0x1180f8;
inline constexpr uint32_t kBootStage3Handoff = 1u << 26;
inline constexpr uint32_t kPbusVbiosScratch0e = 0x001400 + 4 * 0x0e;
inline constexpr uint32_t kPgspQueueHead0 = 0x110c00;
// tu102 dev_bus.h NV_PBUS_BAR1_BLOCK: PTR 27:0, TARGET 29:28, MODE 31 (0 PHYSICAL). GSP-RM leaves it in virtual mode.
inline constexpr uint32_t kPbusBar1Block = 0x001704;
inline constexpr uint32_t kPromData = 0x300000;
inline constexpr uint32_t kPromSize = 0x100000;

inline constexpr uint32_t kGspFalconBase = 0x110000;   // NV_FALCON_GSP_BASE (dev_gsp.h)
inline constexpr uint32_t kSec2FalconBase = 0x840000;  // NV_FALCON_SEC_BASE (dev_sec_pri.h)

// NV_PMC_BOOT_42_ARCHITECTURE values (dev_boot.h).
inline constexpr uint32_t kArchAda = 0x19, kArchHopper = 0x18, kArchBlackwellGb20x = 0x1b;

}  // namespace baregpu::nv::reg
