// The firmware the simulated PSP trusts: the ASIC's own linux-firmware files, parsed with
// firmware-loader. Where the real PSP checks signatures, the model compares what the driver put
// in VRAM byte for byte with the piece of the real file that the firmware type names, so a blob
// from another chip, a truncated one or a corrupted one is refused exactly where the real PSP
// would refuse it.
#pragma once

#include "drivers/sim/amdgpu/asic.hpp"
#include "firmware-loader/amd/psp.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace baregpu::sim::amdgpu {

// psp_gfx_if.h enum psp_gfx_fw_type (the values the model knows how to check).
namespace fw_type {
inline constexpr uint32_t kRlcV = 7, kRlcG = 8, kSmu = 18, kRlcRestoreListGpmMem = 20, kRlcRestoreListSrmMem = 21,
                          kRlcRestoreListSrmCntl = 22, kRlcP = 25, kRlcIram = 26, kRlcDramBoot = 48, kImuI = 68,
                          kImuD = 69, kSdmaUcodeTh0 = 71, kSdmaUcodeTh1 = 72, kRs64Pfp = 87, kRs64Me = 88,
                          kRs64Mec = 89, kRs64PfpP0Stack = 90, kRs64PfpP1Stack = 91, kRs64MeP0Stack = 92,
                          kRs64MeP1Stack = 93, kRs64MecP0Stack = 94, kRs64MecP3Stack = 97;
}  // namespace fw_type

class ReferenceFirmware {
public:
    // dir: where the files are (dir/NAME or dir/amdgpu/NAME); empty: "amdgpu/NAME" on the simulated
    // devices' search path (drivers/sim/firmware_path.hpp: $BAREGPU_FIRMWARE_PATH, the carried firmware/).
    ReferenceFirmware(const AsicInfo& asic, std::string dir);
    ~ReferenceFirmware();

    // Loads everything on first use. false (and why) when a file is missing or does not parse.
    bool available(std::string* why = nullptr);

    // The sOS package's component of that type (fw::amd::PspFwType), if it carries one.
    std::optional<std::span<const std::byte>> sos_component(fw::amd::PspFwType type);
    // What LOAD_IP_FW with this GFX_FW_TYPE must carry on this ASIC; nullopt: not a type this
    // chip takes.
    std::optional<std::span<const std::byte>> ip_firmware(uint32_t gfx_fw_type);
    // The RLC GFX_FW_TYPEs this ASIC's RLC file carries (non-empty pieces, per its header's minor
    // version): RLC_G plus the v2.1 lists, v2.2 IRAM/DRAM, v2.3 RLCP/RLCV. AUTOLOAD_RLC needs them all.
    std::vector<uint32_t> rlc_fw_types();
    uint32_t smu_version();  // smc header ucode_version (what GetSmuVersion answers)
    // The MEC image's start address (bytes): gfx_firmware_header_v2_0 ucode_start_addr_hi:lo, read here
    // at their offsets 56 and 52 (Linux amdgpu_ucode.h: the 32-byte common header, then
    // ucode_feature_version, ucode_size_bytes, ucode_offset_bytes, data_size_bytes, data_offset_bytes,
    // ucode_start_addr_lo, ucode_start_addr_hi), not through firmware-loader's parser the driver uses.
    std::optional<uint64_t> mec_ucode_start();
    uint32_t sos_version();  // the SOS component's fw_version (what C2PMSG_81 shows)

private:
    struct Loaded;
    const AsicInfo& asic_;
    std::string dir_;
    std::unique_ptr<Loaded> loaded_;
    std::string error_;
    bool tried_ = false;
};

}  // namespace baregpu::sim::amdgpu
