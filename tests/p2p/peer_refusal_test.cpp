// drivers/pci peer-to-peer at the bus level: a function on the simulated bus maps a
// peer's memory BAR into its IOMMU domain and its DMA lands in the peer's memory (counted as peer
// traffic, not host DMA); a dropped mapping faults naming what was there; and every refusal says
// why: different root complexes, a range past the BAR (small BAR), a register BAR.
#include "base/error.hpp"
#include "drivers/pci/peer_mapping.hpp"
#include "drivers/pci/sim_bus.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

namespace peer_refusal_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::pci;
using Catch::Matchers::Contains;

namespace {

// A DMA-capable function with a register BAR0 and a 1 MiB memory BAR2 (like a GPU's VRAM BAR).
class PeerModel final : public sim::SimDeviceModel {
public:
    sim::DeviceSpec spec() const override {
        sim::DeviceSpec s;
        s.identity = {0x1234, 0x5678, 0, 0, 0, 0x030000};
        s.bars = {{0, 4096, false, false, sim::BarSpec::Kind::Registers},
                  {2, 1u << 20, true, true, sim::BarSpec::Kind::Memory}};
        s.pci_express = true;
        return s;
    }
    uint64_t mmio_read(unsigned, uint64_t, unsigned) override { return 0; }
    void mmio_write(unsigned, uint64_t, unsigned, uint64_t) override {}
    void function_reset() override {}
    bool dma_write(BusAddress at, std::span<const std::byte> data) { return port().dma_write(at, data); }
    bool dma_read(BusAddress at, std::span<std::byte> out) { return port().dma_read(at, out); }
    std::span<std::byte> vram() { return port().bar_memory(2); }
};

struct Pair {
    sim::SimBus bus;
    PeerModel* model_a = nullptr;
    PeerModel* model_b = nullptr;
    PciAddress at_a, at_b;
    std::unique_ptr<PciDevice> a, b;
    Pair() {
        auto ma = std::make_unique<PeerModel>();
        auto mb = std::make_unique<PeerModel>();
        model_a = ma.get();
        model_b = mb.get();
        at_a = bus.attach(std::move(ma));
        at_b = bus.attach(std::move(mb));
        a = bus.open(at_a);
        b = bus.open(at_b);
        a->set_bus_master(true);
        b->set_bus_master(true);
    }
};

}  // namespace

TEST_CASE("p2p: a peer BAR mapped into the IOMMU takes the device's DMA into the peer's memory, counted as peer traffic") {
    Pair p;
    std::unique_ptr<BusMapping> m = p.a->map_peer_bar(*p.b, 2, 0x10000, 0x20000);
    CHECK(m->size() == 0x20000);
    CHECK_THAT(m->what(), Contains("BAR2+0x10000") && Contains(p.b->name()));
    std::vector<std::byte> data(0x20000);
    for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i * 7 + 3);
    REQUIRE(p.model_a->dma_write(m->address(), data));
    CHECK(std::memcmp(p.model_b->vram().data() + 0x10000, data.data(), data.size()) == 0);
    std::vector<std::byte> back(0x1000);
    REQUIRE(p.model_a->dma_read(m->address() + 0x1000, back));
    CHECK(std::memcmp(back.data(), data.data() + 0x1000, back.size()) == 0);

    const sim::Counters c = p.bus.counters(p.at_a);
    CHECK(c.peer_bytes_written == 0x20000);
    CHECK(c.peer_bytes_read == 0x1000);
    CHECK(c.dma_bytes_written == 0);  // none of it was host memory
    CHECK(c.dma_bytes_read == 0);
}

TEST_CASE("p2p: a dropped peer mapping faults in the IOMMU and the fault names the mapping that is missing") {
    Pair p;
    std::unique_ptr<BusMapping> m = p.a->map_peer_bar(*p.b, 2, 0, 0x1000);
    CHECK(p.bus.drop_peer_mappings(p.at_a) == 1);
    std::vector<std::byte> data(64, std::byte{1});
    CHECK_FALSE(p.model_a->dma_write(m->address(), data));
    const auto faults = p.bus.iommu_faults();
    REQUIRE(faults.size() == 1);
    CHECK(faults[0].write);
    CHECK_THAT(faults[0].describe(), Contains("IOMMU fault") && Contains("missing mapping") && Contains("BAR2+0x0") &&
                                         Contains(p.b->name()));
    CHECK(p.bus.counters(p.at_a).iommu_faults == 1);
    CHECK(p.model_b->vram()[0] == std::byte{0});  // nothing landed
}

TEST_CASE("p2p: refusals name the reason") {
    SECTION("functions on two simulated buses are behind different root complexes") {
        Pair p, q;
        CHECK_THROWS_WITH(p.a->map_peer_bar(*q.b, 2, 0, 4096), Contains("different root complexes"));
        CHECK(p.a->peer_refusal(*q.b).has_value());
        CHECK_FALSE(p.a->peer_refusal(*p.b).has_value());
    }
    SECTION("a range past the BAR's end: small BAR") {
        Pair p;
        CHECK_THROWS_AS(p.a->map_peer_bar(*p.b, 2, 0xff000, 0x2000), UnsupportedError);
        CHECK_THROWS_WITH(p.a->map_peer_bar(*p.b, 2, 0xff000, 0x2000), Contains("small BAR"));
    }
    SECTION("a BAR smaller than the device memory peers must reach: small BAR, with both sizes") {
        Pair p;
        CHECK_THROWS_WITH(require_large_bar(*p.b, 2, 24ull << 30), Contains("small BAR") && Contains("1 MiB") && Contains("24 GiB"));
        CHECK_NOTHROW(require_large_bar(*p.b, 2, 1u << 20));
    }
    SECTION("a register BAR is no DMA target") {
        Pair p;
        CHECK_THROWS_WITH(p.a->map_peer_bar(*p.b, 0, 0, 4096), Contains("registers"));
    }
    SECTION("a device is not its own peer") {
        Pair p;
        CHECK_THROWS_AS(p.a->map_peer_bar(*p.a, 2, 0, 4096), UnsupportedError);
    }
}

TEST_CASE("p2p: the PCI hierarchy decides: one host bridge is reachable, two are not") {
    CHECK_FALSE(peer_path_refusal("/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0",
                                  "/sys/devices/pci0000:00/0000:00:03.1/0000:0a:00.0")
                    .has_value());
    auto why = peer_path_refusal("/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0", "/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0");
    REQUIRE(why.has_value());
    CHECK_THAT(*why, Contains("different root complexes") && Contains("pci0000:00") && Contains("pci0000:40") && Contains("ACS"));
    auto unknown = peer_path_refusal("/sys/devices/platform/foo", "/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0");
    REQUIRE(unknown.has_value());
    CHECK_THAT(*unknown, Contains("cannot tell"));
}

}  // namespace peer_refusal_test
