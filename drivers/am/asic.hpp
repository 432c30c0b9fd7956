// What drivers/am knows about each chip it brings up, as data: one row per ASIC. Adding a chip
// is one more row (and, if its IP versions are new, register tables in registers.cpp).
// IP versions: what the chip's IP discovery table reports (tinygrad amdev.py AMDev firmware names, "Firmware for the two
// consumer targets"); firmware names: firmware-loader's manifest (the MODULE_FIRMWARE lines of
// Linux psp_v13_0.c / psp_v14_0.c / smu_v13_0_0_ppt.c / smu_v14_0_2_ppt.c / sdma_v6_0.c /
// sdma_v7_0.c / gfx_v11_0.c / gfx_v12_0.c / imu_v11_0.c / imu_v12_0.c).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::am {

struct IpVersion {
    uint8_t major = 0, minor = 0, revision = 0;
    friend bool operator==(const IpVersion&, const IpVersion&) = default;
    std::string str() const;  // "11.0.0"
};

struct AsicInfo {
    std::string_view name;        // "navi31": the firmware-loader manifest's name, and the chip name of
                                  // drivers/pci/gpu_ids.cpp (which lists its PCI device IDs)
    std::string_view marketing;   // "Radeon RX 7900 XTX"
    unsigned gc_generation = 0;   // 11 (RDNA3) or 12 (RDNA4): picks register tables and PTE format
    IpVersion gc, mp0, mp1, sdma, mmhub, nbio, hdp, osssys;
    // Firmware files, linux-firmware names.
    std::string_view psp_sos, smu, sdma_fw, imu, rlc;
    std::vector<std::string_view> cp;  // RS64 CP files, loaded in this order (PFP, ME, MEC)
    // Linux amdgpu_psp.c psp_load_fw: boot_time_tmr && autoload_tmr (MP0 14.0.2/14.0.3) means the
    // PSP sets up its TMR itself and SETUP_TMR must not be sent.
    bool psp_setup_tmr = true;
    // smu_v13_0_0_ppt.c / smu_v14_0_2_ppt.c mode1_reset: MP0 13.0.0 and 14.x reset through the
    // SMU debug mailbox (DEBUGSMC_MSG_Mode1Reset) rather than PPSMC_MSG_Mode1Reset.
    bool mode1_via_debug_mailbox = true;
};

// The table, in a fixed order.
const std::vector<AsicInfo>& asics();
// By PCI device id (vendor 0x1002), through drivers/pci/gpu_ids.cpp's table: every ID of a chip
// it marks driven by am; nullptr for any other.
const AsicInfo* find_asic_by_device_id(uint16_t device_id);
// By the discovered GC version; nullptr when unknown.
const AsicInfo* find_asic_by_gc(const IpVersion& gc);
// By name ("navi31"), case-insensitive.
const AsicInfo* find_asic(std::string_view name);

}  // namespace baregpu::am
