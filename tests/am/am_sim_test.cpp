// drivers/am against the strict simulated Navi31/Navi48 (drivers/sim/amdgpu) with the real
// firmware: cold and warm bring-up, the conditions that force a full boot, and the negative
// cases of the bring-up, each asserting the specific error and the simulator's violations.
#include "base/error.hpp"
#include "drivers/am/am_device.hpp"
#include "drivers/am/discovery.hpp"
#include "drivers/am/psp.hpp"
#include "drivers/pci/mmio_region.hpp"
#include "drivers/pci/sim_bus.hpp"
#include "drivers/sim/amdgpu/navi.hpp"

#include <array>
#include <vector>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

namespace am_sim_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
namespace fs = std::filesystem;

namespace {

std::string firmware_dir() {
    const char* d = std::getenv("BAREGPU_TEST_FIRMWARE_DIR");
    if (d == nullptr) throw std::runtime_error("BAREGPU_TEST_FIRMWARE_DIR is not set: run the tests through meson test");
    return d;
}

// A fresh state dir and lock dir per test.
struct TempDirs {
    fs::path root;
    TempDirs() {
        std::string tmpl = (fs::temp_directory_path() / "am-sim-XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        root = tmpl;
        fs::create_directories(root / "state");
        fs::create_directories(root / "locks");
        ::setenv("BAREGPU_LOCK_DIR", (root / "locks").c_str(), 1);
        ::unsetenv("BAREGPU_AM_RESET");
    }
    ~TempDirs() {
        std::error_code ec;
        fs::remove_all(root, ec);
    }
};

// One "process": a bus with the model attached on the shared state dir.
struct Rig {
    pci::sim::SimBus bus;
    pci::PciAddress address;
    sim::amdgpu::NaviModel* model = nullptr;
    sim::amdgpu::Asic asic;

    Rig(const TempDirs& dirs, sim::amdgpu::Asic which) : asic(which) {
        sim::amdgpu::ModelOptions o;
        o.asic = which;
        o.state_dir = (dirs.root / "state").string();
        o.firmware_dir = firmware_dir();
        address = bus.attach(sim::amdgpu::make_model(o));
        model = &dynamic_cast<sim::amdgpu::NaviModel&>(bus.model(address));
    }
    std::string name() const { return asic == sim::amdgpu::Asic::navi31 ? "navi31" : "navi48"; }
    std::unique_ptr<am::AmDevice> open(am::AmOptions o = {}) {
        if (o.lock_key.empty()) o.lock_key = "sim-am-" + name();
        if (o.firmware_dirs.empty()) o.firmware_dirs = {firmware_dir()};
        return am::AmDevice::open(bus.open(address), std::move(o));
    }
    std::string violations() const {
        std::string out;
        for (const auto& v : bus.violations()) out += v.describe() + "\n";
        return out;
    }
};

const sim::amdgpu::Asic kBoth[] = {sim::amdgpu::Asic::navi31, sim::amdgpu::Asic::navi48};

}  // namespace

TEST_CASE("cold bring-up of both ASICs with the real firmware and no violations, then a warm start") {
    for (sim::amdgpu::Asic which : kBoth) {
        TempDirs dirs;
        uint64_t cold_ops = 0;
        {
            Rig rig(dirs, which);
            auto d = rig.open();
            INFO(rig.name() << " violations:\n" << rig.violations());
            REQUIRE(rig.bus.violations().empty());
            REQUIRE_FALSE(d->report().warm);
            REQUIRE_FALSE(d->report().reset);  // power-on: nothing to reset
            REQUIRE(d->asic().name == rig.name());
            // Discovery's GC and harvest tables (Navi31: 96 CUs; Navi48: 64; the model says which).
            REQUIRE(d->discovery().gc_info);
            INFO("CUs " << d->discovery().gc_info->compute_units());
            REQUIRE(d->discovery().gc_info->compute_units() >= 32);
            REQUIRE(d->discovery().harvested.empty());
            cold_ops = d->report().mmio_ops();
            REQUIRE(cold_ops > 0);
            // tinygrad ip.py AM_SMU.set_clocks(-1): GFXCLK, UCLK, FCLK, SOCCLK pinned to their top DPM level;
            // the SMU took both limits and reports the clock there.
            REQUIRE(d->report().pinned_clocks.size() == 4);
            for (const am::ClockLimit& c : d->report().pinned_clocks) {
                INFO(am::ppclk_name(c.clk));
                std::vector<uint32_t> levels = d->dpm_levels(c.clk);
                REQUIRE_FALSE(levels.empty());
                REQUIRE(c.min_mhz == levels.back());
                REQUIRE(c.max_mhz == levels.back());
                auto smu = rig.model->smu_clock(c.clk);
                REQUIRE(smu.soft_min_mhz == levels.back());
                REQUIRE(smu.soft_max_mhz == levels.back());
                REQUIRE(smu.current_mhz == levels.back());
            }
            auto metrics = d->smu_metrics();
            REQUIRE(metrics);
            REQUIRE(metrics->current_mhz[am::kPpclkGfx] == d->dpm_levels(am::kPpclkGfx).back());
            // tinygrad ip.py AM_SOC.init_hw: STRAP_NO_SOFT_RESET_DEV0_F2 cleared (the model powers on with it set), through RSMU.
            const uint32_t strap_at = d->regs().address(d->regs().table().rcc_dev0_epf2_strap2);
            REQUIRE(strap_at >= 0x40000);  // past a 1 MiB BAR5
            uint32_t strap = rig.model->register_value(strap_at);
            REQUIRE((strap & am::field::kStrapNoSoftResetDev0F2) == 0);
        }
        {
            Rig rig(dirs, which);  // a new "process" on the same state
            auto d = rig.open();
            INFO(rig.name() << " violations:\n" << rig.violations());
            REQUIRE(rig.bus.violations().empty());
            REQUIRE(d->report().warm);
            REQUIRE_FALSE(d->report().reset);
            REQUIRE(rig.model->mode1_resets() == 0);
            // The warm process knows what the booting one pinned (boot memory's driver_state).
            REQUIRE(d->report().pinned_clocks.empty());
            auto limits = d->clock_limits();
            REQUIRE(limits.size() == 4);
            REQUIRE(limits[0].clk == am::kPpclkGfx);
            REQUIRE(limits[0].max_mhz == d->dpm_levels(am::kPpclkGfx).back());
            INFO("cold " << cold_ops << " ops, warm " << d->report().mmio_ops());
            REQUIRE(d->report().mmio_ops() * 10 <= cold_ops);
        }
    }
}

TEST_CASE("a dirty marker, a latched VM fault or a forced reset each mean a full boot") {
    TempDirs dirs;
    { Rig rig(dirs, sim::amdgpu::Asic::navi31); rig.open()->leave_dirty(); }
    {
        Rig rig(dirs, sim::amdgpu::Asic::navi31);
        auto d = rig.open();
        INFO(rig.violations());
        REQUIRE(rig.bus.violations().empty());  // includes: bus mastering was off for the reset
        REQUIRE_FALSE(d->report().warm);
        REQUIRE_THAT(d->report().why_cold, Catch::Contains("SCRATCH_REG6"));
        REQUIRE(d->report().reset);  // sOS and SMU were alive
        REQUIRE(rig.model->mode1_resets() == 1);
    }
    {
        Rig rig(dirs, sim::amdgpu::Asic::navi31);
        rig.model->latch_vm_fault();
        auto d = rig.open();
        INFO(rig.violations());
        REQUIRE(rig.bus.violations().empty());
        REQUIRE_FALSE(d->report().warm);
        REQUIRE_THAT(d->report().why_cold, Catch::Contains("fault"));
    }
    {
        Rig rig(dirs, sim::amdgpu::Asic::navi31);
        am::AmOptions o;
        o.force_reset = true;
        auto d = rig.open(o);
        REQUIRE_FALSE(d->report().warm);
        REQUIRE(d->report().reset);
    }
    {
        Rig rig(dirs, sim::amdgpu::Asic::navi31);
        REQUIRE(rig.open()->report().warm);  // and clean again after all that
    }
}

TEST_CASE("firmware for the wrong ASIC is refused before it reaches the device") {
    TempDirs dirs;
    fs::path fw = dirs.root / "fw";
    fs::create_directories(fw / "amdgpu");
    for (const auto& e : fs::directory_iterator(fs::path(firmware_dir()) / "amdgpu")) {
        fs::copy_file(e.path(), fw / "amdgpu" / e.path().filename());
    }
    fs::copy_file(fw / "amdgpu" / "smu_14_0_3.bin", fw / "amdgpu" / "smu_13_0_0.bin", fs::copy_options::overwrite_existing);
    Rig rig(dirs, sim::amdgpu::Asic::navi31);
    am::AmOptions o;
    o.firmware_dirs = {fw.string()};
    try {
        rig.open(o);
        FAIL("opened with Navi48's SMU firmware");
    } catch (const FirmwareError& e) {
        REQUIRE_THAT(e.what(), Catch::Contains("smu_13_0_0.bin") && Catch::Contains("another ASIC"));
    }
    REQUIRE(rig.bus.violations().empty());
}

TEST_CASE("truncated firmware is refused by its parser") {
    TempDirs dirs;
    fs::path fw = dirs.root / "fw";
    fs::create_directories(fw / "amdgpu");
    for (const auto& e : fs::directory_iterator(fs::path(firmware_dir()) / "amdgpu")) {
        fs::copy_file(e.path(), fw / "amdgpu" / e.path().filename());
    }
    fs::resize_file(fw / "amdgpu" / "gc_11_0_0_mec.bin", 4000);
    Rig rig(dirs, sim::amdgpu::Asic::navi31);
    am::AmOptions o;
    o.firmware_dirs = {fw.string()};
    REQUIRE_THROWS_AS(rig.open(o), FirmwareError);
    REQUIRE(rig.bus.violations().empty());
}

TEST_CASE("a PSP command before the ring exists is a violation and never completes") {
    TempDirs dirs;
    Rig rig(dirs, sim::amdgpu::Asic::navi31);
    auto pci = rig.bus.open(rig.address);
    am::Mmio mmio(*pci, pci->bar(5));
    am::wait_ifwi_init(mmio);  // a chip that just powered on (amdgpu_discovery.c)
    am::Vram vram(mmio, &pci->bar(0), am::read_vram_size(mmio));
    am::DiscoveryResult disc = am::run_discovery(mmio, vram);
    am::Registers regs(mmio, am::register_table(*disc.asic), disc.bases);
    am::BootLayout layout = am::make_boot_layout(*disc.asic);
    uint64_t fb_base = uint64_t{regs.read(regs.table().mmmc_vm_fb_location_base) & 0xffffff} << 24;
    am::Psp psp(regs, vram, {fb_base, layout.psp_msg1, layout.psp_cmd, layout.psp_fence, layout.psp_ring, am::kPspRingSize, {}},
                [] {});
    REQUIRE_THROWS_AS(psp.submit(am::encode_autoload_rlc(), "AUTOLOAD_RLC"), TimeoutError);
    REQUIRE_FALSE(rig.bus.violations().empty());
    REQUIRE_THAT(rig.violations(), Catch::Contains("ring"));
}

TEST_CASE("a PSP error status names the command that failed") {
    TempDirs dirs;
    Rig rig(dirs, sim::amdgpu::Asic::navi48);
    rig.model->inject_psp_error(0x6, 0xffff000a);  // GFX_CMD_ID_LOAD_IP_FW
    try {
        rig.open();
        FAIL("bring-up ignored a PSP error");
    } catch (const ProtocolError& e) {
        REQUIRE_THAT(e.what(), Catch::Contains("LOAD_IP_FW") && Catch::Contains("0xffff000a"));
    }
}

TEST_CASE("an SMU that stops answering is a timeout naming the message") {
    TempDirs dirs;
    Rig rig(dirs, sim::amdgpu::Asic::navi31);
    rig.model->inject_smu_hang(true);
    try {
        rig.open();
        FAIL("bring-up went on with a silent SMU");
    } catch (const TimeoutError& e) {
        REQUIRE_THAT(e.what(), Catch::Contains("SMU") && Catch::Contains("SetDriverDramAddrHigh"));
    }
}

TEST_CASE("a full boot that fails half-way does not leave the chip looking warm") {
    TempDirs dirs;
    { Rig rig(dirs, sim::amdgpu::Asic::navi31); rig.open(); }  // clean and warm-startable
    {
        Rig rig(dirs, sim::amdgpu::Asic::navi31);
        rig.model->inject_smu_hang(true);  // no mode1 reset possible: the boot runs over the live sOS and fails
        am::AmOptions o;
        o.force_reset = true;
        REQUIRE_THROWS_AS(rig.open(o), Error);
    }
    Rig rig(dirs, sim::amdgpu::Asic::navi31);
    am::AmOptions o;
    o.inspect_only = true;
    auto d = rig.open(o);
    REQUIRE_FALSE(d->report().warm);  // SCRATCH_REG7 was cleared when that boot started
    REQUIRE_THAT(d->report().why_cold, Catch::Contains("SCRATCH_REG7"));
}

TEST_CASE("all-ones reads from a removed device are DeviceLostError") {
    TempDirs dirs;
    Rig rig(dirs, sim::amdgpu::Asic::navi31);
    auto d = rig.open();
    rig.bus.inject(rig.address, pci::sim::Fault{pci::sim::FaultKind::SurpriseRemoval});
    REQUIRE_THROWS_AS(d->gc_fault_status(), DeviceLostError);
    d->leave_dirty();
}

TEST_CASE("a discovery table with a bad checksum is refused") {
    TempDirs dirs;
    uint64_t table = 0;
    {
        Rig rig(dirs, sim::amdgpu::Asic::navi31);
        auto d = rig.open();
        table = d->discovery().table_offset;
    }
    {
        Rig rig(dirs, sim::amdgpu::Asic::navi31);
        {
            auto pci = rig.bus.open(rig.address);
            uint32_t v = pci->bar(0).read32(BarOffset(table + 0x100));
            pci->bar(0).write32(BarOffset(table + 0x100), v ^ 0x5a5a);
        }
        try {
            rig.open();
            FAIL("a corrupt discovery table was accepted");
        } catch (const ProtocolError& e) {
            REQUIRE_THAT(e.what(), Catch::Contains("discovery") && Catch::Contains("checksum"));
        }
    }
}

TEST_CASE("an unmapped GPU access is a page fault decoded from the IH ring") {
    for (sim::amdgpu::Asic which : kBoth) {
        TempDirs dirs;
        Rig rig(dirs, which);
        auto d = rig.open();
        uint64_t va = am::kVmStart + (64ull << 20);
        d->map(va, 64ull << 20, 2ull << 20);
        REQUIRE(rig.model->gpu_access(va + 0x1000, 4, true));
        uint64_t bad = am::kVmStart + (1ull << 30) + 0x3000;
        // An engine's write to an unmapped page latches L2_PROTECTION_FAULT_STATUS.RW = 1 (Linux
        // gmc_v11_0_process_interrupt reports it as a write).
        REQUIRE_FALSE(rig.model->gpu_access(bad, 4, true));
        auto pending = d->pending_interrupts();
        REQUIRE(pending.size() == 1);
        INFO(pending[0].describe());
        REQUIRE(pending[0].kind() == am::IhEntry::Kind::page_fault);
        REQUIRE(pending[0].fault_address() == (bad & ~0xfffull));
        REQUIRE(pending[0].client_id == am::kIhClientGfx);
        REQUIRE(d->gc_fault_status() != 0);
        auto faults = d->take_page_faults();
        REQUIRE(faults.size() == 1);
        INFO(faults[0].describe());
        REQUIRE(faults[0].hub == "GC");
        REQUIRE(faults[0].address == (bad & ~0xfffull));
        REQUIRE(faults[0].write());
        REQUIRE(faults[0].mapping_error());
        REQUIRE(d->pending_interrupts().empty());
        REQUIRE(d->gc_fault_status() == 0);  // cleared, so the next owner may start warm
        REQUIRE_FALSE(rig.model->gpu_access(bad, 4, false));
        auto again = d->take_page_faults();
        REQUIRE(again.size() == 1);
        REQUIRE_FALSE(again[0].write());
        INFO(rig.violations());
        REQUIRE(rig.bus.violations().empty());
    }
}

TEST_CASE("a second owner gets BusyError with the owner's pid") {
    TempDirs dirs;
    SECTION("in this process") {
        Rig first(dirs, sim::amdgpu::Asic::navi31);
        auto d = first.open();
        Rig second(dirs, sim::amdgpu::Asic::navi31);
        try {
            second.open();
            FAIL("two owners");
        } catch (const BusyError& e) {
            REQUIRE(e.owner_pid() == ::getpid());
        }
    }
    SECTION("in another process") {
        int ready[2], release[2];
        REQUIRE(::pipe(ready) == 0);
        REQUIRE(::pipe(release) == 0);
        pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            ::close(release[1]);  // or the read below never sees the parent's close
            ::close(ready[0]);
            int rc = 0;
            try {
                Rig rig(dirs, sim::amdgpu::Asic::navi31);
                auto d = rig.open();
                char c = 1;
                if (::write(ready[1], &c, 1) != 1) rc = 2;
                ::read(release[0], &c, 1);  // until the parent is done
            } catch (...) {
                rc = 3;
            }
            ::_exit(rc);
        }
        ::close(ready[1]);
        ::close(release[0]);
        char c = 0;
        REQUIRE(::read(ready[0], &c, 1) == 1);
        Rig rig(dirs, sim::amdgpu::Asic::navi31);
        pid_t owner = 0;
        try {
            rig.open();
        } catch (const BusyError& e) {
            owner = e.owner_pid();
        }
        ::close(release[1]);
        int status = 0;
        ::waitpid(child, &status, 0);
        REQUIRE(owner == child);
        REQUIRE(WIFEXITED(status));
        REQUIRE(WEXITSTATUS(status) == 0);
        ::close(ready[0]);
    }
}

TEST_CASE("a stale PSP ring from a previous owner is destroyed before ours is created") {
    TempDirs dirs;
    { Rig owner(dirs, sim::amdgpu::Asic::navi31); owner.open(); }  // leaves the sOS running with its ring
    Rig rig(dirs, sim::amdgpu::Asic::navi31);                      // the next "process"
    auto pci = rig.bus.open(rig.address);
    am::Mmio mmio(*pci, pci->bar(5));
    am::wait_ifwi_init(mmio);  // a chip that just powered on (amdgpu_discovery.c)
    am::Vram vram(mmio, &pci->bar(0), am::read_vram_size(mmio));
    am::DiscoveryResult disc = am::run_discovery(mmio, vram);
    am::Registers regs(mmio, am::register_table(*disc.asic), disc.bases);
    mmio.set_indirect(regs.address(regs.table().rsmu_index), regs.address(regs.table().rsmu_data));
    am::BootLayout layout = am::make_boot_layout(*disc.asic);
    uint64_t fb_base = uint64_t{regs.read(regs.table().mmmc_vm_fb_location_base) & 0xffffff} << 24;
    am::Psp psp(regs, vram, {fb_base, layout.psp_msg1, layout.psp_cmd, layout.psp_fence, layout.psp_ring, am::kPspRingSize, {}},
                [] {});
    REQUIRE(psp.sos_alive());
    REQUIRE(psp.ring_exists());
    REQUIRE(psp.ring_create());  // destroyed the previous owner's ring first
    // Ours now: the sOS reports the ring created (C2PMSG_64 ready, no error) with our size.
    REQUIRE((regs.read(regs.table().psp_c2pmsg_64) & 0x8000ffff) == 0x80000000);
    REQUIRE(regs.read(regs.table().psp_c2pmsg_71) == am::kPspRingSize);
    INFO(rig.violations());
    REQUIRE(rig.bus.violations().empty());
}

namespace {
// BAR5 as a driver with a smaller register BAR sees it: accesses forwarded, size cut.
struct SmallBar5 final : pci::MmioHandler {
    explicit SmallBar5(pci::MmioRegion& real) : bar(real) {}
    uint64_t mmio_read(uint64_t offset, unsigned width) override {
        ++reads;
        return width == 4 ? bar.read32(BarOffset(offset)) : bar.read64(BarOffset(offset));
    }
    void mmio_write(uint64_t offset, unsigned width, uint64_t value) override {
        ++writes;
        if (width == 4) {
            bar.write32(BarOffset(offset), static_cast<uint32_t>(value));
        } else {
            bar.write64(BarOffset(offset), value);
        }
    }
    pci::MmioRegion& bar;
    uint64_t reads = 0, writes = 0;
};
}  // namespace

TEST_CASE("registers past BAR5 go through the RSMU index/data pair; small-BAR VRAM through MM_INDEX/MM_DATA") {
    TempDirs dirs;
    Rig rig(dirs, sim::amdgpu::Asic::navi31);
    { rig.open(); }  // a booted chip: fb location and markers set
    auto pci = rig.bus.open(rig.address);
    am::Mmio direct(*pci, pci->bar(5));
    am::Vram bar0(direct, &pci->bar(0), am::read_vram_size(direct));
    am::DiscoveryResult disc = am::run_discovery(direct, bar0);
    am::Registers regs(direct, am::register_table(*disc.asic), disc.bases);

    // A 256 KiB register BAR: MMHUB (base 0x1a000 dwords = 0x68000 bytes) is past it.
    SmallBar5 small_handler(pci->bar(5));
    pci::MmioRegion small_region("small BAR5", &small_handler, 256 << 10);
    am::Mmio indirect(*pci, small_region);
    uint32_t fb = regs.read(regs.table().mmmc_vm_fb_location_base);
    uint32_t fb_addr = regs.address(regs.table().mmmc_vm_fb_location_base);
    REQUIRE_FALSE(indirect.direct(fb_addr));
    REQUIRE_THROWS_WITH(indirect.read(fb_addr, "MMMC_VM_FB_LOCATION_BASE"), Catch::Contains("RSMU"));
    indirect.set_indirect(regs.address(regs.table().rsmu_index), regs.address(regs.table().rsmu_data));
    REQUIRE(indirect.read(fb_addr, "MMMC_VM_FB_LOCATION_BASE") == fb);
    REQUIRE(fb == 0x8000);  // the contract's fb_base 0x80_0000_0000 >> 24
    REQUIRE(small_handler.writes == 1);  // RSMU_INDEX = byte address
    REQUIRE(small_handler.reads == 1);   // RSMU_DATA
    uint32_t scratch = regs.address(regs.table().scratch_reg7);
    REQUIRE(indirect.direct(scratch));
    REQUIRE(indirect.read(scratch) == am::kLayoutMagic);

    // Small BAR0: the same discovery table through MM_INDEX/MM_DATA.
    am::Vram windowed(direct, nullptr, bar0.size());
    REQUIRE_FALSE(windowed.large_bar());
    std::vector<std::byte> a(256), b(256);
    bar0.read(disc.table_offset, a);
    windowed.read(disc.table_offset, b);
    REQUIRE(a == b);
    REQUIRE(am::run_discovery(direct, windowed).asic->name == "navi31");
    INFO(rig.violations());
    REQUIRE(rig.bus.violations().empty());
}

}  // namespace am_sim_test
