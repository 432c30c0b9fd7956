// The VBIOS the simulated AD102 serves in its PROM window (BAR0 + 0x300000): a PC-AT image holding
// the BIT table, followed by a FWSEC image holding the falcon ucode table and one FWSEC-PROD
// ucode (FALCON_UCODE_DESC_V3, one RSA-3K signature, IMEM, DMEM with an application interface
// table and a DMEMMAPPER entry). Generated from the public layouts, not from any real board:
//   PCI expansion ROM header / PCIR, NPDE, BIT header and tokens, falcon ucode table and
//   FALCON_UCODE_DESC_V3: Linux nova-core vbios.rs (as firmware-loader/nvidia/vbios.hpp cites).
//   FALCON_APPLICATION_INTERFACE_HEADER_V1 {version, headerSize, entrySize, entryCount},
//   _ENTRY_V1 {id, dmemOffset}, ENTRY_ID_DMEMMAPPER = 4, FALCON_APPLICATION_INTERFACE_DMEM_MAPPER_V3
//   (64 bytes; cmd_in_buffer_offset +8, init_cmd +44), FWSECLIC_FRTS_CMD: open-gpu-kernel-modules
//   570.144 src/nvidia/src/kernel/gpu/gsp/arch/turing/kernel_gsp_frts_tu102.c.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace baregpu::sim::nvgpu {

struct VbiosImage {
    std::vector<std::byte> rom;
    bool has_fwsec = true;
    // Where the FWSEC ucode's parts lie in rom (valid when has_fwsec).
    uint64_t imem_offset = 0, imem_size = 0;
    uint64_t dmem_offset = 0, dmem_size = 0;
    uint64_t signature_offset = 0;  // one 384-byte RSA-3K signature
    // DMEM offsets the model checks after the driver patched its copy.
    uint32_t interface_offset = 0;
    uint32_t dmem_mapper_offset = 0;
    uint32_t cmd_in_buffer_offset = 0;
    uint32_t pkc_data_offset = 0;
    uint16_t engine_id_mask = 0;
    uint8_t ucode_id = 0;

    std::span<const std::byte> imem() const { return std::span(rom).subspan(imem_offset, imem_size); }
    std::span<const std::byte> dmem() const { return std::span(rom).subspan(dmem_offset, dmem_size); }
    std::span<const std::byte> signature() const { return std::span(rom).subspan(signature_offset, 384); }
};

// with_fwsec = false: the ucode table lists only a non-FWSEC application (a board whose VBIOS
// lacks FWSEC, or a ROM read wrongly), which a driver must refuse clearly.
VbiosImage make_vbios(uint16_t device_id, bool with_fwsec = true);

}  // namespace baregpu::sim::nvgpu
