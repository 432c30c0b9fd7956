// drivers/am over the usb backend on the simulated Navi31 behind the simulated ASM2464
// (am:usb:sim): cold and warm bring-up with no protocol violation, what a register
// access costs in USB transfers, unplug in the middle of a copy, a second opener, and HCQ queues
// over shadowed memory.
#include "base/error.hpp"
#include "drivers/am/am_device.hpp"
#include "drivers/am/hcq_device.hpp"
#include "drivers/am/sram_copy.hpp"
#include "drivers/pci/usb_pci_device.hpp"
#include "drivers/registry_am.hpp"
#include "drivers/sim/amdgpu/navi.hpp"
#include "drivers/sim/asm24/sim_asm24.hpp"
#include "drivers/usb/asm24_protocol.hpp"
#include "hcq/signal.hpp"
#include "tests/sanitizers.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>

#include <filesystem>
#include <regex>
#include <stdexcept>

namespace am_usb_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using sim::asm24::SimAsm24Bridge;
namespace fs = std::filesystem;

namespace {

std::string firmware_dir() {
    const char* d = std::getenv("BAREGPU_TEST_FIRMWARE_DIR");
    if (d == nullptr) throw std::runtime_error("BAREGPU_TEST_FIRMWARE_DIR is not set: run the tests through meson test");
    return d;
}

struct TempDirs {
    fs::path root;
    TempDirs() {
        std::string tmpl = (fs::temp_directory_path() / "am-usb-XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        root = tmpl;
        fs::create_directories(root / "state");
        fs::create_directories(root / "locks");
        ::setenv("BAREGPU_LOCK_DIR", (root / "locks").c_str(), 1);
        ::setenv("BAREGPU_SIM_STATE_DIR", (root / "state").c_str(), 1);
        ::setenv("BAREGPU_FIRMWARE_PATH", firmware_dir().c_str(), 1);
        ::unsetenv("BAREGPU_AM_RESET");
    }
    ~TempDirs() {
        std::error_code ec;
        fs::remove_all(root, ec);
    }
};

// One "process": the chip on the shared state dir behind a fresh simulated bridge.
struct Rig {
    SimAsm24Bridge* bridge = nullptr;
    std::unique_ptr<pci::PciDevice> pci;

    explicit Rig(const TempDirs& dirs, SimAsm24Bridge::Options bridge_options = {}) {
        sim::amdgpu::ModelOptions o;
        o.asic = sim::amdgpu::Asic::navi31;
        o.state_dir = (dirs.root / "state").string();
        o.firmware_dir = firmware_dir();
        auto owned = std::make_unique<SimAsm24Bridge>(std::move(bridge_options), sim::amdgpu::make_model(o));
        bridge = owned.get();
        pci::UsbOpenOptions uo;
        uo.write_once_bars = {2};
        pci = pci::open_usb_device(std::move(owned), uo);
    }
    std::unique_ptr<am::AmDevice> open(am::SkipStep skip = am::SkipStep::none) {
        am::AmOptions o;
        o.skip_step = skip;
        o.lock_key = "usb-sim-test";
        o.firmware_dirs = {firmware_dir()};
        return am::AmDevice::open(std::move(pci), std::move(o));
    }
    std::string violations() const {
        std::string out;
        for (const auto& v : bridge->violations()) out += v.describe() + "\n";
        return out;
    }
};

}  // namespace

TEST_CASE("am:usb:sim: cold bring-up under 10 s and warm start under 1 s of modelled time, no violations") {
    TempDirs dirs;
    std::chrono::nanoseconds cold{0}, warm{0};
    {
        Rig rig(dirs);
        const uint64_t t0 = rig.bridge->now_ns();
        auto dev = rig.open();
        cold = std::chrono::nanoseconds(rig.bridge->now_ns() - t0);
        CHECK(dev->report().reset == false);
        CHECK(dev->report().stages.size() > 5);  // the full boot: PSP, SMU, ...
        INFO(rig.violations());
        CHECK(rig.bridge->violations().empty());
    }
    {
        Rig rig(dirs);
        const uint64_t t0 = rig.bridge->now_ns();
        auto dev = rig.open();
        warm = std::chrono::nanoseconds(rig.bridge->now_ns() - t0);
        CHECK(dev->report().stages.size() <= 3);  // discovery and the warm VM stage
        INFO(rig.violations());
        CHECK(rig.bridge->violations().empty());
    }
    CHECK(cold < std::chrono::seconds(10));
    CHECK(warm < std::chrono::seconds(1));
    CHECK(warm < cold);
}

TEST_CASE("am:usb:sim with the stock firmware (UAS and BOT): cold bring-up under 20 s of modelled time, the PSP's firmware through the SRAM") {
    for (auto which : {SimAsm24Bridge::Options::Interfaces::Uas, SimAsm24Bridge::Options::Interfaces::Bot}) {
        CAPTURE(which == SimAsm24Bridge::Options::Interfaces::Uas ? "uas" : "bot");
        TempDirs dirs;
        SimAsm24Bridge::Options bo;
        bo.interfaces = which;
        bo.vendor_id = usb::asm24::kAsmediaVendor;
        bo.product_id = usb::asm24::kStockProduct2464;
        bo.product = "ASM2464PD";
        bo.link_trained = true;
        std::chrono::nanoseconds cold{0};
        {
            Rig rig(dirs, bo);
            CHECK(pci::usb_bridge_firmware(*rig.pci)->starts_with("stock firmware"));
            const uint64_t t0 = rig.bridge->now_ns();
            const uint64_t tlps0 = rig.bridge->counters().tlps;
            auto dev = rig.open();
            cold = std::chrono::nanoseconds(rig.bridge->now_ns() - t0);
            CHECK(dev->report().stages.size() > 5);
            INFO(rig.violations());
            CHECK(rig.bridge->violations().empty());
            // About 1.6 MB of firmware: through BAR0 that would be 400000 dword TLPs; staged in the
            // SRAM (WRITE(16)) and read by the PSP through the AGP aperture, the boot sends far fewer.
            CHECK(rig.bridge->counters().tlps - tlps0 < 40'000);
        }
        {
            Rig rig(dirs, bo);
            auto dev = rig.open();
            CHECK(dev->report().stages.size() <= 3);  // warm: discovery and the VM stage
            CHECK(rig.bridge->violations().empty());
        }
        CHECK(cold < std::chrono::seconds(20));
    }
}

// The bridge seen through a backend that does not own it: it outlives a device whose open failed.
struct Borrowed final : usb::UsbBackend {
    SimAsm24Bridge& b;
    explicit Borrowed(SimAsm24Bridge& bridge) : b(bridge) {}
    const std::string& name() const override { return b.name(); }
    usb::DeviceDescriptor descriptor() override { return b.descriptor(); }
    void claim_interface(uint8_t i, uint8_t a) override { b.claim_interface(i, a); }
    void release_interface(uint8_t i) override { b.release_interface(i); }
    size_t control(uint8_t t, uint8_t r, uint16_t v, uint16_t i, std::span<std::byte> d, std::chrono::milliseconds ms) override {
        return b.control(t, r, v, i, d, ms);
    }
    size_t bulk(uint8_t e, std::span<std::byte> d, std::chrono::milliseconds ms) override { return b.bulk(e, d, ms); }
    Tag submit_bulk(uint8_t e, std::span<std::byte> d, std::chrono::milliseconds ms, uint32_t s) override { return b.submit_bulk(e, d, ms, s); }
    size_t reap(Tag t) override { return b.reap(t); }
    unsigned alloc_streams(unsigned n, std::span<const uint8_t> e) override { return b.alloc_streams(n, e); }
    void clear_halt(uint8_t e) override { b.clear_halt(e); }
    std::chrono::nanoseconds now() override { return b.now(); }
    void sleep(std::chrono::nanoseconds d) override { b.sleep(d); }
};

TEST_CASE("am:usb:sim: without the AGP aperture the PSP cannot read its firmware from the bridge SRAM, and says where it looked") {
    TempDirs dirs;
    sim::amdgpu::ModelOptions mo;
    mo.asic = sim::amdgpu::Asic::navi31;
    mo.state_dir = (dirs.root / "state").string();
    mo.firmware_dir = firmware_dir();
    SimAsm24Bridge bridge(SimAsm24Bridge::Options{}, sim::amdgpu::make_model(mo));
    am::AmOptions o;
    o.skip_step = am::SkipStep::agp_aperture;
    o.lock_key = "usb-sim-test";
    o.firmware_dirs = {firmware_dir()};
    CHECK_THROWS_AS(am::AmDevice::open(pci::open_usb_device(std::make_unique<Borrowed>(bridge)), std::move(o)), Error);
    size_t refused = 0;
    for (const auto& v : bridge.violations())
        if (v.what.find("is neither VRAM nor inside the MM hub's AGP and system apertures") != std::string::npos) ++refused;
    CHECK(refused >= 1);
}

TEST_CASE("am:usb:sim: a register read is one control and one bulk IN; an isolated dword write one control transfer, adjacent ones one stream") {
    TempDirs dirs;
    Rig rig(dirs);
    auto dev = rig.open();
    pci::PciDevice& pci = dev->pci();
    const usb::TransferCounters before = *pci::usb_transfer_counters(pci);
    const uint32_t v = pci.bar(5).read32(BarOffset(0));
    (void)v;
    const usb::TransferCounters read = *pci::usb_transfer_counters(pci);
    CHECK(read.total() - before.total() == 2);
    CHECK(read.bulk_in - before.bulk_in == 1);
    // VRAM (BAR0, prefetchable): 1 KiB of dword writes becomes one stream once something reads.
    for (uint32_t i = 0; i < 256; ++i) pci.bar(0).write32(BarOffset(0x100000 + i * 4), i);
    CHECK(pci.bar(0).read32(BarOffset(0x100000 + 255 * 4)) == 255);
    const usb::TransferCounters written = *pci::usb_transfer_counters(pci);
    CHECK(written.total() - read.total() == 4);  // stream write (control + bulk OUT) + the read (control + bulk IN)
    // An isolated dword write: one posted TLP carrying its data (0xF0 mode 0), no bulk transfer.
    pci.bar(0).write32(BarOffset(0x200000), 0xabcd1234);
    CHECK(pci.bar(0).read32(BarOffset(0x200000)) == 0xabcd1234);
    const usb::TransferCounters single = *pci::usb_transfer_counters(pci);
    CHECK(single.total() - written.total() == 3);  // the write's control + the read's control and bulk IN
    CHECK(single.bulk_out == written.bulk_out);
}

TEST_CASE("am:usb:sim: mapping and unmapping memory reads no page table back over the link") {
    TempDirs dirs;
    Rig rig(dirs);
    auto dev = rig.open();
    pci::PciDevice& pci = dev->pci();
    const usb::TransferCounters before = *pci::usb_transfer_counters(pci);
    // 4 MiB of 4 KiB pages at an odd page offset (no 2 MiB leaves): new tables, a walk per page.
    const uint64_t va = am::kVmStart + (64 << 20) + 0x1000, paddr = am::AmDevice::heap_begin() + 0x1000;
    dev->map(va, paddr, 4 << 20, {}, false);
    REQUIRE(dev->translate(va + 0x3000));
    CHECK(dev->translate(va + 0x3000)->paddr == paddr + 0x3000);
    dev->unmap(va, 4 << 20, false);
    CHECK_FALSE(dev->translate(va));
    const usb::TransferCounters after = *pci::usb_transfer_counters(pci);
    // The tables are this process's own: their entries are written, never read back (before
    // the host copy, each walk read every level through a BAR stream).
    CHECK(after.bulk_in == before.bulk_in);
}

TEST_CASE("am:usb:sim: unplug mid-copy is DeviceLostError naming the device, and nothing hangs") {
    TempDirs dirs;
    Rig rig(dirs);
    auto dev = rig.open();
    std::vector<std::byte> data(8 << 20, std::byte{0x42});
    // Gone after two more transfers: in the middle of the 8 MiB copy (1 MiB streams).
    rig.bridge->inject({sim::asm24::FaultKind::Disconnect, 1, 2});
    const auto wall = std::chrono::steady_clock::now();
    try {
        dev->pci().bar(0).write_block(BarOffset(0x200000), data);
        FAIL("the copy finished on an unplugged bridge");
    } catch (const DeviceLostError& e) {
        CHECK(e.device() == "usb:sim");
        CHECK(std::string(e.what()).find("disconnected mid-transfer") != std::string::npos);
    }
    CHECK_THROWS_AS(dev->pci().bar(5).read32(BarOffset(0)), DeviceLostError);
    CHECK_THROWS_AS(dev->pci().config_read32(0), DeviceLostError);
    dev.reset();  // the destructor's clean-exit write fails quietly
    CHECK(std::chrono::steady_clock::now() - wall < std::chrono::seconds(10));
}

TEST_CASE("am:usb:sim: a second open finds the device busy and says who holds it") {
    TempDirs dirs;
    registry::AmTarget first = registry::open_am("am:usb:sim");
    try {
        registry::AmTarget second = registry::open_am("am:usb:sim");
        FAIL("a second open succeeded");
    } catch (const BusyError& e) {
        CHECK(e.owner_pid() == ::getpid());
        CHECK(std::string(e.what()).find(std::to_string(::getpid())) != std::string::npos);
    }
}

TEST_CASE("am:usb:sim: an HCQ device over the bridge: signals, host-gated queues and copies through shadowed memory") {
    using namespace std::chrono_literals;
    TempDirs dirs;
    Rig rig(dirs);
    auto chip = rig.open();
    am::AmHcqOptions o;
    o.compute_ring_bytes = o.copy_ring_bytes = 64 << 10;
    o.staging_bytes = 64 << 10;
    o.staging_slots = 2;
    auto dev = am::AmHcqDevice::create(std::move(chip), o);
    CHECK(dev->shadowed());  // no BAR mapping, no DMA into host memory: host copies of VRAM
    CHECK(dev->name().find("usb:sim") != std::string::npos);

    // Signals the GPU writes reach the host's copy when the host waits.
    hcq::Signal s = dev->new_signal(0, "usb signal");
    dev->compute_queue().signal(s, 1).submit();
    try { s.wait(1, 5s); } catch (const std::exception& e) { FAIL(e.what() << "\nVIOLATIONS:\n" << rig.violations()); }
    CHECK(s.value() == 1);
    dev->copy_queue().signal(s, 2).submit();
    s.wait(2, 5s);
    CHECK(s.value() == 2);

    // A host write to a signal reaches the queue that waits for it.
    hcq::Signal gate = dev->new_signal(0, "gate"), done = dev->new_signal(0, "done");
    dev->compute_queue().wait(gate, 1).signal(done, 7).submit();
    CHECK_FALSE(done.try_wait(7, 50ms));
    gate.set(1);
    done.wait(7, 5s);
    CHECK(done.value() == 7);

    // Host-written data in a host buffer, copied by SDMA to VRAM and back, then read by the host.
    const size_t n = (200 << 10) + 12;
    hcq::Buffer host = dev->allocate(n, {.host = true});
    hcq::Buffer local = dev->allocate(n);
    hcq::Buffer back = dev->allocate(n, {.cpu_access = true});
    uint32_t x = 777;
    for (auto& b : host.bytes()) b = std::byte((x = x * 1103515245 + 12345) >> 24);
    uint64_t v = dev->next_timeline();
    dev->copy_queue().wait(dev->timeline(), v - 1).copy(local, host, n).copy(back, local, n).signal(dev->timeline(), v).submit();
    dev->synchronize(5s);
    CHECK(dev->timeline().value() == v);
    CHECK(std::equal(back.bytes().begin(), back.bytes().end(), host.bytes().begin()));

    // copy_in / copy_out through the bridge SRAM on the copy queue, not through CPU-mapped staging
    // in VRAM: BAR streams move one TLP per dword (~1.8 MB/s read), the SRAM engine ~700 MB/s, so
    // copying out 600 KB must take well under the ~330 ms of modelled time a stream read would.
    std::vector<std::byte> data(600 << 10), out(data.size());
    for (auto& b : data) b = std::byte((x = x * 1103515245 + 12345) >> 24);
    hcq::Buffer big = dev->allocate(data.size());
    uint64_t t0 = rig.bridge->now_ns();
    dev->copy_in(big, data);
    CHECK(rig.bridge->now_ns() - t0 < 50'000'000);
    t0 = rig.bridge->now_ns();
    dev->copy_out(out, big);
    CHECK(rig.bridge->now_ns() - t0 < 50'000'000);
    CHECK(out == data);
    CHECK_FALSE(dev->failed());
    dev.reset();
    INFO(rig.violations());
    CHECK(rig.bridge->violations().empty());
}

TEST_CASE("am:usb:sim: the rings are not zero-filled over the link; what a submission wrote reaches VRAM, zero words included") {
    using namespace std::chrono_literals;
    TempDirs dirs;
    Rig rig(dirs);
    auto chip = rig.open();
    const uint64_t t0 = rig.bridge->now_ns();
    auto dev = am::AmHcqDevice::create(std::move(chip), am::AmHcqOptions{});  // two 1 MiB rings
    const uint64_t open_ns = rig.bridge->now_ns() - t0;
    INFO("HCQ open: " << open_ns / 1000 << " us of modelled link time");
    // Zero-filling the rings one TLP per dword was 0.55 s of the 0.65 s an open cost.
    CHECK(open_ns < 200'000'000);
    // Garbage where the rings are in VRAM (neither was written yet): every word the engines read
    // must be one a submission published, zeros included (a signal's upper dword, NOP payloads).
    const std::string state = dev->queue_state();
    const std::regex ring_re("ring (0x[0-9a-f]+) of ([0-9]+) (dwords|bytes)");
    int rings = 0;
    for (auto m = std::sregex_iterator(state.begin(), state.end(), ring_re); m != std::sregex_iterator(); ++m, ++rings) {
        const uint64_t va = std::stoull((*m)[1].str(), nullptr, 16);
        const uint64_t bytes = std::stoull((*m)[2].str()) * ((*m)[3].str() == "dwords" ? 4 : 1);
        const auto t = dev->chip().translate(va);
        REQUIRE(t);
        const std::vector<std::byte> garbage(std::min<uint64_t>(bytes, 64 << 10), std::byte{0xff});  // the first 64 KiB
        dev->chip().vram().write(t->paddr, garbage);
    }
    REQUIRE(rings == 2);
    hcq::Signal s = dev->new_signal(0, "compute"), c = dev->new_signal(0, "copy");
    for (uint64_t v : {7ull, 0x100000000ull, 0x200000009ull}) {  // rising: a signal wait is >=
        dev->compute_queue().signal(s, v).submit();
        dev->copy_queue().signal(c, v + 1).submit();
        try {
            s.wait(v, 5s);
            c.wait(v + 1, 5s);
        } catch (const std::exception& e) {
            FAIL(e.what() << "\nVIOLATIONS:\n" << rig.violations());
        }
        CHECK(s.value() == v);
        CHECK(c.value() == v + 1);
    }
    CHECK_FALSE(dev->failed());
    dev.reset();
    INFO(rig.violations());
    CHECK(rig.bridge->violations().empty());
}

TEST_CASE("am:usb:sim: copy-in and copy-out through the bridge SRAM with sentinels and fences, checked byte for byte") {
    TempDirs dirs;
    Rig rig(dirs);
    auto dev = rig.open();
    am::SramCopy copy(*dev, am::AmDevice::heap_begin());
    const uint64_t dst = am::AmDevice::heap_begin() + (16 << 20);
    // Not a multiple of a chunk: the last chunk's sentinel sits mid-window.
    std::vector<std::byte> data((3 << 20) + 1234);
    uint32_t x = 12345;
    for (auto& b : data) b = std::byte((x = x * 1103515245 + 12345) >> 24);
    const uint64_t t0 = rig.bridge->now_ns();
    try {
        copy.copy_in(dst, data);
    } catch (const Error& e) {
        std::string faults;
        for (const auto& f : dev->take_page_faults()) faults += f.describe() + "\n";
        FAIL(e.what() << "\n" << rig.violations() << faults);
    }
    const uint64_t in_ns = rig.bridge->now_ns() - t0;
    // An independent path: VRAM read back through BAR0 streams, 4 KB of every 64 KB and the tail
    // (every chunk's start, middle and end; the whole 3 MB one dword TLP at a time is most of this
    // test's run time under the sanitizers).
    const auto check_vram = [&](const std::vector<std::byte>& expected) {
        std::vector<std::byte> got(4096);
        for (uint64_t off = 0; off < expected.size(); off += 64 << 10) {
            const uint64_t at = std::min<uint64_t>(off, expected.size() - got.size());
            dev->pci().bar(0).read_block(BarOffset(dst + at), got);
            INFO("VRAM at +" << at);
            CHECK(std::equal(got.begin(), got.end(), expected.begin() + static_cast<std::ptrdiff_t>(at)));
        }
        dev->pci().bar(0).read_block(BarOffset(dst + expected.size() - got.size()), got);
        CHECK(std::equal(got.begin(), got.end(), expected.end() - static_cast<std::ptrdiff_t>(got.size())));
    };
    check_vram(data);

    std::vector<std::byte> back(data.size());
    const uint64_t t1 = rig.bridge->now_ns();
    copy.copy_out(dst, back);
    const uint64_t out_ns = rig.bridge->now_ns() - t1;
    CHECK(back == data);
    INFO(rig.violations());
    CHECK(rig.bridge->violations().empty());
    // Both directions well above the 300 MB/s the issue asks for, in modelled time.
    CHECK(double(data.size()) / double(in_ns) * 1e3 > 300.0);
    CHECK(double(data.size()) / double(out_ns) * 1e3 > 300.0);

    // A second copy reuses the windows: sentinels of the first run must not satisfy the second.
    std::vector<std::byte> zeros(data.size(), std::byte{0});
    copy.copy_in(dst, zeros);
    check_vram(zeros);
}

TEST_CASE("am:usb:sim: unplug in the middle of a pipelined SRAM copy-in is DeviceLostError naming the device") {
    TempDirs dirs;
    Rig rig(dirs);
    auto dev = rig.open();
    const auto wall = std::chrono::steady_clock::now();
    {
        am::SramCopy copy(*dev, am::AmDevice::heap_begin());
        std::vector<std::byte> data(4 << 20, std::byte{0x5a});
        rig.bridge->inject({sim::asm24::FaultKind::Disconnect, 1, 20});  // a few chunks in
        try {
            copy.copy_in(am::AmDevice::heap_begin() + (16 << 20), data);
            FAIL("the copy finished on an unplugged bridge");
        } catch (const DeviceLostError& e) {
            CHECK(e.device() == "usb:sim");
        }
        CHECK(copy.stats().chunks > 0);  // it was mid-copy, not refused up front
        CHECK(copy.stats().chunks < 16);
    }  // SramCopy's teardown (SDMA off) fails quietly on the gone bridge
    dev.reset();
    // DeviceLostError, not TimeoutError, shows no wait ran out its 10 s drain timeout; this bound
    // catches a wait with none (or a teardown that waits one out). Sanitizer builds run this 8-9x
    // slower (8 s measured on 2 cores under ASan+UBSan, 0.9 s without), so their bound is wider.
    constexpr auto kBound = std::chrono::seconds(test::kAddressSanitizer ? 40 : 10);
    CHECK(std::chrono::steady_clock::now() - wall < kBound);
}

}  // namespace am_usb_test
