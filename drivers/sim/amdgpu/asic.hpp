// The simulated chips, one table row per ASIC: PCI identity, the IP blocks the discovery table
// lists (hardware id, version, register bases), the firmware the PSP accepts, and the GC
// numbers of the discovery GC table. Everything the model does that differs between chips is
// read from here, so adding an ASIC is adding a row (asic.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace baregpu::sim::amdgpu {

enum class Asic : uint32_t { navi31 = 1, navi48 = 2 };

// Hardware ids of the IP blocks (Linux include/soc15_hw_ip.h; hw_id_map in amdgpu_discovery.c
// maps NBIO to NBIF_HWID).
namespace hwid {
inline constexpr uint16_t kMp1 = 1;
inline constexpr uint16_t kGc = 11;
inline constexpr uint16_t kMmhub = 34;
inline constexpr uint16_t kOsssys = 40;
inline constexpr uint16_t kHdp = 41;
inline constexpr uint16_t kSdma0 = 42;
inline constexpr uint16_t kSdma1 = 43;
inline constexpr uint16_t kNbif = 108;
inline constexpr uint16_t kMp0 = 255;
}  // namespace hwid

struct IpVersion {
    uint8_t major = 0, minor = 0, revision = 0;
    friend bool operator==(const IpVersion&, const IpVersion&) = default;
};

struct IpBlock {
    uint16_t hw_id = 0;
    uint8_t instance = 0;
    IpVersion version;
    std::array<uint32_t, 6> bases{};  // dword register bases (segments); unused ones are 0
    uint8_t base_count = 0;
};

// gc_info_v1_x fields the discovery GC table carries (Linux include/discovery.h).
struct GcInfo {
    uint32_t num_se = 0, num_wgp0_per_sa = 0, num_wgp1_per_sa = 0, num_rb_per_se = 0, num_gl2c = 0,
             num_gprs = 0, wave_size = 0, max_waves_per_simd = 0, max_scratch_slots_per_cu = 0, lds_size_kib = 0,
             num_sc_per_se = 0, num_sa_per_se = 0, num_packer_per_sc = 0, num_gl2a = 0;
};

struct AsicInfo {
    Asic asic;
    std::string_view name;  // "navi31"
    uint16_t vendor_id = 0x1002, device_id = 0;
    uint8_t revision = 0;
    std::vector<IpBlock> ips;
    GcInfo gc;
    // Firmware file names (linux-firmware amdgpu/): the PSP compares what it is given with these.
    std::string_view psp_sos, smu, sdma;
    std::vector<std::string_view> cp;  // gc_*_{pfp,me,mec}.bin the chip needs
    std::string_view imu, rlc;

    const IpBlock& ip(uint16_t hw_id, uint8_t instance = 0) const;
    uint32_t base(uint16_t hw_id, unsigned segment) const { return ip(hw_id).bases.at(segment); }
    IpVersion version(uint16_t hw_id) const { return ip(hw_id).version; }
    unsigned gc_major() const { return version(hwid::kGc).major; }
    // MP0 13.0.6/13.0.14/14.0.2/14.0.3 set the TMR up at boot (Linux amdgpu_psp.c, boot_time_tmr):
    // the driver must not send SETUP_TMR.
    bool boot_time_tmr() const;
};

const AsicInfo& asic_info(Asic asic);
std::string_view to_string(Asic asic);

// The simulated VRAM (real boards: Navi31 24 GiB, Navi48 16 GiB; 1 GiB keeps the sparse state
// file and the tests small) and where the memory controller puts it (MC = fb_base + offset).
inline constexpr uint64_t kVramBytes = uint64_t{1} << 30;
inline constexpr uint64_t kFbBase = 0x0000008000000000ull;
inline constexpr uint64_t kDiscoveryOffset = kVramBytes - (64u << 10);  // VRAM top - 64 KiB (tinygrad amdev.py AMDev._run_discovery)
inline constexpr uint64_t kDiscoveryBytes = 10u << 10;
inline constexpr uint64_t kBar2Bytes = 2u << 20;  // doorbells
inline constexpr uint64_t kBar5Bytes = 1u << 20;  // MMIO
inline constexpr uint32_t kBar5Dwords = kBar5Bytes / 4;

}  // namespace baregpu::sim::amdgpu
