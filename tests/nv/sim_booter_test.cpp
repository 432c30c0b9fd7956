// The simulated booter's GspFwWprMeta checks (drivers/sim/nvgpu/booter) on metadata the driver's
// encoder (drivers/nv/wpr_meta) produces, then mutated one field at a time: each mutation must be
// refused with a violation naming it. A fake SimPort serves "host memory" from a map.
#include "drivers/nv/wpr_meta.hpp"
#include "drivers/sim/nvgpu/booter.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <map>

namespace sim_booter_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;

namespace {

struct FakePort : pci::sim::SimPort {
    std::map<uint64_t, std::vector<std::byte>> pages;  // 4 KiB pages by bus address
    std::string name = "fake";
    void put(uint64_t addr, std::span<const std::byte> data) {
        for (size_t i = 0; i < data.size(); ++i) {
            auto& p = pages[(addr + i) & ~uint64_t{0xfff}];
            p.resize(0x1000);
            p[(addr + i) & 0xfff] = data[i];
        }
    }
    void put64(uint64_t addr, uint64_t v) { put(addr, std::as_bytes(std::span(&v, 1))); }
    bool dma_read(BusAddress a, std::span<std::byte> out) override {
        for (size_t i = 0; i < out.size(); ++i) {
            auto it = pages.find((a.value() + i) & ~uint64_t{0xfff});
            if (it == pages.end()) return false;
            out[i] = it->second[(a.value() + i) & 0xfff];
        }
        return true;
    }
    bool dma_write(BusAddress, std::span<const std::byte>) override { return false; }
    std::byte* dma_host_memory(BusAddress, uint64_t) override { return nullptr; }
    void raise_interrupt(unsigned) override {}
    bool bus_master_enabled() override { return true; }
    std::span<std::byte> bar_memory(unsigned) override { return {}; }
    void violation(const std::string&, const std::string&, const std::string&) override {}
    uint64_t now_ns() const override { return 0; }
    void spend_ns(uint64_t) override {}
    const std::string& device_name() const override { return name; }
};

constexpr uint64_t kFb = uint64_t{512} << 20, kMeta = 0x10000, kRadix = 0x20000, kBl = 0x30000, kSig = 0x40000;

nv::GspFwWprMeta good_meta() {
    nv::GspFwWprMeta m;
    m.sysmemAddrOfRadix3Elf = kRadix;
    m.sysmemAddrOfBootloader = kBl;
    m.bootloaderCodeOffset = 0x100, m.bootloaderDataOffset = 0x200, m.bootloaderManifestOffset = 0x300;
    m.sysmemAddrOfSignature = kSig, m.sizeOfSignature = 0x1000;
    nv::layout_ada(m, kFb, 0x9000, 0x3000);
    return m;
}

std::vector<std::string> check(nv::GspFwWprMeta m) {
    FakePort port;
    const auto e = m.encode();
    port.put(kMeta, e);
    port.put64(kRadix, kRadix + 0x1000);  // level 0 -> level 1 -> level 2 -> data
    port.put64(kRadix + 0x1000, kRadix + 0x2000);
    port.put64(kRadix + 0x2000, kRadix + 0x3000);
    port.put(kRadix + 0x3000, std::as_bytes(std::span("\x7f" "ELF", 4)));
    port.put64(kBl, 1);
    port.put64(kSig, 1);
    std::vector<std::string> v;
    const auto verdict = sim::nvgpu::check_wpr_meta(port, kMeta, kFb - (2u << 20), kFb,
                                                    [&](const std::string& w, const std::string&, const std::string&) {
                                                        v.push_back(w);
                                                    });
    if (verdict.ok) CHECK(v.empty());
    else CHECK_FALSE(v.empty());
    return v;
}

bool any_contains(const std::vector<std::string>& v, const std::string& s) {
    for (const auto& x : v)
        if (x.find(s) != std::string::npos) return true;
    return false;
}

}  // namespace

TEST_CASE("the simulated booter accepts the driver's Ada GspFwWprMeta", "[sim-nv][booter]") {
    CHECK(check(good_meta()).empty());
}

TEST_CASE("the simulated booter refuses each inconsistent GspFwWprMeta", "[sim-nv][booter][negative]") {
    nv::GspFwWprMeta m = good_meta();
    SECTION("magic") {
        m.magic ^= 1;
        CHECK(any_contains(check(m), "magic"));
    }
    SECTION("revision") {
        m.revision = 2;
        CHECK(any_contains(check(m), "revision"));
    }
    SECTION("FRTS where FWSEC did not put it") {
        m.frtsOffset -= 0x100000;
        CHECK(any_contains(check(m), "frtsOffset"));
    }
    SECTION("WPR2 ending below FRTS (gspFwWprEnd = frtsOffset)") {
        m.gspFwWprEnd = m.frtsOffset;
        CHECK(any_contains(check(m), "gspFwWprEnd"));
    }
    SECTION("heap overlapping GSP FW") {
        m.gspFwHeapSize += 0x200000;
        CHECK(any_contains(check(m), "heap"));
    }
    SECTION("fbSize") {
        m.fbSize = kFb * 2;
        CHECK(any_contains(check(m), "fbSize"));
    }
    SECTION("radix3 that does not lead to the ELF") {
        m.sysmemAddrOfRadix3Elf = kRadix + 0x1000;  // skips level 0: the walk lands on a table, not the image
        CHECK(any_contains(check(m), "radix3"));
    }
}

}  // namespace sim_booter_test
