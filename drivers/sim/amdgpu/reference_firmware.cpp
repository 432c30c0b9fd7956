#include "drivers/sim/amdgpu/reference_firmware.hpp"

#include "base/error.hpp"
#include "firmware-loader/amd/gfx.hpp"
#include "firmware-loader/amd/imu.hpp"
#include "firmware-loader/amd/rlc.hpp"
#include "firmware-loader/amd/sdma.hpp"
#include "firmware-loader/amd/smc.hpp"
#include "drivers/sim/firmware_path.hpp"
#include "firmware-loader/search_path.hpp"

#include <cstring>
#include <deque>
#include <filesystem>

namespace baregpu::sim::amdgpu {

struct ReferenceFirmware::Loaded {
    std::deque<fw::FirmwareFile> files;  // stable addresses: the parsed regions point into them
    fw::amd::PspFirmware sos;
    std::map<uint32_t, std::span<const std::byte>> ip;  // GFX_FW_TYPE -> expected bytes
    std::vector<uint32_t> rlc_types;                    // the RLC pieces the file carries
    uint32_t smu_version = 0;
    uint32_t sos_version = 0;
    std::optional<uint64_t> mec_ucode_start;
};

ReferenceFirmware::ReferenceFirmware(const AsicInfo& asic, std::string dir) : asic_(asic), dir_(std::move(dir)) {}
ReferenceFirmware::~ReferenceFirmware() = default;

bool ReferenceFirmware::available(std::string* why) {
    if (!tried_) {
        tried_ = true;
        try {
            auto loaded = std::make_unique<Loaded>();
            auto read = [&](std::string_view name) -> fw::ByteReader {
                std::optional<std::filesystem::path> path;
                if (!dir_.empty()) {
                    fw::FirmwareSearchPath search({std::filesystem::path(dir_), std::filesystem::path(dir_) / "amdgpu"});
                    path = search.find(name);
                    if (!path) throw Error("sim-am", "no " + std::string(name) + " in " + dir_);
                } else {
                    path = firmware_search_path().find("amdgpu/" + std::string(name));
                    if (!path) throw Error("sim-am", "no amdgpu/" + std::string(name) + " on the simulated devices' firmware search path");
                }
                loaded->files.push_back(fw::read_firmware_file(*path));
                return fw::ByteReader(loaded->files.back().bytes, std::string(name));
            };
            auto put = [&](uint32_t type, const fw::Region& r) {
                if (r.size() != 0) loaded->ip[type] = r.bytes;
            };
            loaded->sos = fw::amd::parse_psp_sos(read(asic_.psp_sos));
            if (const auto* sos = loaded->sos.find(fw::amd::PspFwType::sos)) loaded->sos_version = sos->fw_version;

            fw::amd::SmcFirmware smc = fw::amd::parse_smc(read(asic_.smu));
            loaded->smu_version = smc.header.ucode_version;
            put(fw_type::kSmu, smc.code);

            fw::amd::SdmaFirmware sdma = fw::amd::parse_sdma(read(asic_.sdma));
            put(fw_type::kSdmaUcodeTh0, sdma.ucode);
            if (sdma.ctl_ucode) put(fw_type::kSdmaUcodeTh1, *sdma.ctl_ucode);

            for (std::string_view name : asic_.cp) {
                fw::amd::GfxFirmware gfx = fw::amd::parse_gfx(read(name));
                uint32_t code = 0, stack0 = 0, stack_last = 0;
                if (name.ends_with("_pfp.bin")) {
                    code = fw_type::kRs64Pfp, stack0 = fw_type::kRs64PfpP0Stack, stack_last = fw_type::kRs64PfpP1Stack;
                } else if (name.ends_with("_me.bin")) {
                    code = fw_type::kRs64Me, stack0 = fw_type::kRs64MeP0Stack, stack_last = fw_type::kRs64MeP1Stack;
                } else {
                    code = fw_type::kRs64Mec, stack0 = fw_type::kRs64MecP0Stack, stack_last = fw_type::kRs64MecP3Stack;
                }
                put(code, gfx.instructions);
                if (code == fw_type::kRs64Mec) {
                    const fw::FirmwareFile& f = loaded->files.back();
                    auto u32 = [&](size_t at) {
                        uint32_t v = 0;
                        if (at + 4 <= f.bytes.size()) std::memcpy(&v, f.bytes.data() + at, 4);
                        return v;
                    };
                    loaded->mec_ucode_start = uint64_t{u32(56)} << 32 | u32(52);
                }
                // RS64 stacks: the same data region for each pipe (amdgpu_ucode.c, *_P{0..3}_STACK).
                if (gfx.data)
                    for (uint32_t t = stack0; t <= stack_last; ++t) put(t, *gfx.data);
            }

            fw::amd::ImuFirmware imu = fw::amd::parse_imu(read(asic_.imu));
            put(fw_type::kImuI, imu.iram);
            put(fw_type::kImuD, imu.dram);

            fw::amd::RlcFirmware rlc = fw::amd::parse_rlc(read(asic_.rlc));
            struct RlcType {
                uint32_t type;
                const char* region;
            };
            // psp_gfx_if.h types <- the rlc_firmware_header_v2_x pieces (amdgpu_psp.c psp_get_fw_type).
            for (RlcType t : {RlcType{fw_type::kRlcG, "RLC_G"}, RlcType{fw_type::kRlcRestoreListGpmMem, "save_restore_list_gpm"},
                              RlcType{fw_type::kRlcRestoreListSrmMem, "save_restore_list_srm"},
                              RlcType{fw_type::kRlcRestoreListSrmCntl, "save_restore_list_cntl"},
                              RlcType{fw_type::kRlcIram, "IRAM"}, RlcType{fw_type::kRlcDramBoot, "DRAM"},
                              RlcType{fw_type::kRlcP, "RLCP"}, RlcType{fw_type::kRlcV, "RLCV"}}) {
                if (const fw::amd::RlcRegion* r = rlc.find(t.region); r != nullptr && r->bytes.size() != 0) {
                    put(t.type, r->bytes);
                    loaded->rlc_types.push_back(t.type);
                }
            }
            loaded_ = std::move(loaded);
        } catch (const std::exception& e) {
            error_ = e.what();
        }
    }
    if (!loaded_ && why != nullptr) *why = error_;
    return loaded_ != nullptr;
}

std::optional<std::span<const std::byte>> ReferenceFirmware::sos_component(fw::amd::PspFwType type) {
    if (!available()) return std::nullopt;
    const fw::amd::PspBinary* b = loaded_->sos.find(type);
    if (b == nullptr) return std::nullopt;
    return b->bytes.bytes;
}

std::optional<std::span<const std::byte>> ReferenceFirmware::ip_firmware(uint32_t gfx_fw_type) {
    if (!available()) return std::nullopt;
    auto it = loaded_->ip.find(gfx_fw_type);
    if (it == loaded_->ip.end()) return std::nullopt;
    return it->second;
}

std::vector<uint32_t> ReferenceFirmware::rlc_fw_types() {
    if (!available()) return {};
    return loaded_->rlc_types;
}

uint32_t ReferenceFirmware::smu_version() { return available() ? loaded_->smu_version : 0; }
std::optional<uint64_t> ReferenceFirmware::mec_ucode_start() { return available() ? loaded_->mec_ucode_start : std::nullopt; }
uint32_t ReferenceFirmware::sos_version() { return available() ? loaded_->sos_version : 0; }

}  // namespace baregpu::sim::amdgpu
