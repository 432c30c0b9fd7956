// The FSP chain-of-trust message Blackwell (GB20x) and Hopper boot GSP with instead of FWSEC and the
// booter: one MCTP packet carrying an NVDM COT payload, written to FSP's EMEM channel 0.
// Layouts, open-gpu-kernel-modules 570.144:
//   src/nvidia/arch/nvalloc/common/inc/fsp/fsp_mctp_format.h  MCTP transport header: SOM 31:31, EOM 30:30,
//     SEQ 29:28, TO 27:27, TAG 26:24; MCTP message header: TYPE 6:0 (0x7e vendor-defined PCI), IC 7:7,
//     VENDOR_ID 23:8 (0x10de), NVDM_TYPE 31:24
//   src/nvidia/arch/nvalloc/common/inc/fsp/fsp_nvdm_format.h  NVDM_TYPE_COT = 0x14
//   src/nvidia/inc/kernel/gpu/fsp/kern_fsp_cot_payload.h      NVDM_PAYLOAD_COT (packed, 860 bytes): version u16 +0,
//     size u16 +2, gspFmcSysmemOffset u64 +4, frtsSysmemOffset u64 +12, frtsSysmemSize u32 +20,
//     frtsVidmemOffset u64 +24 (from the end of FB), frtsVidmemSize u32 +32, hash384[12] u32 +36,
//     publicKey[96] u32 +84, signature[96] u32 +468, gspBootArgsSysmemOffset u64 +852.
// Only the encoder exists; the Blackwell boot flow that sends it (EMEM PIO, queue head/tail, FMC
// boot parameters) is not written yet (gsp_boot.cpp throws UnsupportedError naming it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace baregpu::nv {

inline constexpr size_t kNvdmPayloadCotSize = 860;
inline constexpr uint8_t kNvdmTypeCot = 0x14;
inline constexpr size_t kFspEmemChannelBytes = 1024;  // what one EMEM channel holds (tinygrad nv/ip.py NV_FLCN_COT)

struct FspCotPayload {
    uint16_t version = 2;  // NVDM_PAYLOAD_COT version for 570.144 on GB20x (tinygrad nv/ip.py NV_FLCN_COT)
    uint64_t gsp_fmc_sysmem_offset = 0;
    uint64_t frts_sysmem_offset = 0;
    uint32_t frts_sysmem_size = 0;
    uint64_t frts_vidmem_offset = 0;  // from the end of FB
    uint32_t frts_vidmem_size = 0;
    std::span<const std::byte> hash384;     // 48 bytes (FMC image's "hash" section)
    std::span<const std::byte> public_key;  // 384 bytes ("publickey")
    std::span<const std::byte> signature;   // 384 bytes ("signature")
    uint64_t gsp_boot_args_sysmem_offset = 0;
};

// The whole message as EMEM takes it: MCTP transport header, MCTP/NVDM message header, payload.
// Throws Error naming the field when hash/key/signature have the wrong size.
std::vector<std::byte> encode_fsp_cot_message(const FspCotPayload& payload);

}  // namespace baregpu::nv
