#include "drivers/am/asic.hpp"

#include "drivers/pci/gpu_ids.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>

namespace baregpu::am {

std::string IpVersion::str() const { return fmt::format("{}.{}.{}", major, minor, revision); }

const std::vector<AsicInfo>& asics() {
    static const std::vector<AsicInfo> table = {
        {
            .name = "navi31",
            .marketing = "Radeon RX 7900 XTX (Navi31, RDNA3)",
            .gc_generation = 11,
            .gc = {11, 0, 0}, .mp0 = {13, 0, 0}, .mp1 = {13, 0, 0}, .sdma = {6, 0, 0},
            .mmhub = {3, 0, 0}, .nbio = {4, 3, 0}, .hdp = {6, 0, 0}, .osssys = {6, 0, 0},
            .psp_sos = "amdgpu/psp_13_0_0_sos.bin",
            .smu = "amdgpu/smu_13_0_0.bin",
            .sdma_fw = "amdgpu/sdma_6_0_0.bin",
            .imu = "amdgpu/gc_11_0_0_imu.bin",
            .rlc = "amdgpu/gc_11_0_0_rlc.bin",
            // tinygrad ip.py AM_PSP: GC 11 loads only the MEC through the PSP; PFP/ME are the
            // graphics pipe, which AM does not use.
            .cp = {"amdgpu/gc_11_0_0_mec.bin"},
            .psp_setup_tmr = true,
            .mode1_via_debug_mailbox = true,
        },
        {
            .name = "navi48",
            .marketing = "Radeon RX 9070 XT (Navi48, RDNA4)",
            .gc_generation = 12,
            .gc = {12, 0, 1}, .mp0 = {14, 0, 3}, .mp1 = {14, 0, 3}, .sdma = {7, 0, 1},
            .mmhub = {4, 1, 0}, .nbio = {6, 3, 1}, .hdp = {7, 0, 0}, .osssys = {7, 0, 0},
            .psp_sos = "amdgpu/psp_14_0_3_sos.bin",
            .smu = "amdgpu/smu_14_0_3.bin",
            .sdma_fw = "amdgpu/sdma_7_0_1.bin",
            .imu = "amdgpu/gc_12_0_1_imu.bin",
            .rlc = "amdgpu/gc_12_0_1_rlc.bin",
            .cp = {"amdgpu/gc_12_0_1_pfp.bin", "amdgpu/gc_12_0_1_me.bin", "amdgpu/gc_12_0_1_mec.bin"},
            .psp_setup_tmr = false,  // MP0 14.0.3: boot-time TMR (amdgpu_psp.c psp_sw_init)
            .mode1_via_debug_mailbox = true,
        },
    };
    return table;
}

const AsicInfo* find_asic_by_device_id(uint16_t device_id) {
    // The one table of IDs (drivers/pci/gpu_ids.cpp) names the chip; this table has its data.
    std::optional<pci::GpuFamily> family = pci::find_gpu_family(pci::kVendorAmd, device_id);
    if (!family || family->backend != "am" || family->support != pci::GpuSupport::Driven) return nullptr;
    return find_asic(family->chip);
}

const AsicInfo* find_asic_by_gc(const IpVersion& gc) {
    for (const AsicInfo& a : asics()) {
        if (a.gc == gc) return &a;
    }
    return nullptr;
}

const AsicInfo* find_asic(std::string_view name) {
    for (const AsicInfo& a : asics()) {
        if (a.name.size() == name.size() &&
            std::equal(name.begin(), name.end(), a.name.begin(), [](char x, char y) {
                return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
            })) {
            return &a;
        }
    }
    return nullptr;
}

}  // namespace baregpu::am
