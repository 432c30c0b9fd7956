#include "firmware-loader/manifest.hpp"

#include <algorithm>
#include <cctype>

namespace baregpu::fw {

// File choice per IP version follows Linux's amdgpu *_init_microcode functions (gfx_v11_0.c,
// gfx_v12_0.c, psp_v13_0.c, psp_v14_0.c, smu_v13_0.c, smu_v14_0.c, sdma_v6_0.c, sdma_v7_0.c,
// imu_v11_0.c, imu_v12_0.c, amdgpu_mes.c) and nouveau/open-gpu-kernel-modules for NVIDIA; the
// names are those in linux-firmware's amdgpu/ and nvidia/ (firmware/MANIFEST.txt).
const std::vector<AsicManifest>& asic_manifests() {
    static const std::vector<AsicManifest> kManifests = {
        {"navi31", "amd", "Radeon RX 7900 XTX / XT (RDNA3)",
         {{"GC", "11.0.0"}, {"MP0 (PSP)", "13.0.0"}, {"MP1 (SMU)", "13.0.0"}, {"SDMA", "6.0.0"}},
         {
             {"amdgpu/psp_13_0_0_sos.bin", "PSP: SYS_DRV, SOS, TOC, KDB, SPL, RL"},
             {"amdgpu/psp_13_0_0_ta.bin", "PSP trusted applications (ASD, HDCP, DTM, RAS)", false},
             {"amdgpu/smu_13_0_0.bin", "SMU firmware and soft PPTables"},
             {"amdgpu/gc_11_0_0_imu.bin", "IMU IRAM/DRAM"},
             {"amdgpu/gc_11_0_0_rlc.bin", "RLC_G, save/restore lists, RLCP, RLCV"},
             {"amdgpu/gc_11_0_0_pfp.bin", "CP PFP (RS64)"},
             {"amdgpu/gc_11_0_0_me.bin", "CP ME (RS64)"},
             {"amdgpu/gc_11_0_0_mec.bin", "CP MEC (RS64), compute"},
             {"amdgpu/gc_11_0_0_mes_2.bin", "MES scheduler pipe", false},
             {"amdgpu/gc_11_0_0_mes1.bin", "MES KIQ pipe", false},
             {"amdgpu/sdma_6_0_0.bin", "SDMA TH0/TH1"},
         }},
        {"navi48", "amd", "Radeon RX 9070 XT / 9070 (RDNA4)",
         {{"GC", "12.0.1"}, {"MP0 (PSP)", "14.0.3"}, {"MP1 (SMU)", "14.0.3"}, {"SDMA", "7.0.1"}},
         {
             {"amdgpu/psp_14_0_3_sos.bin", "PSP: KDB, SYS_DRV, SOS, SOC_DRV, INTF_DRV, DBG_DRV, TOC, ..."},
             {"amdgpu/psp_14_0_3_ta.bin", "PSP trusted applications (ASD, HDCP, DTM, RAS)", false},
             {"amdgpu/smu_14_0_3.bin", "SMU firmware and soft PPTable"},
             {"amdgpu/gc_12_0_1_imu.bin", "IMU IRAM/DRAM"},
             {"amdgpu/gc_12_0_1_rlc.bin", "RLC_G, save/restore lists, IRAM/DRAM"},
             {"amdgpu/gc_12_0_1_pfp.bin", "CP PFP (RS64)"},
             {"amdgpu/gc_12_0_1_me.bin", "CP ME (RS64)"},
             {"amdgpu/gc_12_0_1_mec.bin", "CP MEC (RS64), compute"},
             {"amdgpu/gc_12_0_1_mes.bin", "MES scheduler pipe", false},
             {"amdgpu/gc_12_0_1_mes1.bin", "MES KIQ pipe", false},
             {"amdgpu/gc_12_0_1_uni_mes.bin", "unified MES", false},
             {"amdgpu/gc_12_0_1_toc.bin", "RLC backdoor-autoload TOC", false},
             {"amdgpu/sdma_7_0_1.bin", "SDMA (RS64)"},
         }},
        {"ad102", "nvidia", "GeForce RTX 4090 / Ada (AD10x)",
         {{"architecture", "Ada (sm_89)"}, {"GSP-RM", "570.144"}},
         {
             {"nvidia/ad102/gsp/gsp-570.144.bin", "GSP-RM firmware image (ELF, .fwimage)"},
             {"nvidia/ad102/gsp/bootloader-570.144.bin", "GSP RISC-V bootloader"},
             {"nvidia/ad102/gsp/booter_load-570.144.bin", "SEC2 booter: loads GSP-RM (HS falcon ucode)"},
             {"nvidia/ad102/gsp/booter_unload-570.144.bin", "SEC2 booter: unloads GSP-RM at teardown"},
             {"nvidia/ad102/gsp/scrubber-570.144.bin", "FB scrubber (HS falcon ucode)", false},
         }},
        {"gb202", "nvidia", "GeForce RTX 5090 / Blackwell (GB20x)",
         {{"architecture", "Blackwell (sm_120)"}, {"GSP-RM", "570.144"}},
         {
             {"nvidia/gb202/gsp/gsp-570.144.bin", "GSP-RM firmware image (ELF, .fwimage)"},
             {"nvidia/gb202/gsp/bootloader-570.144.bin", "GSP RISC-V bootloader"},
             {"nvidia/gb202/gsp/fmc-570.144.bin", "FMC: chain-of-trust boot (ELF32: image, hash, signature, publickey)"},
         }},
    };
    return kManifests;
}

const AsicManifest* find_asic(std::string_view name) {
    auto lower = [](std::string_view s) {
        std::string out(s);
        std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
        return out;
    };
    std::string wanted = lower(name);
    for (const AsicManifest& m : asic_manifests())
        if (m.name == wanted) return &m;
    return nullptr;
}

}  // namespace baregpu::fw
