// Config space of real GPUs: public `lspci -xxx`/`-xxxx` dumps (tests/pci/dumps, each citing its
// source) parsed with ConfigSpaceImage::from_lspci_dump. Checks identity, class, header type, the
// capability lists in order (cross-checked against the `lspci -vv` lines of the same source that
// each dump carries in its header), extended capabilities (Resizable BAR, AER), and the BAR
// registers' type bits (a dump holds no sizes).
#include "base/error.hpp"
#include "drivers/pci/config_space.hpp"
#include "drivers/pci/resizable_bar.hpp"

#include <catch2/catch.hpp>
#include <array>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace dump_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

#ifndef BAREGPU_DUMP_DIR
#error "BAREGPU_DUMP_DIR must name tests/pci/dumps (set in tests/pci/meson.build)"
#endif

using namespace baregpu;
using namespace baregpu::pci;

namespace {

constexpr const char* kNavi10 = "amd_navi10_rx5600xt_1002-731f.txt";
constexpr const char* kFiji = "amd_fiji_r9fury_1002-7300.txt";
constexpr const char* kGp108 = "nvidia_gp108m_mx150_10de-1d10.txt";
constexpr const char* kGp107 = "nvidia_gp107gl_quadrop1000_10de-1cb1.txt";
constexpr std::array<const char*, 4> kAllDumps{kNavi10, kFiji, kGp108, kGp107};

constexpr uint64_t MiB = uint64_t{1} << 20;
constexpr uint64_t GiB = uint64_t{1} << 30;

std::string read_text(const std::string& name) {
    std::ifstream in(std::string(BAREGPU_DUMP_DIR) + "/" + name);
    REQUIRE(in.good());
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

ConfigSpaceImage load(const std::string& name) { return ConfigSpaceImage::from_lspci_dump(name, read_text(name)); }

using IdOffset = std::pair<uint16_t, uint16_t>;

std::vector<IdOffset> standard(ConfigSpace& c) {
    std::vector<IdOffset> out;
    for (const Capability& cap : c.capabilities()) out.emplace_back(cap.id, cap.offset);
    return out;
}

struct Ext {
    uint16_t id;
    uint16_t offset;
    uint8_t version;
    bool operator==(const Ext&) const = default;
};

std::vector<Ext> extended(ConfigSpace& c) {
    std::vector<Ext> out;
    for (const Capability& cap : c.extended_capabilities()) out.push_back({cap.id, cap.offset, cap.version});
    return out;
}

// The "Capabilities: [off]" / "[off vN]" lines lspci printed for the same device, in order, as
// the dump's header quotes them ("# lspci-vv: Capabilities: [150 v2] Advanced Error Reporting").
struct LspciCapability {
    uint16_t offset;
    std::optional<uint8_t> version;
};

std::vector<LspciCapability> lspci_capabilities(const std::string& text) {
    std::vector<LspciCapability> out;
    static const std::regex line(R"(^# lspci-vv: Capabilities: \[([0-9a-f]+)(?: v([0-9]+))?\])");
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
        std::smatch m;
        if (!std::regex_search(l, m, line)) continue;
        LspciCapability cap{static_cast<uint16_t>(std::stoul(m[1].str(), nullptr, 16)), std::nullopt};
        if (m[2].matched) cap.version = static_cast<uint8_t>(std::stoul(m[2].str()));
        out.push_back(cap);
    }
    return out;
}

// BAR registers decoded from their low bits only (PCI Local Bus Specification 3.0, 6.2.5.1).
struct BarRegister {
    unsigned index = 0;
    bool io = false;
    bool is_64bit = false;
    bool prefetchable = false;
    uint64_t base = 0;
    bool operator==(const BarRegister&) const = default;
};

std::ostream& operator<<(std::ostream& os, const BarRegister& b) {
    return os << "BAR" << b.index << (b.io ? " io" : b.is_64bit ? " mem64" : " mem32") << (b.prefetchable ? " pref" : "")
              << " @0x" << std::hex << b.base << std::dec;
}

std::vector<BarRegister> bar_registers(ConfigSpace& c) {
    std::vector<BarRegister> out;
    for (unsigned i = 0; i < 6; ++i) {
        uint32_t lo = c.config_read32(static_cast<uint16_t>(cfg::kBar0 + 4 * i));
        if (lo == 0) continue;
        BarRegister b;
        b.index = i;
        if (lo & cfg::kBarSpaceIo) {
            b.io = true;
            b.base = lo & cfg::kBarIoAddressMask;
        } else {
            b.is_64bit = (lo & cfg::kBarMemTypeMask) == cfg::kBarMemType64;
            b.prefetchable = (lo & cfg::kBarMemPrefetch) != 0;
            b.base = lo & cfg::kBarMemAddressMask;
            if (b.is_64bit) {
                REQUIRE(i < 5);
                b.base |= uint64_t{c.config_read32(static_cast<uint16_t>(cfg::kBar0 + 4 * (i + 1)))} << 32;
                ++i;  // the upper half is not a BAR of its own
            }
        }
        out.push_back(b);
    }
    return out;
}

struct Identity {
    uint16_t vendor, device;
    uint8_t revision;
    uint32_t class_code;
    uint8_t header_type;
    uint16_t subsystem_vendor, subsystem;
};

void check_identity(ConfigSpace& c, const Identity& want) {
    CHECK(c.config_read16(cfg::kVendorId) == want.vendor);
    CHECK(c.config_read16(cfg::kDeviceId) == want.device);
    CHECK(c.config_read8(cfg::kRevisionId) == want.revision);
    uint32_t class_code = (uint32_t{c.config_read16(cfg::kClassDevice)} << 8) | c.config_read8(cfg::kClassProgIf);
    CHECK(class_code == want.class_code);
    CHECK(c.config_read8(cfg::kHeaderType) == want.header_type);
    CHECK((c.config_read8(cfg::kHeaderType) & cfg::kHeaderTypeMask) == cfg::kHeaderTypeNormal);
    CHECK(c.config_read16(cfg::kSubsystemVendorId) == want.subsystem_vendor);
    CHECK(c.config_read16(cfg::kSubsystemId) == want.subsystem);
}

// PCI Express Capabilities register: version in bits 3:0, device/port type in bits 7:4
// (0 Endpoint, 1 Legacy Endpoint; pci_regs.h PCI_EXP_FLAGS_*).
std::pair<unsigned, unsigned> express_version_and_type(ConfigSpace& c) {
    std::optional<uint16_t> exp = c.find_capability(cfg::kCapPciExpress);
    REQUIRE(exp);
    uint16_t flags = c.config_read16(static_cast<uint16_t>(*exp + cfg::kExpFlags));
    return {flags & 0xfu, (flags >> 4) & 0xfu};
}

}  // namespace

TEST_CASE("every dump's capability lists match the lspci -vv lines of its source") {
    for (const char* name : kAllDumps) {
        INFO("dump " << name);
        std::string text = read_text(name);
        ConfigSpaceImage c = ConfigSpaceImage::from_lspci_dump(name, text);
        std::vector<LspciCapability> want = lspci_capabilities(text);
        REQUIRE(want.size() >= 3);  // the header does quote lspci

        std::vector<LspciCapability> got;
        for (const Capability& cap : c.capabilities()) got.push_back({cap.offset, std::nullopt});
        for (const Capability& cap : c.extended_capabilities()) got.push_back({cap.offset, cap.version});
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < want.size(); ++i) {
            INFO("capability #" << i);
            CHECK(got[i].offset == want[i].offset);
            if (want[i].version) CHECK(got[i].version == want[i].version);
        }
    }
}

TEST_CASE("AMD Navi10 (RX 5600 XT, 4 KiB dump): identity, capabilities, Resizable BAR, AER, BARs") {
    ConfigSpaceImage c = load(kNavi10);
    REQUIRE(c.config_size() == cfg::kConfigSizeExtended);
    check_identity(c, {0x1002, 0x731f, 0xca, 0x030000, 0x80, 0x1da2, 0xe416});
    CHECK(c.config_read16(cfg::kCommand) == 0x0407);  // I/O, memory, bus master, INTx disabled

    CHECK(standard(c) == std::vector<IdOffset>{{cfg::kCapVendor, 0x48},
                                               {cfg::kCapPowerManagement, 0x50},
                                               {cfg::kCapPciExpress, 0x64},
                                               {cfg::kCapMsi, 0xa0}});
    CHECK(express_version_and_type(c) == std::pair<unsigned, unsigned>{2, 1});  // v2 Legacy Endpoint
    uint16_t msi_flags = c.config_read16(0xa0 + cfg::kMsiFlags);
    CHECK((msi_flags & cfg::kMsiFlagsEnable) != 0);
    CHECK((msi_flags & cfg::kMsiFlags64Bit) != 0);

    CHECK(extended(c) == std::vector<Ext>{{cfg::kExtCapVendor, 0x100, 1},
                                          {cfg::kExtCapAer, 0x150, 2},
                                          {cfg::kExtCapResizableBar, 0x200, 1},
                                          {cfg::kExtCapPowerBudget, 0x240, 1},
                                          {cfg::kExtCapSecondaryPcie, 0x270, 1},
                                          {cfg::kExtCapAcs, 0x2a0, 1},
                                          {cfg::kExtCapAts, 0x2b0, 1},
                                          {0x0013, 0x2c0, 1},  // Page Request Interface
                                          {cfg::kExtCapPasid, 0x2d0, 1},
                                          {cfg::kExtCapLtr, 0x320, 1},
                                          {cfg::kExtCapDataLinkFeature, 0x400, 1},
                                          {cfg::kExtCapPhysicalLayer16, 0x410, 1},
                                          {0x0027, 0x440, 1}});  // Lane Margining at the Receiver
    CHECK(extended_capability_name(0x0027) == "Lane Margining at the Receiver");
    CHECK(c.find_extended_capability(cfg::kExtCapAer) == 0x150);

    // The thread this dump comes from is about exactly this: BAR0 advertises 256 MiB..1 GiB but
    // was forced to 8 GiB; BAR2 (the doorbell BAR) is 256 MiB out of 2..256 MiB.
    std::vector<ResizableBar> rebar = read_resizable_bars(c);
    REQUIRE(rebar.size() == 2);
    CHECK(rebar[0].bar == 0);
    CHECK(rebar[0].current_size == 8 * GiB);
    CHECK(rebar[0].supported_sizes == std::vector<uint64_t>{256 * MiB, 512 * MiB, 1 * GiB});
    CHECK(rebar[1].bar == 2);
    CHECK(rebar[1].current_size == 256 * MiB);
    CHECK(rebar[1].supported_sizes ==
          std::vector<uint64_t>{2 * MiB, 4 * MiB, 8 * MiB, 16 * MiB, 32 * MiB, 64 * MiB, 128 * MiB, 256 * MiB});

    // lspci: Memory at 600000000 (64-bit, prefetchable), Memory at 500000000 (64-bit, prefetchable),
    // I/O ports at e000, Memory at fcb00000 (32-bit, non-prefetchable).
    CHECK(bar_registers(c) == std::vector<BarRegister>{{0, false, true, true, 0x600000000},
                                                       {2, false, true, true, 0x500000000},
                                                       {4, true, false, false, 0xe000},
                                                       {5, false, false, false, 0xfcb00000}});
}

TEST_CASE("AMD Fiji (R9 Fury, 4 KiB dump): an unlinked capability stays out of the list") {
    ConfigSpaceImage c = load(kFiji);
    check_identity(c, {0x1002, 0x7300, 0xca, 0x030000, 0x80, 0x1002, 0x0b36});
    CHECK(standard(c) == std::vector<IdOffset>{{cfg::kCapVendor, 0x48},
                                               {cfg::kCapPowerManagement, 0x50},
                                               {cfg::kCapPciExpress, 0x58},
                                               {cfg::kCapMsi, 0xa0}});
    // 0x2d0 PASID's next pointer is 0x328 (not 16-byte aligned); 0x400 holds a vendor-specific
    // header that nothing links to, so it is not a capability.
    CHECK(extended(c) == std::vector<Ext>{{cfg::kExtCapVendor, 0x100, 1},
                                          {cfg::kExtCapAer, 0x150, 2},
                                          {cfg::kExtCapResizableBar, 0x200, 1},
                                          {cfg::kExtCapSecondaryPcie, 0x270, 1},
                                          {cfg::kExtCapAts, 0x2b0, 1},
                                          {0x0013, 0x2c0, 1},
                                          {cfg::kExtCapPasid, 0x2d0, 1},
                                          {cfg::kExtCapAri, 0x328, 1}});
    CHECK(c.config_read32(0x400) == 0x0001000b);  // it is there, just not linked

    std::vector<ResizableBar> rebar = read_resizable_bars(c);
    REQUIRE(rebar.size() == 1);
    CHECK(rebar[0].bar == 0);
    CHECK(rebar[0].current_size == 256 * MiB);
    CHECK(rebar[0].supported_sizes == std::vector<uint64_t>{256 * MiB, 512 * MiB, 1 * GiB, 2 * GiB, 4 * GiB});

    CHECK(bar_registers(c) == std::vector<BarRegister>{{0, false, true, true, 0xe0000000},
                                                       {2, false, true, true, 0xf0000000},
                                                       {4, true, false, false, 0xe000},
                                                       {5, false, false, false, 0xfe800000}});
}

TEST_CASE("NVIDIA GP108M (MX150, 4 KiB dump): extended list out of address order, no Resizable BAR") {
    ConfigSpaceImage c = load(kGp108);
    check_identity(c, {0x10de, 0x1d10, 0xa1, 0x030200, 0x00, 0x17aa, 0x225b});
    // The PCIe capability ends the list: the vendor-specific header at 0xb4 is not linked.
    CHECK(standard(c) == std::vector<IdOffset>{{cfg::kCapPowerManagement, 0x60},
                                               {cfg::kCapMsi, 0x68},
                                               {cfg::kCapPciExpress, 0x78}});
    CHECK(express_version_and_type(c) == std::pair<unsigned, unsigned>{2, 0});  // v2 Endpoint
    CHECK(extended(c) == std::vector<Ext>{{cfg::kExtCapVirtualChannel, 0x100, 1},
                                          {cfg::kExtCapLtr, 0x250, 1},
                                          {cfg::kExtCapL1Substates, 0x258, 1},
                                          {cfg::kExtCapPowerBudget, 0x128, 1},  // the chain goes back down
                                          {cfg::kExtCapAer, 0x420, 2},
                                          {cfg::kExtCapVendor, 0x600, 1},
                                          {cfg::kExtCapSecondaryPcie, 0x900, 1}});
    CHECK(read_resizable_bars(c).empty());

    // AER registers (pci_regs.h PCI_ERR_*), against the source's decode:
    //   UESvrt: DLP+ SDES+ TLP- FCP+ CmpltTO- CmpltAbrt- UnxCmplt- RxOF+ MalfTLP+ ECRC- UnsupReq- ACSViol-
    //   CEMsk:  RxErr- BadTLP- BadDLLP- Rollover- Timeout- AdvNonFatalErr+
    constexpr uint16_t kAerUncorrectableSeverity = 0x0c;  // PCI_ERR_UNCOR_SEVER
    constexpr uint16_t kAerCorrectableMask = 0x14;  // PCI_ERR_COR_MASK
    auto bit = [](unsigned n) { return uint32_t{1} << n; };
    uint32_t severity = c.config_read32(0x420 + kAerUncorrectableSeverity);
    uint32_t fatal = bit(4) | bit(5) | bit(13) | bit(17) | bit(18);  // DLP SDES FCP RxOF MalfTLP
    uint32_t not_fatal = bit(12) | bit(14) | bit(15) | bit(16) | bit(19) | bit(20) | bit(21);  // TLP..ACSViol
    CHECK((severity & fatal) == fatal);
    CHECK((severity & not_fatal) == 0);
    uint32_t masked = c.config_read32(0x420 + kAerCorrectableMask);
    CHECK((masked & bit(13)) != 0);  // Advisory Non-Fatal Error masked
    CHECK((masked & (bit(0) | bit(6) | bit(7) | bit(8) | bit(12))) == 0);  // RxErr BadTLP BadDLLP Rollover Timeout

    // DevCap: no function-level reset on this part (lspci: FLReset-).
    CHECK((c.config_read32(0x78 + cfg::kExpDevCap) & cfg::kExpDevCapFlr) == 0);

    CHECK(bar_registers(c) == std::vector<BarRegister>{{0, false, false, false, 0xe8000000},
                                                       {1, false, true, true, 0x70000000},
                                                       {3, false, true, true, 0x80000000},
                                                       {5, true, false, false, 0xd000}});
}

TEST_CASE("NVIDIA GP107GL (Quadro P1000 on vfio-pci, 256-byte dump): MSI programmed, no extended space") {
    ConfigSpaceImage c = load(kGp107);
    REQUIRE(c.config_size() == cfg::kConfigSizeLegacy);
    check_identity(c, {0x10de, 0x1cb1, 0xa1, 0x030000, 0x80, 0x103c, 0x11bc});
    CHECK(c.config_read16(cfg::kCommand) == 0x0107);  // I/O+ Mem+ BusMaster+ SERR+
    CHECK(standard(c) == std::vector<IdOffset>{{cfg::kCapPowerManagement, 0x60},
                                               {cfg::kCapMsi, 0x68},
                                               {cfg::kCapPciExpress, 0x78}});
    CHECK(express_version_and_type(c) == std::pair<unsigned, unsigned>{2, 1});  // v2 Legacy Endpoint
    uint16_t msi_flags = c.config_read16(0x68 + cfg::kMsiFlags);
    CHECK((msi_flags & cfg::kMsiFlagsEnable) != 0);
    CHECK((msi_flags & cfg::kMsiFlags64Bit) != 0);
    CHECK(c.config_read32(0x68 + cfg::kMsiAddressLo) == 0xfee00a78);  // lspci: Address 00000000fee00a78
    CHECK(c.config_read32(0x68 + cfg::kMsiAddressHi) == 0);
    CHECK(extended(c).empty());
    CHECK_FALSE(c.find_extended_capability(cfg::kExtCapAer).has_value());
    CHECK(read_resizable_bars(c).empty());

    CHECK(bar_registers(c) == std::vector<BarRegister>{{0, false, false, false, 0xfa000000},
                                                       {1, false, true, true, 0x383fe0000000},
                                                       {3, false, true, true, 0x383ff0000000},
                                                       {5, true, false, false, 0xe000}});
}

TEST_CASE("a real dump broken on purpose is rejected with a message that says where") {
    std::string text = read_text(kGp108);
    SECTION("a missing row") {
        size_t row = text.find("\n150: ");
        REQUIRE(row != std::string::npos);
        std::string broken = text.substr(0, row) + text.substr(text.find('\n', row + 1));
        CHECK_THROWS_AS(ConfigSpaceImage::from_lspci_dump(kGp108, broken), ProtocolError);
        CHECK_THROWS_WITH(ConfigSpaceImage::from_lspci_dump(kGp108, broken), Catch::Contains("0x150"));
    }
    SECTION("a capability list that loops") {
        ConfigSpaceImage c = load(kGp108);
        c.config_write8(0x79, 0x60);  // PCI Express's next pointer back to Power Management
        CHECK_THROWS_WITH(c.capabilities(), Catch::Contains("loops back to offset 0x60"));
    }
    SECTION("an extended list that loops") {
        ConfigSpaceImage c = load(kGp108);
        c.config_write32(0x900, 0x10010019);  // Secondary PCIe -> 0x100 again
        CHECK_THROWS_WITH(c.extended_capabilities(), Catch::Contains("loops back to offset 0x100"));
    }
    SECTION("a Resizable BAR capability that claims seven BARs") {
        ConfigSpaceImage c = load(kNavi10);
        c.config_write32(0x208, (c.config_read32(0x208) & ~rebar::kCtrlBarCountMask) | (7u << rebar::kCtrlBarCountShift));
        CHECK_THROWS_AS(read_resizable_bars(c), ProtocolError);
        CHECK_THROWS_WITH(read_resizable_bars(c), Catch::Contains("says 7 resizable BARs"));
    }
}

}  // namespace dump_test
