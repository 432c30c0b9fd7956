// PCI configuration space: register offsets, the capability walk, and a config-space image
// (a byte copy of a function's config space, e.g. from an `lspci -xxx` dump).
//
// Offsets, bits and capability IDs are those of the PCI Local Bus Specification 3.0 and the
// PCI Express Base Specification, as named in Linux include/uapi/linux/pci_regs.h.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::pci {

namespace cfg {
// Type 0 header (pci_regs.h PCI_*)
inline constexpr uint16_t kVendorId = 0x00;
inline constexpr uint16_t kDeviceId = 0x02;
inline constexpr uint16_t kCommand = 0x04;
inline constexpr uint16_t kStatus = 0x06;
inline constexpr uint16_t kRevisionId = 0x08;
inline constexpr uint16_t kClassProgIf = 0x09;
inline constexpr uint16_t kClassDevice = 0x0a;  // base class << 8 | sub class
inline constexpr uint16_t kHeaderType = 0x0e;
inline constexpr uint16_t kBar0 = 0x10;  // six 32-bit BARs, 0x10..0x24
inline constexpr uint16_t kSubsystemVendorId = 0x2c;
inline constexpr uint16_t kSubsystemId = 0x2e;
inline constexpr uint16_t kRomAddress = 0x30;
inline constexpr uint16_t kCapabilityList = 0x34;
inline constexpr uint16_t kInterruptLine = 0x3c;
inline constexpr uint16_t kInterruptPin = 0x3d;

inline constexpr uint16_t kCommandIo = 0x0001;
inline constexpr uint16_t kCommandMemory = 0x0002;
inline constexpr uint16_t kCommandMaster = 0x0004;  // bus master enable: the device may DMA
inline constexpr uint16_t kCommandIntxDisable = 0x0400;
inline constexpr uint16_t kStatusCapList = 0x0010;
inline constexpr uint8_t kHeaderTypeMask = 0x7f;
inline constexpr uint8_t kHeaderTypeNormal = 0x00;

// BAR low bits (PCI_BASE_ADDRESS_*)
inline constexpr uint32_t kBarSpaceIo = 0x01;
inline constexpr uint32_t kBarMemTypeMask = 0x06;
inline constexpr uint32_t kBarMemType32 = 0x00;
inline constexpr uint32_t kBarMemType64 = 0x04;
inline constexpr uint32_t kBarMemPrefetch = 0x08;
inline constexpr uint32_t kBarMemAddressMask = ~0x0fu;
inline constexpr uint32_t kBarIoAddressMask = ~0x03u;

// Standard capability IDs (PCI_CAP_ID_*); the list lives in 0x40..0xff.
inline constexpr uint8_t kCapPowerManagement = 0x01;
inline constexpr uint8_t kCapMsi = 0x05;
inline constexpr uint8_t kCapVendor = 0x09;
inline constexpr uint8_t kCapPciExpress = 0x10;
inline constexpr uint8_t kCapMsix = 0x11;

// Extended capability IDs (PCI_EXT_CAP_ID_*); the list starts at 0x100.
inline constexpr uint16_t kExtCapAer = 0x0001;
inline constexpr uint16_t kExtCapVirtualChannel = 0x0002;
inline constexpr uint16_t kExtCapSerialNumber = 0x0003;
inline constexpr uint16_t kExtCapPowerBudget = 0x0004;
inline constexpr uint16_t kExtCapVendor = 0x000b;
inline constexpr uint16_t kExtCapAcs = 0x000d;
inline constexpr uint16_t kExtCapAri = 0x000e;
inline constexpr uint16_t kExtCapAts = 0x000f;
inline constexpr uint16_t kExtCapSriov = 0x0010;
inline constexpr uint16_t kExtCapResizableBar = 0x0015;
inline constexpr uint16_t kExtCapLtr = 0x0018;
inline constexpr uint16_t kExtCapSecondaryPcie = 0x0019;
inline constexpr uint16_t kExtCapPasid = 0x001b;
inline constexpr uint16_t kExtCapL1Substates = 0x001e;
inline constexpr uint16_t kExtCapDataLinkFeature = 0x0025;
inline constexpr uint16_t kExtCapPhysicalLayer16 = 0x0026;

inline constexpr uint16_t kConfigSizeLegacy = 256;
inline constexpr uint16_t kConfigSizeExtended = 4096;
inline constexpr uint16_t kCapabilityListStart = 0x40;
inline constexpr uint16_t kExtCapabilityListStart = 0x100;

// PCI Express capability (PCI_EXP_*), offsets from the capability.
inline constexpr uint16_t kExpFlags = 0x02;
inline constexpr uint16_t kExpDevCap = 0x04;
inline constexpr uint32_t kExpDevCapFlr = 0x10000000;  // function-level reset supported
inline constexpr uint16_t kExpDevCtl = 0x08;
inline constexpr uint16_t kExpDevCtlInitiateFlr = 0x8000;
inline constexpr uint16_t kExpDevSta = 0x0a;
inline constexpr uint16_t kExpDevStaTransactionsPending = 0x0020;
inline constexpr uint16_t kExpLnkCap = 0x0c;
inline constexpr uint16_t kExpLnkSta = 0x12;

// MSI capability (PCI_MSI_*), offsets from the capability.
inline constexpr uint16_t kMsiFlags = 0x02;
inline constexpr uint16_t kMsiFlagsEnable = 0x0001;
inline constexpr uint16_t kMsiFlagsMultipleCapableMask = 0x000e;  // log2 of vectors supported, << 1
inline constexpr uint16_t kMsiFlagsMultipleEnableMask = 0x0070;  // log2 of vectors enabled, << 4
inline constexpr uint16_t kMsiFlags64Bit = 0x0080;
inline constexpr uint16_t kMsiFlagsMaskBit = 0x0100;  // per-vector masking capable
inline constexpr uint16_t kMsiAddressLo = 0x04;
inline constexpr uint16_t kMsiAddressHi = 0x08;  // 64-bit capable only
inline constexpr uint16_t kMsiData32 = 0x08;
inline constexpr uint16_t kMsiData64 = 0x0c;

// MSI-X capability (PCI_MSIX_*), offsets from the capability; table entries in a BAR.
inline constexpr uint16_t kMsixFlags = 0x02;
inline constexpr uint16_t kMsixFlagsTableSizeMask = 0x07ff;  // table size - 1
inline constexpr uint16_t kMsixFlagsMaskAll = 0x4000;
inline constexpr uint16_t kMsixFlagsEnable = 0x8000;
inline constexpr uint16_t kMsixTable = 0x04;  // BIR in bits 2:0, offset in the rest
inline constexpr uint16_t kMsixPba = 0x08;
inline constexpr uint32_t kMsixBirMask = 0x7;
inline constexpr uint32_t kMsixEntrySize = 16;
inline constexpr uint32_t kMsixEntryAddressLo = 0x0;
inline constexpr uint32_t kMsixEntryAddressHi = 0x4;
inline constexpr uint32_t kMsixEntryData = 0x8;
inline constexpr uint32_t kMsixEntryVectorControl = 0xc;
inline constexpr uint32_t kMsixEntryMasked = 0x1;
}  // namespace cfg

struct Capability {
    uint16_t id = 0;  // 8-bit for standard capabilities, 16-bit for extended ones
    uint8_t version = 0;  // extended capabilities only
    uint16_t offset = 0;  // where its header sits in config space
};

// Anything whose config space can be read and written: a real function (PciDevice), a
// simulated one, or an image of a dump. Reads and writes are 1, 2 or 4 bytes wide and
// naturally aligned, as on the bus.
class ConfigSpace {
public:
    virtual ~ConfigSpace() = default;

    // Name used in error messages ("0000:03:00.0", "dump navi31.txt").
    virtual std::string config_name() const = 0;
    // 256 for conventional PCI, 4096 when extended config space is reachable.
    virtual uint16_t config_size() const = 0;
    virtual uint32_t config_read(uint16_t offset, unsigned width) = 0;
    virtual void config_write(uint16_t offset, unsigned width, uint32_t value) = 0;

    uint8_t config_read8(uint16_t offset) { return static_cast<uint8_t>(config_read(offset, 1)); }
    uint16_t config_read16(uint16_t offset) { return static_cast<uint16_t>(config_read(offset, 2)); }
    uint32_t config_read32(uint16_t offset) { return config_read(offset, 4); }
    void config_write8(uint16_t offset, uint8_t v) { config_write(offset, 1, v); }
    void config_write16(uint16_t offset, uint16_t v) { config_write(offset, 2, v); }
    void config_write32(uint16_t offset, uint32_t v) { config_write(offset, 4, v); }

    // The standard capability list, in list order. Follows the rules of Linux's
    // pci_find_next_cap: pointers have their low two bits masked, a pointer below 0x40 ends the
    // list. A list that loops is a ProtocolError naming the offset; an all-ones header is a
    // DeviceLostError (the function is gone).
    std::vector<Capability> capabilities();
    // The extended list (config_size() == 4096 only; empty otherwise), same rules, from 0x100.
    std::vector<Capability> extended_capabilities();

    std::optional<uint16_t> find_capability(uint8_t id);
    std::optional<uint16_t> find_extended_capability(uint16_t id);

protected:
    void check_config_access(uint16_t offset, unsigned width) const;
};

// A config space held in memory. Writes change the bytes (no register semantics).
class ConfigSpaceImage : public ConfigSpace {
public:
    ConfigSpaceImage(std::string name, std::vector<uint8_t> bytes);

    // Parses the hex dump that `lspci -xxx` (256 bytes) or `lspci -xxxx` (4096 bytes) prints:
    // lines "OO: hh hh ... hh" (16 bytes each); the "BB:DD.F Description" header line is
    // skipped. Throws ProtocolError naming the line on malformed input or a short dump.
    static ConfigSpaceImage from_lspci_dump(std::string name, std::string_view text);

    std::string config_name() const override { return name_; }
    uint16_t config_size() const override { return static_cast<uint16_t>(bytes_.size()); }
    uint32_t config_read(uint16_t offset, unsigned width) override;
    void config_write(uint16_t offset, unsigned width, uint32_t value) override;

    std::span<const uint8_t> bytes() const { return bytes_; }

private:
    std::string name_;
    std::vector<uint8_t> bytes_;
};

// Human names for capability IDs, for `baregpu devices` and error messages ("MSI-X").
std::string_view capability_name(uint8_t id);
std::string_view extended_capability_name(uint16_t id);

}  // namespace baregpu::pci
