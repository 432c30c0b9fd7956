#include "drivers/sim/amdgpu/asic.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

namespace baregpu::sim::amdgpu {

namespace {

// Register bases: Linux include/sienna_cichlid_ip_offset.h (*_BASE__INST0_SEGn), the public
// Navi table closest to Navi31/Navi48 (tinygrad's mock uses the same for its Navi4x chip).
// Exception: Navi48's MP1 segment 1 is 0x16200 so that the SMU mailbox has one address whether a
// driver takes it from mp_14_0_2_offset.h (BASE_IDX 1, regMP1_SMN_C2PMSG_66 = 0x82) or from
// mp_13_0_0/mp_11_0 (BASE_IDX 0, 0x282); no public source gives Navi48's own bases.
constexpr std::array<uint32_t, 6> kGcBases{0x00001260, 0x0000A000, 0x0001C000, 0x02402C00, 0, 0};
constexpr std::array<uint32_t, 6> kMmhubBases{0x0001A000, 0x02408800, 0, 0, 0, 0};
constexpr std::array<uint32_t, 6> kNbioBases{0x00000000, 0x00000014, 0x00000D20, 0x00010400, 0x0241B000, 0x04040000};
constexpr std::array<uint32_t, 6> kMpBases{0x00016000, 0x00DC0000, 0x00E00000, 0x00E40000, 0x0243FC00, 0};
constexpr std::array<uint32_t, 6> kMp1Navi48Bases{0x00016000, 0x00016200, 0x00E00000, 0x00E40000, 0x0243FC00, 0};
constexpr std::array<uint32_t, 6> kHdpBases{0x00000F20, 0x0240A400, 0, 0, 0, 0};
constexpr std::array<uint32_t, 6> kOsssysBases{0x000010A0, 0x0240A000, 0, 0, 0, 0};

IpBlock block(uint16_t hw_id, IpVersion v, const std::array<uint32_t, 6>& bases, uint8_t count,
              uint8_t instance = 0) {
    return IpBlock{hw_id, instance, v, bases, count};
}

AsicInfo make_navi31() {
    AsicInfo a{};
    a.asic = Asic::navi31;
    a.name = "navi31";
    a.device_id = 0x744c;  // RX 7900 XTX (Linux amdgpu_drv.c pciidlist)
    a.revision = 0xc8;
    a.ips = {
        block(hwid::kGc, {11, 0, 0}, kGcBases, 4),
        block(hwid::kSdma0, {6, 0, 0}, kGcBases, 4),
        block(hwid::kSdma1, {6, 0, 0}, kGcBases, 4),
        block(hwid::kMmhub, {3, 0, 0}, kMmhubBases, 2),
        block(hwid::kNbif, {4, 3, 0}, kNbioBases, 6),
        block(hwid::kMp0, {13, 0, 0}, kMpBases, 5),
        block(hwid::kMp1, {13, 0, 0}, kMpBases, 5),
        block(hwid::kHdp, {6, 0, 0}, kHdpBases, 2),
        block(hwid::kOsssys, {6, 0, 0}, kOsssysBases, 2),
    };
    // 96 CUs: 6 SE x 2 SA x 4 WGP x 2 CU (AMD RDNA3 white paper numbers).
    a.gc = {6, 4, 0, 4, 24, 1536, 32, 16, 32, 64, 1, 2, 4, 4};
    a.psp_sos = "psp_13_0_0_sos.bin";
    a.smu = "smu_13_0_0.bin";
    a.sdma = "sdma_6_0_0.bin";
    a.cp = {"gc_11_0_0_mec.bin"};
    a.imu = "gc_11_0_0_imu.bin";
    a.rlc = "gc_11_0_0_rlc.bin";
    return a;
}

AsicInfo make_navi48() {
    AsicInfo a{};
    a.asic = Asic::navi48;
    a.name = "navi48";
    a.device_id = 0x7550;  // RX 9070 XT
    a.revision = 0xc0;
    a.ips = {
        block(hwid::kGc, {12, 0, 1}, kGcBases, 4),
        block(hwid::kSdma0, {7, 0, 1}, kGcBases, 4),
        block(hwid::kSdma1, {7, 0, 1}, kGcBases, 4),
        block(hwid::kMmhub, {4, 1, 0}, kMmhubBases, 2),
        block(hwid::kNbif, {6, 3, 1}, kNbioBases, 6),
        block(hwid::kMp0, {14, 0, 3}, kMpBases, 5),
        block(hwid::kMp1, {14, 0, 3}, kMp1Navi48Bases, 5),
        block(hwid::kHdp, {7, 0, 0}, kHdpBases, 2),
        block(hwid::kOsssys, {7, 0, 0}, kOsssysBases, 2),
    };
    // 64 CUs: 4 SE x 2 SA x 4 WGP x 2 CU.
    a.gc = {4, 4, 0, 4, 16, 1536, 32, 16, 32, 64, 1, 2, 4, 4};
    a.psp_sos = "psp_14_0_3_sos.bin";
    a.smu = "smu_14_0_3.bin";
    a.sdma = "sdma_7_0_1.bin";
    a.cp = {"gc_12_0_1_pfp.bin", "gc_12_0_1_me.bin", "gc_12_0_1_mec.bin"};
    a.imu = "gc_12_0_1_imu.bin";
    a.rlc = "gc_12_0_1_rlc.bin";
    return a;
}

}  // namespace

const IpBlock& AsicInfo::ip(uint16_t hw_id, uint8_t instance) const {
    for (const IpBlock& b : ips)
        if (b.hw_id == hw_id && b.instance == instance) return b;
    throw Error(std::string(name), fmt::format("no IP block with hardware id {} instance {}", hw_id, instance));
}

bool AsicInfo::boot_time_tmr() const {
    IpVersion v = version(hwid::kMp0);
    return v == IpVersion{13, 0, 6} || v == IpVersion{13, 0, 14} || v == IpVersion{14, 0, 2} ||
           v == IpVersion{14, 0, 3};
}

const AsicInfo& asic_info(Asic asic) {
    static const AsicInfo navi31 = make_navi31();
    static const AsicInfo navi48 = make_navi48();
    switch (asic) {
        case Asic::navi31: return navi31;
        case Asic::navi48: return navi48;
    }
    throw Error("sim-am", fmt::format("unknown ASIC {}", static_cast<uint32_t>(asic)));
}

std::string_view to_string(Asic asic) { return asic_info(asic).name; }

}  // namespace baregpu::sim::amdgpu
