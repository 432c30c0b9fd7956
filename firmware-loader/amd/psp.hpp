// The PSP's own firmware (psp_<ver>_sos.bin: SYS_DRV, SOS, TOC, KDB, SPL, RAS, ...) and its trusted
// applications (psp_<ver>_ta.bin: ASD, XGMI, RAS, HDCP, DTM, ...), in every packaging version the
// AM driver meets: psp_firmware_header v1.0-v1.3 (fixed descriptors), v2.0 (a table of typed
// binaries), ta_firmware_header v1.0 and v2.0.
// Layouts and type numbers: Linux drivers/gpu/drm/amd/amdgpu/amdgpu_ucode.h (psp_fw_legacy_bin_desc,
// psp_firmware_header_v1_0..v1_3, psp_fw_bin_desc, enum psp_fw_type, psp_firmware_header_v2_0,
// ta_firmware_header_v1_0/v2_0, enum ta_fw_type), torvalds/linux d754ed2821fd; where each blob lives:
// amdgpu_psp.c (parse_sos_bin_descriptor, psp_init_sos_base_fw, parse_ta_bin_descriptor).
#pragma once

#include "firmware-loader/amd/ucode_header.hpp"

#include <optional>
#include <string>
#include <vector>

namespace baregpu::fw::amd {

// enum psp_fw_type (amdgpu_ucode.h); SPDM_DRV from newer trees.
enum class PspFwType : uint32_t {
    unknown = 0,
    sos = 1,
    sys_drv = 2,
    kdb = 3,
    toc = 4,
    spl = 5,
    rl = 6,
    soc_drv = 7,
    intf_drv = 8,
    dbg_drv = 9,
    ras_drv = 10,
    ipkeymgr_drv = 11,
    spdm_drv = 12,
};
const char* to_string(PspFwType type);  // "SOS", "SYS_DRV", ... or "type N"

// enum ta_fw_type (amdgpu_ucode.h).
enum class TaFwType : uint32_t {
    unknown = 0,
    asd = 1,
    xgmi = 2,
    ras = 3,
    hdcp = 4,
    dtm = 5,
    rap = 6,
    securedisplay = 7,
};
const char* to_string(TaFwType type);

struct PspBinary {
    uint32_t type = 0;       // a PspFwType for sos files, a TaFwType for ta files
    std::string name;        // the type's name
    uint32_t fw_version = 0;
    Region bytes;            // where the blob is in the file
};

struct PspFirmware {
    enum class Kind { sos, ta };
    Kind kind = Kind::sos;
    UcodeHeader header;
    std::vector<PspBinary> binaries;  // in the file's order

    // The first binary of that type, if the file carries one.
    const PspBinary* find(PspFwType type) const { return find_type(Kind::sos, static_cast<uint32_t>(type)); }
    const PspBinary* find(TaFwType type) const { return find_type(Kind::ta, static_cast<uint32_t>(type)); }

private:
    const PspBinary* find_type(Kind of, uint32_t type) const;
};

// psp_firmware_header v1.0-v1.3 or v2.0. Every binary must lie inside the file; v2.0 descriptors
// must fit before the ucode array (they run past header_size_bytes, which counts only the
// common header and the count, in psp_13_0_0_sos.bin and psp_14_0_3_sos.bin; Linux's
// psp_init_sos_microcode walks psp_fw_bin[] by count alone).
PspFirmware parse_psp_sos(const ByteReader& file);
// ta_firmware_header v1.0 or v2.0.
PspFirmware parse_psp_ta(const ByteReader& file);

}  // namespace baregpu::fw::amd
