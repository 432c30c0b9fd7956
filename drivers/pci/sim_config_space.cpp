#include "drivers/pci/sim_config_space.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"

#include <fmt/format.h>

namespace baregpu::pci::sim {

namespace {

// Where each capability sits in our simulated functions. Any layout is legal; this one
// leaves room for every capability we model.
constexpr uint16_t kPmCap = 0x40;  // 8 bytes
constexpr uint16_t kMsiCap = 0x50;  // 14 bytes (64-bit, no per-vector masking)
constexpr uint16_t kExpressCap = 0x60;  // 0x3c bytes (version 2)
constexpr uint16_t kMsixCap = 0xa0;  // 12 bytes

unsigned log2_exact(unsigned v) {
    unsigned l = 0;
    while ((1u << l) < v) ++l;
    return l;
}

}  // namespace

uint32_t SimConfigSpace::get(const std::array<uint8_t, cfg::kConfigSizeExtended>& bytes, uint16_t offset,
                             unsigned width) const {
    uint32_t v = 0;
    for (unsigned i = 0; i < width; ++i) v |= static_cast<uint32_t>(bytes[offset + i]) << (8 * i);
    return v;
}

void SimConfigSpace::put(uint16_t offset, unsigned width, uint32_t value, uint32_t writable_mask) {
    for (unsigned i = 0; i < width; ++i) {
        bytes_[offset + i] = static_cast<uint8_t>(value >> (8 * i));
        writable_[offset + i] = static_cast<uint8_t>(writable_mask >> (8 * i));
    }
}

SimConfigSpace::SimConfigSpace(const DeviceSpec& spec, const std::array<uint64_t, kBarCount>& bar_addresses) {
    const std::string device = fmt::format("sim model {:04x}:{:04x}", spec.identity.vendor_id, spec.identity.device_id);
    size_ = spec.pci_express ? cfg::kConfigSizeExtended : cfg::kConfigSizeLegacy;

    put(cfg::kVendorId, 2, spec.identity.vendor_id, 0);
    put(cfg::kDeviceId, 2, spec.identity.device_id, 0);
    // IO, memory, bus master, parity, SERR, INTx disable (PCI 3.0 6.2.2).
    put(cfg::kCommand, 2, 0, cfg::kCommandIo | cfg::kCommandMemory | cfg::kCommandMaster | 0x0040 | 0x0100 |
                                 cfg::kCommandIntxDisable);
    put(cfg::kStatus, 2, cfg::kStatusCapList, 0);
    put(cfg::kRevisionId, 1, spec.identity.revision, 0);
    put(cfg::kClassProgIf, 1, spec.identity.class_code & 0xff, 0);
    put(cfg::kClassDevice, 2, spec.identity.class_code >> 8, 0);
    put(0x0c, 1, 0, 0xff);  // cache line size
    put(0x0d, 1, 0, 0xff);  // latency timer
    put(cfg::kHeaderType, 1, cfg::kHeaderTypeNormal, 0);
    put(cfg::kSubsystemVendorId, 2, spec.identity.subsystem_vendor_id, 0);
    put(cfg::kSubsystemId, 2, spec.identity.subsystem_id, 0);
    put(cfg::kInterruptLine, 1, 0xff, 0xff);
    put(cfg::kInterruptPin, 1, 1, 0);  // INTA#

    for (const BarSpec& bar : spec.bars) {
        if (bar.index >= kBarCount || (bar.is_64bit && bar.index + 1 >= kBarCount) || bar.size < 16 ||
            !is_power_of_two(bar.size) || (!bar.is_64bit && bar.size > (uint64_t{1} << 31))) {
            throw Error(device, fmt::format("model describes an impossible BAR{} of 0x{:x} bytes", bar.index, bar.size));
        }
        uint16_t reg = static_cast<uint16_t>(cfg::kBar0 + 4 * bar.index);
        uint32_t type = (bar.is_64bit ? cfg::kBarMemType64 : cfg::kBarMemType32) |
                        (bar.prefetchable ? cfg::kBarMemPrefetch : 0);
        uint64_t address_mask = ~(bar.size - 1);
        uint64_t address = bar_addresses[bar.index] & address_mask;
        put(reg, 4, static_cast<uint32_t>(address) | type, static_cast<uint32_t>(address_mask) & cfg::kBarMemAddressMask);
        if (bar.is_64bit) put(static_cast<uint16_t>(reg + 4), 4, static_cast<uint32_t>(address >> 32),
                              static_cast<uint32_t>(address_mask >> 32));
    }

    // Capability list: PM -> MSI -> PCIe -> MSI-X, each present only when the spec asks.
    std::vector<uint16_t> chain = {kPmCap};
    put(kPmCap, 2, cfg::kCapPowerManagement, 0);
    put(kPmCap + 2, 2, 0x0003, 0);  // PMC: version 3
    put(kPmCap + 4, 2, 0, 0x0003);  // PMCSR: power state D0..D3hot
    if (spec.msi_vectors != 0) {
        if (spec.msi_vectors > 32 || !is_power_of_two(spec.msi_vectors)) {
            throw Error(device, fmt::format("MSI supports 1..32 vectors in powers of two, not {}", spec.msi_vectors));
        }
        msi_ = kMsiCap;
        chain.push_back(kMsiCap);
        put(kMsiCap, 2, cfg::kCapMsi, 0);
        uint16_t flags = static_cast<uint16_t>(cfg::kMsiFlags64Bit | (log2_exact(spec.msi_vectors) << 1));
        put(kMsiCap + cfg::kMsiFlags, 2, flags, cfg::kMsiFlagsEnable | cfg::kMsiFlagsMultipleEnableMask);
        put(kMsiCap + cfg::kMsiAddressLo, 4, 0, 0xfffffffc);
        put(kMsiCap + cfg::kMsiAddressHi, 4, 0, 0xffffffff);
        put(kMsiCap + cfg::kMsiData64, 2, 0, 0xffff);
    }
    if (spec.pci_express) {
        express_ = kExpressCap;
        chain.push_back(kExpressCap);
        put(kExpressCap, 2, cfg::kCapPciExpress, 0);
        put(kExpressCap + cfg::kExpFlags, 2, 0x0002, 0);  // version 2, PCI Express endpoint
        put(kExpressCap + cfg::kExpDevCap, 4, spec.function_level_reset ? cfg::kExpDevCapFlr : 0, 0);
        put(kExpressCap + cfg::kExpDevCtl, 2, 0x2810, 0x7fff);  // spec defaults: max read request 512 B, relaxed ordering
        put(kExpressCap + cfg::kExpLnkCap, 4, (16u << 4) | 4u, 0);  // x16, 16 GT/s
        put(kExpressCap + cfg::kExpLnkSta, 2, (16u << 4) | 4u, 0);
    } else if (spec.function_level_reset || !spec.extended_capabilities.empty()) {
        throw Error(device, "FLR and extended capabilities need a PCI Express function");
    }
    if (spec.msix.vectors != 0) {
        const MsixSpec& m = spec.msix;
        if (m.vectors > 2048 || m.table_offset % 8 != 0 || m.pba_offset % 8 != 0) {
            throw Error(device, "MSI-X table: at most 2048 vectors, table and PBA 8-byte aligned");
        }
        msix_ = kMsixCap;
        chain.push_back(kMsixCap);
        put(kMsixCap, 2, cfg::kCapMsix, 0);
        put(kMsixCap + cfg::kMsixFlags, 2, m.vectors - 1, cfg::kMsixFlagsEnable | cfg::kMsixFlagsMaskAll);
        put(kMsixCap + cfg::kMsixTable, 4, m.table_offset | m.table_bar, 0);
        put(kMsixCap + cfg::kMsixPba, 4, m.pba_offset | m.pba_bar, 0);
    }
    put(cfg::kCapabilityList, 1, chain.front(), 0);
    for (size_t i = 0; i < chain.size(); ++i) {
        bytes_[chain[i] + 1] = i + 1 < chain.size() ? static_cast<uint8_t>(chain[i + 1]) : 0;
    }

    uint16_t pos = cfg::kExtCapabilityListStart;
    for (size_t i = 0; i < spec.extended_capabilities.size(); ++i) {
        const ExtendedCapabilitySpec& ext = spec.extended_capabilities[i];
        size_t length = 4 + ext.body.size();
        uint16_t next = static_cast<uint16_t>((pos + length + 3) & ~size_t{3});
        if (next > cfg::kConfigSizeExtended) throw Error(device, "extended capabilities do not fit in 4 KiB");
        bool last = i + 1 == spec.extended_capabilities.size();
        put(pos, 4, ext.id | (uint32_t{ext.version} << 16) | (last ? 0u : uint32_t{next} << 20), 0);
        for (size_t b = 0; b < ext.body.size(); ++b) {
            bytes_[pos + 4 + b] = ext.body[b];
            writable_[pos + 4 + b] = b < ext.writable.size() ? ext.writable[b] : 0;
        }
        pos = next;
    }
    power_on_ = bytes_;
    // Power-on BARs hold no address: firmware assigns them. We keep the assigned addresses in
    // bytes_ (firmware has run), but an FLR returns to zeroed BAR address bits.
    for (unsigned i = 0; i < kBarCount; ++i) {
        uint16_t reg = static_cast<uint16_t>(cfg::kBar0 + 4 * i);
        for (unsigned b = 0; b < 4; ++b) power_on_[reg + b] &= static_cast<uint8_t>(~writable_[reg + b]);
    }
}

uint32_t SimConfigSpace::read(uint16_t offset, unsigned width) const { return get(bytes_, offset, width); }

SimConfigSpace::WriteEffects SimConfigSpace::write(uint16_t offset, unsigned width, uint32_t value) {
    WriteEffects effects;
    auto touches = [&](std::optional<uint16_t> cap, unsigned length) {
        return cap && offset < *cap + length && offset + width > *cap;
    };
    if (express_) {
        unsigned flr_byte = *express_ + cfg::kExpDevCtl + 1u;  // DevCtl bit 15: Initiate FLR, always reads 0
        if (offset <= flr_byte && offset + width > flr_byte) {
            uint8_t high = static_cast<uint8_t>(value >> (8 * (flr_byte - offset)));
            if (high & 0x80) effects.function_level_reset = true;
        }
    }
    effects.interrupts_changed = touches(msi_, 14) || touches(msix_, 4);
    for (unsigned i = 0; i < width; ++i) {
        uint8_t mask = writable_[offset + i];
        uint8_t byte = static_cast<uint8_t>(value >> (8 * i));
        bytes_[offset + i] = static_cast<uint8_t>((bytes_[offset + i] & ~mask) | (byte & mask));
    }
    return effects;
}

void SimConfigSpace::reset() { bytes_ = power_on_; }

SimConfigSpace::MsiState SimConfigSpace::msi() const {
    MsiState state;
    if (!msi_) return state;
    uint16_t flags = static_cast<uint16_t>(read(*msi_ + cfg::kMsiFlags, 2));
    state.enabled = (flags & cfg::kMsiFlagsEnable) != 0;
    unsigned capable = (flags & cfg::kMsiFlagsMultipleCapableMask) >> 1;
    unsigned enabled = (flags & cfg::kMsiFlagsMultipleEnableMask) >> 4;
    // Enabling more than capable is undefined; the device uses at most what it supports.
    state.vectors = 1u << std::min(capable, enabled);
    state.address = read(*msi_ + cfg::kMsiAddressLo, 4) | (uint64_t{read(*msi_ + cfg::kMsiAddressHi, 4)} << 32);
    state.data = static_cast<uint16_t>(read(*msi_ + cfg::kMsiData64, 2));
    return state;
}

bool SimConfigSpace::msix_enabled() const {
    return msix_ && (read(*msix_ + cfg::kMsixFlags, 2) & cfg::kMsixFlagsEnable) != 0;
}

bool SimConfigSpace::msix_function_masked() const {
    return msix_ && (read(*msix_ + cfg::kMsixFlags, 2) & cfg::kMsixFlagsMaskAll) != 0;
}

}  // namespace baregpu::pci::sim
