// Cross-vendor peer-to-peer DMA end to end: sim-am:navi31 and sim-nv:ad102 on one
// simulated bus (bus=...), data moved by Device::transfer with one device's copy engine writing
// into the other's VRAM through its BAR, mapped through the IOMMU. The bus counters prove the
// payload never touched host memory; a dropped peer mapping faults and the runtime names it.
#include "base/error.hpp"
#include "drivers/registry.hpp"
#include "hcq/device.hpp"
#include "hcq/queue.hpp"
#include "hcq/registry.hpp"
#include "hcq/signal.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <mutex>
#include <vector>

namespace p2p_sim_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

std::shared_ptr<hcq::Device> open(const std::string& name) {
    static std::once_flag once;
    std::call_once(once, [] { registry::register_backends(hcq::registry()); });
    return hcq::open_device(name);
}

// A pattern that differs per 8-byte word and per seed, so a misplaced or stale window shows.
std::vector<uint64_t> pattern(uint64_t bytes, uint64_t seed) {
    std::vector<uint64_t> words(bytes / 8);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (uint64_t& w : words) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w = x;
    }
    return words;
}

std::span<const std::byte> bytes_of(const std::vector<uint64_t>& v) { return std::as_bytes(std::span(v)); }

std::vector<uint64_t> read_back(hcq::Device& dev, const hcq::Buffer& b, uint64_t bytes) {
    std::vector<uint64_t> out(bytes / 8);
    dev.copy_out(std::as_writable_bytes(std::span(out)), b);
    return out;
}

registry::SimBusTraffic traffic(hcq::Device& dev) {
    auto t = registry::sim_bus_traffic(dev);
    REQUIRE(t.has_value());
    return *t;
}

uint64_t host_bytes(const registry::SimBusTraffic& t) { return t.host_bytes_read + t.host_bytes_written; }

}  // namespace

TEST_CASE("p2p: 256 MiB AMD -> NVIDIA -> AMD through the BARs, no host bounce, data intact") {
    constexpr uint64_t kBytes = 256ull << 20;
    auto am = open("sim-am:navi31?bus=p2p");
    auto nv = open("sim-nv:ad102?bus=p2p");
    CHECK(am->name() != nv->name());
    hcq::Buffer am_src = am->allocate(kBytes);
    hcq::Buffer nv_mid = nv->allocate(kBytes);
    hcq::Buffer am_dst = am->allocate(kBytes);
    const std::vector<uint64_t> data = pattern(kBytes, 1);
    am->copy_in(am_src, bytes_of(data));
    am->synchronize();
    nv->synchronize();

    const registry::SimBusTraffic am0 = traffic(*am), nv0 = traffic(*nv);
    hcq::Device::transfer(nv_mid, am_src, kBytes);  // AM's SDMA writes into the AD102's BAR1
    hcq::Device::transfer(am_dst, nv_mid, kBytes);  // the AD102's CE writes into navi31's BAR0
    // Both timelines cover both copies: either side waits, no host wait was needed in between.
    am->synchronize(30s);
    nv->synchronize(30s);
    const registry::SimBusTraffic am1 = traffic(*am), nv1 = traffic(*nv);

    CHECK(am1.peer_bytes_written - am0.peer_bytes_written == kBytes);
    CHECK(nv1.peer_bytes_written - nv0.peer_bytes_written == kBytes);
    // What host memory saw meanwhile: signals, rings, GPFIFO entries and the engines' polls of their
    // write pointers — a few KiB here (568 and 2272 bytes in one run), no payload: a bounce would be
    // 512 MiB of host DMA. The bound leaves room for a slow machine's extra idle polls.
    const uint64_t am_host = host_bytes(am1) - host_bytes(am0), nv_host = host_bytes(nv1) - host_bytes(nv0);
    INFO("host-memory DMA during the transfers: AM " << am_host << " bytes, NV " << nv_host << " bytes");
    CHECK(am_host < (1u << 20));
    CHECK(nv_host < (1u << 20));
    CHECK(am1.iommu_faults == 0);
    CHECK(nv1.iommu_faults == 0);

    CHECK(read_back(*am, am_dst, kBytes) == data);
}

TEST_CASE("p2p: AMD <-> AMD (navi31, navi48) and NVIDIA <-> NVIDIA (two AD102s), window by window") {
    constexpr uint64_t kBytes = 32ull << 20;
    SECTION("AMD <-> AMD") {
        auto a = open("sim-am:navi31?bus=p2p-am");
        auto b = open("sim-am:navi48?bus=p2p-am");
        hcq::Buffer src = a->allocate(kBytes), mid = b->allocate(kBytes), dst = a->allocate(kBytes);
        const std::vector<uint64_t> data = pattern(kBytes, 2);
        a->copy_in(src, bytes_of(data));
        const registry::SimBusTraffic a0 = traffic(*a), b0 = traffic(*b);
        // 4 MiB windows: eight mappings of navi48's BAR0, each retired after its copy.
        hcq::Device::transfer(mid, src, kBytes, {.window_bytes = 4u << 20});
        hcq::Device::transfer(dst, mid, kBytes, {.window_bytes = 4u << 20});
        a->synchronize(30s);
        b->synchronize(30s);
        CHECK(traffic(*a).peer_bytes_written - a0.peer_bytes_written == kBytes);
        CHECK(traffic(*b).peer_bytes_written - b0.peer_bytes_written == kBytes);
        CHECK(read_back(*a, dst, kBytes) == data);
    }
    SECTION("NVIDIA <-> NVIDIA") {
        auto a = open("sim-nv:ad102?bus=p2p-nv");
        auto b = open("sim-nv:ad102?bus=p2p-nv");
        CHECK(a->name() != b->name());
        hcq::Buffer src = a->allocate(kBytes), mid = b->allocate(kBytes), dst = a->allocate(kBytes);
        const std::vector<uint64_t> data = pattern(kBytes, 3);
        a->copy_in(src, bytes_of(data));
        const registry::SimBusTraffic a0 = traffic(*a), b0 = traffic(*b);
        hcq::Device::transfer(mid, src, kBytes, {.window_bytes = 8u << 20});
        hcq::Device::transfer(dst, mid, kBytes);
        b->synchronize(30s);  // b's timeline covers the second copy too
        a->synchronize(30s);
        CHECK(traffic(*a).peer_bytes_written - a0.peer_bytes_written == kBytes);
        CHECK(traffic(*b).peer_bytes_written - b0.peer_bytes_written == kBytes);
        CHECK(read_back(*a, dst, kBytes) == data);
    }
}

TEST_CASE("p2p: devices on separate simulated buses are refused with the reason") {
    auto am = open("sim-am:navi31");
    auto nv = open("sim-nv:ad102");
    hcq::Buffer a = am->allocate(1u << 20), b = nv->allocate(1u << 20);
    CHECK_THROWS_AS(hcq::Device::transfer(b, a, 1u << 20), UnsupportedError);
    CHECK_THROWS_WITH(hcq::Device::transfer(b, a, 1u << 20), Contains("different root complexes"));
    // A refused transfer leaves both devices usable.
    am->synchronize(5s);
    nv->synchronize(5s);
}

TEST_CASE("p2p: a transfer whose later window cannot be mapped stops with an error and leaves both devices usable") {
    // A peer window of 12 MiB on navi31: the timeline's page, then two 4 MiB windows (2 MiB
    // aligned) fit; the third does not (windows retire only when the host collects, at synchronize).
    auto am = open("sim-am:navi31?bus=p2p-full&peer_va=12582912");
    auto nv = open("sim-nv:ad102?bus=p2p-full");
    constexpr uint64_t kBytes = 16u << 20;
    hcq::Buffer src = am->allocate(kBytes), dst = nv->allocate(kBytes);
    CHECK_THROWS_WITH(hcq::Device::transfer(dst, src, kBytes, {.window_bytes = 4u << 20}),
                      Contains("stopped after 0x800000 of 0x1000000 bytes") && Contains("peer window is full"));
    // The destination's timeline value was released, so nothing hangs; the windows retire.
    nv->synchronize(10s);
    am->synchronize(10s);
    CHECK_FALSE(am->failed());
    CHECK_FALSE(nv->failed());
    // What fits the window still moves.
    constexpr uint64_t kFits = 8u << 20;
    const std::vector<uint64_t> data = pattern(kFits, 4);
    am->copy_in(src, bytes_of(data));
    hcq::Device::transfer(dst, src, kFits, {.window_bytes = 4u << 20});
    nv->synchronize(10s);
    std::vector<uint64_t> back(kFits / 8);
    nv->copy_out(std::as_writable_bytes(std::span(back)), dst.view(0, kFits));
    CHECK(back == data);
}

// `from`'s copy engine writes into `to`'s BAR `bar` while `to`'s timeline is held on a gate; the
// peer mappings are torn down behind `from`'s driver before the gate opens.
namespace {
void check_missing_mapping(hcq::Device& from, hcq::Device& to, const std::string& bar) {
    constexpr uint64_t kBytes = 1u << 20;
    hcq::Buffer src = from.allocate(kBytes), dst = to.allocate(kBytes);
    hcq::Signal gate = to.new_signal(0, "gate");
    {
        std::lock_guard lock(to.submission_mutex());
        hcq::ComputeQueue q = to.compute_queue();
        const uint64_t v = to.next_timeline();
        q.wait(to.timeline(), v - 1).wait(gate, 1).signal(to.timeline(), v).submit();
    }
    hcq::Device::transfer(dst, src, kBytes);  // waits (on the peer's timeline) with its mappings made
    CHECK(registry::drop_sim_peer_mappings(from) == 1);  // the BAR window (not the signal page)
    gate.set(1);
    try {
        from.synchronize(10s);
        FAIL("the copy into a dropped peer mapping completed");
    } catch (const Error& e) {
        const std::string text = e.what();
        INFO(text);
        CHECK_THAT(text, Contains("missing peer mapping") && Contains(to.name()) && Contains(bar) && Contains("IOVA"));
    }
    CHECK(from.failed());
    const std::vector<std::string> faults = registry::sim_iommu_faults(from);
    REQUIRE_FALSE(faults.empty());
    CHECK_THAT(faults.front(), Contains("IOMMU fault") && Contains("missing mapping") && Contains(bar));
}
}  // namespace

TEST_CASE("p2p: a missing peer mapping faults in the IOMMU and the runtime names the mapping") {
    auto am = open("sim-am:navi31?bus=p2p-fault");
    auto nv = open("sim-nv:ad102?bus=p2p-fault");
    SECTION("AMD's SDMA into the AD102's BAR1") { check_missing_mapping(*am, *nv, "BAR1"); }
    SECTION("the AD102's copy engine into navi31's BAR0") { check_missing_mapping(*nv, *am, "BAR0"); }
}

}  // namespace p2p_sim_test
