#include "drivers/am/discovery.hpp"

#include "base/error.hpp"
#include "drivers/am/wait.hpp"
#include "drivers/pci/pci_device.hpp"
#include "firmware-loader/amd/discovery.hpp"

#include <fmt/format.h>

namespace baregpu::am {

const DiscoveredBlock* DiscoveryResult::find(HwIp ip) const {
    for (const DiscoveredBlock& b : blocks) {
        if (b.ip == ip) return &b;
    }
    return nullptr;
}

void wait_ifwi_init(Mmio& mmio) {
    uint32_t last = 0;
    if (!poll_until(mmio.device(), std::chrono::seconds(1), [&] {
            last = mmio.read(kMp0C2pmsg33, "MP0_SMN_C2PMSG_33");
            return (last & kIfwiInitDone) != 0;
        })) {
        throw TimeoutError(mmio.device().name(),
                           fmt::format("timed out after 1000 ms waiting for the IFWI init: MP0_SMN_C2PMSG_33 (dword {:#x}) "
                                       "& 0x80000000 should be 0x80000000, last read {:#010x}",
                                       kMp0C2pmsg33, last));
    }
}

uint64_t read_vram_size(Mmio& mmio) {
    uint32_t mib = mmio.read(kRccConfigMemsize, "RCC_CONFIG_MEMSIZE");
    if (mib == 0 || mib > (1u << 20)) {
        throw ProtocolError(mmio.device().name(),
                            fmt::format("RCC_CONFIG_MEMSIZE (dword {:#x}) reads {} MiB: not a plausible VRAM size",
                                        kRccConfigMemsize, mib));
    }
    return uint64_t{mib} << 20;
}

DiscoveryResult run_discovery(Mmio& mmio, Vram& vram) {
    const std::string& dev = mmio.device().name();
    DiscoveryResult out;
    out.vram_size = vram.size();
    out.table_offset = vram.size() - kDiscoveryOffsetFromTop;

    // binary_header (discovery.h): signature u32, version u16 x2, checksum u16, binary_size u16 at +10.
    std::vector<std::byte> header(12);
    vram.read(out.table_offset, header);
    uint16_t size = static_cast<uint16_t>(std::to_integer<uint16_t>(header[10]) | std::to_integer<uint16_t>(header[11]) << 8);
    if (size < 60) size = 60;  // let the parser report the bad header
    std::vector<std::byte> bytes(size);
    vram.read(out.table_offset, bytes);

    fw::amd::Discovery parsed;
    try {
        parsed = fw::amd::parse_discovery(fw::ByteReader(bytes, fmt::format("{} IP discovery @VRAM {:#x}", dev,
                                                                            out.table_offset)));
    } catch (const FirmwareError& e) {
        throw ProtocolError(dev, fmt::format("the IP discovery binary at VRAM top - 64 KiB is invalid: {}", e.what()));
    }

    out.harvested = parsed.harvested;
    out.gc_info = parsed.gc_info;

    const HwIp wanted[] = {HwIp::gc, HwIp::mp0, HwIp::mp1, HwIp::mmhub, HwIp::nbio, HwIp::hdp, HwIp::osssys,
                           HwIp::sdma0, HwIp::sdma1};
    for (HwIp ip : wanted) {
        const fw::amd::DiscoveredIp* found = parsed.find(static_cast<uint16_t>(ip), 0);
        if (found == nullptr) continue;
        DiscoveredBlock b{ip, {found->major, found->minor, found->revision}, {}};
        std::array<uint32_t, 8> bases{};
        unsigned n = 0;
        for (uint64_t base : found->base_addresses) {
            if (n == bases.size()) break;
            if (base > 0xffffffffu) throw ProtocolError(dev, fmt::format("{} base {:#x} beyond 32 bits", to_string(ip), base));
            b.bases.push_back(static_cast<uint32_t>(base));
            bases[n++] = static_cast<uint32_t>(base);
        }
        out.bases.set(ip, bases, n);
        out.blocks.push_back(std::move(b));
    }

    const DiscoveredBlock* gc = out.find(HwIp::gc);
    if (gc == nullptr) throw ProtocolError(dev, "the IP discovery table has no GC block");
    out.asic = find_asic_by_gc(gc->version);
    if (out.asic == nullptr) {
        throw UnsupportedError(dev, fmt::format("GC {} is not a chip drivers/am supports (Navi31: GC 11.0.0, "
                                                "Navi48: GC 12.0.1)", gc->version.str()));
    }
    struct Expect {
        HwIp ip;
        IpVersion v;
    };
    const Expect expects[] = {{HwIp::mp0, out.asic->mp0}, {HwIp::mp1, out.asic->mp1}, {HwIp::mmhub, out.asic->mmhub},
                              {HwIp::nbio, out.asic->nbio}, {HwIp::osssys, out.asic->osssys}};
    for (const Expect& e : expects) {
        const DiscoveredBlock* b = out.find(e.ip);
        if (b == nullptr) throw ProtocolError(dev, fmt::format("the IP discovery table has no {} block", to_string(e.ip)));
        if (!(b->version == e.v)) {
            throw UnsupportedError(dev, fmt::format("{} with GC {} reports {} {}; drivers/am knows {} {} for it",
                                                    out.asic->name, gc->version.str(), to_string(e.ip),
                                                    b->version.str(), to_string(e.ip), e.v.str()));
        }
    }
    return out;
}

}  // namespace baregpu::am
