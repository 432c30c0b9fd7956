// Step 1 of bring-up: how much VRAM there is (RCC_CONFIG_MEMSIZE) and the IP discovery binary
// at its top - 64 KiB, which tells us every IP block's version and register bases. Parsing and
// validation (signatures, checksums, bounds) is firmware-loader's parse_discovery.
#pragma once

#include "drivers/am/asic.hpp"
#include "drivers/am/registers.hpp"
#include "drivers/am/vram.hpp"
#include "firmware-loader/amd/discovery.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::am {

// Linux amdgpu_discovery.c: mmRCC_CONFIG_MEMSIZE, a fixed dword address, MiB.
inline constexpr uint32_t kRccConfigMemsize = 0xde3;
// amdgpu_discovery.c amdgpu_discovery_read_binary_from_mem: mmMP0_SMN_C2PMSG_33 (fixed, 0x16061) bit 31
// is set once the IFWI has initialised the chip ("up to a second ... generally 60-100ms", e.g. when
// the card is hot-plugged through USB4); Linux polls it for up to 1 s before reading discovery.
inline constexpr uint32_t kMp0C2pmsg33 = 0x16061;
inline constexpr uint32_t kIfwiInitDone = 0x80000000u;
// Polls C2PMSG_33 until the IFWI init is done; throws TimeoutError after 1 s of device time.
void wait_ifwi_init(Mmio& mmio);
// DISCOVERY_TMR_OFFSET (amdgpu_discovery.c): the binary sits 64 KiB below the top of VRAM.
inline constexpr uint64_t kDiscoveryOffsetFromTop = 64 << 10;

struct DiscoveredBlock {
    HwIp ip;
    IpVersion version;
    std::vector<uint32_t> bases;
};

struct DiscoveryResult {
    uint64_t vram_size = 0;
    uint64_t table_offset = 0;  // in VRAM
    std::vector<DiscoveredBlock> blocks;  // instance 0 of each block drivers/am uses
    const AsicInfo* asic = nullptr;       // matched by the GC version
    IpBases bases;
    std::vector<fw::amd::HarvestedIp> harvested;  // from the HARVEST_INFO table
    std::optional<fw::amd::GcInfo> gc_info;        // from the GC table (SEs, WGPs, LDS, waves)

    const DiscoveredBlock* find(HwIp ip) const;
};

// Reads VRAM size and the binary (via `vram`), validates it, maps the IP blocks and checks their
// versions against the ASIC table. Throws ProtocolError naming the device and what is wrong.
uint64_t read_vram_size(Mmio& mmio);
DiscoveryResult run_discovery(Mmio& mmio, Vram& vram);

}  // namespace baregpu::am
