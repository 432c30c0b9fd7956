// Which firmware files each supported chip needs, as data: one table row per ASIC, the one place
// to add a new chip. The names are linux-firmware's; the IP versions are what the chip's IP
// discovery table reports (AMD) or its architecture (NVIDIA).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace baregpu::fw {

struct FirmwareNeed {
    std::string name;  // path under a firmware directory: "amdgpu/psp_13_0_0_sos.bin"
    std::string role;  // what the driver does with it: "PSP sOS (SYS_DRV, SOS, TOC, KDB, SPL)"
    bool required = true;  // false: used only in some modes (RLC backdoor autoload, unified MES, ...)
};

struct AsicManifest {
    std::string name;        // "navi31"
    std::string vendor;      // "amd" or "nvidia"
    std::string marketing;   // "Radeon RX 7900 XTX (RDNA3)"
    std::vector<std::pair<std::string, std::string>> ip_versions;  // {"GC", "11.0.0"}, ...
    std::vector<FirmwareNeed> files;
};

const std::vector<AsicManifest>& asic_manifests();
// By name, case-insensitive ("navi31", "Navi48", "ad102"); nullptr when unknown.
const AsicManifest* find_asic(std::string_view name);

}  // namespace baregpu::fw
