// The bring-up and queue steps a real Navi31/Navi48 needs: for each, drivers/am with that
// one step left out (AmOptions::skip_step) makes the simulated chip fail with a violation that
// names the missing step; with every step, the same work runs and the chip reports nothing.
// The simulated chip starts from the reset state (drivers/sim/amdgpu/register_catalog.cpp) and its
// engines obey it: that is what each negative case exercises.
#include "base/error.hpp"
#include "drivers/am/am_device.hpp"
#include "drivers/am/hcq_device.hpp"
#include "drivers/am/program.hpp"
#include "drivers/pci/sim_bus.hpp"
#include "drivers/sim/amdgpu/navi.hpp"
#include "hcq/device.hpp"
#include "tests/hcq/support.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace am_realism_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using am::SkipStep;
using sim::amdgpu::Asic;

namespace {

std::string firmware_dir() {
    const char* d = std::getenv("BAREGPU_TEST_FIRMWARE_DIR");
    if (d == nullptr) throw std::runtime_error("BAREGPU_TEST_FIRMWARE_DIR is not set: run the tests through meson test");
    return d;
}

// One simulated chip on its own bus, state dir and lock dir.
struct Chip {
    fs::path root;
    std::shared_ptr<pci::sim::SimBus> bus = std::make_shared<pci::sim::SimBus>();
    pci::PciAddress address;
    sim::amdgpu::NaviModel* model = nullptr;
    Asic asic;

    explicit Chip(Asic which) : asic(which) {
        std::string tmpl = (fs::temp_directory_path() / "am-realism-XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        root = tmpl;
        fs::create_directories(root / "state");
        fs::create_directories(root / "locks");
        ::setenv("BAREGPU_LOCK_DIR", (root / "locks").c_str(), 1);
        ::unsetenv("BAREGPU_AM_RESET");
        sim::amdgpu::ModelOptions o;
        o.asic = which;
        o.state_dir = (root / "state").string();
        o.firmware_dir = firmware_dir();
        address = bus->attach(sim::amdgpu::make_model(o));
        model = &dynamic_cast<sim::amdgpu::NaviModel&>(bus->model(address));
    }
    ~Chip() {
        std::error_code ec;
        fs::remove_all(root, ec);
    }
    std::string name() const { return asic == Asic::navi31 ? "navi31" : "navi48"; }
    std::unique_ptr<am::AmDevice> open(SkipStep skip) {
        am::AmOptions o;
        o.lock_key = "sim-am-" + name();
        o.firmware_dirs = {firmware_dir()};
        o.skip_step = skip;
        return am::AmDevice::open(bus->open(address), std::move(o));
    }
    std::shared_ptr<am::AmHcqDevice> hcq(SkipStep skip) {
        am::AmHcqOptions o;
        o.name = "sim-am:" + name();
        o.isa = am::KernelIsa::host;
        o.keepalive = bus;
        return am::AmHcqDevice::create(open(skip), std::move(o));
    }
    std::string violations() const {
        std::string out;
        for (const auto& v : bus->violations()) out += v.describe() + "\n";
        return out;
    }
    bool has(const std::string& fragment) const { return violations().find(fragment) != std::string::npos; }
};

const Asic kBoth[] = {Asic::navi31, Asic::navi48};

// A fill kernel on the compute queue; true when its signal arrived within the time given.
bool compute_runs(hcq::Device& dev, std::chrono::milliseconds within, int64_t byte_offset = 0) {
    auto fill = test::load_kernel(dev, "fill", "fill");
    const uint32_t n = 256;
    hcq::Buffer a = dev.allocate(4 * n + 64);
    hcq::Signal done = dev.new_signal(0, "done");
    hcq::KernelArgs args(*fill);
    args.address(0, GpuVirtualAddress(a.address().value() + byte_offset)).value(0, n).value(1, 7);
    dev.compute_queue().exec(*fill, args, {n / 64}, {64}).signal(done, 1).submit();
    return done.try_wait(1, within);
}

// A copy on the SDMA queue; true when its signal arrived within the time given.
bool copy_runs(hcq::Device& dev, std::chrono::milliseconds within) {
    hcq::Buffer a = dev.allocate(4096), b = dev.allocate(4096);
    hcq::Signal done = dev.new_signal(0, "done");
    dev.copy_queue().copy(b, a, 4096).signal(done, 1).submit();
    return done.try_wait(1, within);
}

}  // namespace

TEST_CASE("realism: with every step, both chips boot, run kernels and copies, and report nothing") {
    for (Asic which : kBoth) {
        Chip chip(which);
        INFO(chip.name());
        {
            auto dev = chip.hcq(SkipStep::none);
            CHECK(compute_runs(*dev, 5s));
            CHECK(compute_runs(*dev, 5s, /*byte_offset=*/2));  // unaligned is allowed: SH_MEM_CONFIG UNALIGNED
            CHECK(copy_runs(*dev, 5s));
            dev->synchronize();
        }
        INFO(chip.violations());
        CHECK(chip.bus->violations().empty());
        CHECK(chip.model->dropped_doorbells() == 0);
    }
}

TEST_CASE("realism: the SMU starts before the GC waits for its RLC autoload (amdgpu_discovery.c block order)") {
    for (Asic which : kBoth) {
        Chip chip(which);
        INFO(chip.name());
        CHECK_THROWS_AS(chip.open(SkipStep::smu_before_rlc_autoload), TimeoutError);
        INFO(chip.violations());
        CHECK(chip.has("RLC autoload waits for the SMU"));
        CHECK(chip.has("EnableAllSmuFeatures"));
    }
}

TEST_CASE("realism: the MEC runs from the firmware's start address only after CP_MEC_RS64_PRGRM_CNTR_START and a pipe reset") {
    for (Asic which : kBoth) {
        Chip chip(which);
        INFO(chip.name());
        {
            auto dev = chip.hcq(SkipStep::mec_program_counter);
            CHECK_FALSE(compute_runs(*dev, 300ms));
        }
        INFO(chip.violations());
        CHECK(chip.has("CP_MEC_RS64_PRGRM_CNTR_START"));
        CHECK(chip.has("would run from PC 0x800 (CP_MEC_RS64_PRGRM_CNTR_START 0x800, _HI 0x0"));
        CHECK(chip.has("firmware starts at PC 0x1c00000000c00 (CP_MEC_RS64_PRGRM_CNTR_START 0xc00, _HI 0x1c000"));
    }
}

TEST_CASE("realism: the MEC drops doorbells outside CP_MEC_DOORBELL_RANGE_LOWER/UPPER") {
    for (Asic which : kBoth) {
        Chip chip(which);
        INFO(chip.name());
        {
            auto dev = chip.hcq(SkipStep::mec_doorbell_range);
            CHECK_FALSE(compute_runs(*dev, 300ms));
            CHECK(copy_runs(*dev, 5s));  // SDMA's route does not pass the MEC
        }
        INFO(chip.violations());
        CHECK(chip.has("outside CP_MEC_DOORBELL_RANGE_LOWER/UPPER [0x110, 0xffc]"));
        CHECK(chip.model->dropped_doorbells() >= 1);
    }
}

TEST_CASE("realism: a halted MEC activates no queue (CP_MEC_RS64_CNTL resets with MEC_HALT)") {
    for (Asic which : kBoth) {
        Chip chip(which);
        INFO(chip.name());
        {
            auto dev = chip.hcq(SkipStep::mec_unhalt);
            CHECK_FALSE(compute_runs(*dev, 300ms));
        }
        INFO(chip.violations());
        CHECK(chip.has("the MEC is halted"));
        CHECK(chip.has("MEC_HALT"));
    }
}

TEST_CASE("realism: without the S2A CP routes (gc_doorbell_init) no compute doorbell reaches the CP") {
    for (Asic which : kBoth) {
        Chip chip(which);
        INFO(chip.name());
        {
            auto dev = chip.hcq(SkipStep::cp_doorbell_route);
            CHECK_FALSE(compute_runs(*dev, 300ms));
        }
        INFO(chip.violations());
        CHECK(chip.has("no S2A doorbell route to the CP"));
        CHECK(chip.has(which == Asic::navi48 ? "GDC_S2A0_S2A_DOORBELL_ENTRY_0_CTRL" : "S2A_DOORBELL_ENTRY_0_CTRL"));
    }
}

TEST_CASE("realism: without the S2A SDMA route (sdma_doorbell_range) the copy queue's doorbell is dropped") {
    for (Asic which : kBoth) {
        Chip chip(which);
        INFO(chip.name());
        {
            auto dev = chip.hcq(SkipStep::sdma_doorbell_route);
            CHECK_FALSE(copy_runs(*dev, 300ms));
        }
        INFO(chip.violations());
        CHECK(chip.has("has no S2A route to SDMA"));
        CHECK(chip.has("DOORBELL_ENTRY_2_CTRL"));
    }
}

TEST_CASE("realism: a halted SDMA engine (SDMA0_F32_CNTL / SDMA0_MCU_CNTL) runs no copy") {
    for (Asic which : kBoth) {
        Chip chip(which);
        INFO(chip.name());
        {
            auto dev = chip.hcq(SkipStep::sdma_unhalt);
            CHECK(compute_runs(*dev, 5s));
            CHECK_FALSE(copy_runs(*dev, 300ms));
        }
        INFO(chip.violations());
        CHECK(chip.has("SDMA0 is halted"));
        CHECK(chip.has(which == Asic::navi48 ? "SDMA0_MCU_CNTL" : "SDMA0_F32_CNTL"));
    }
}

TEST_CASE("realism: SDMA0_QUEUE0_RB_CNTL keeps RB_PRIV, RPTR writeback and the WPTR poll enable") {
    for (Asic which : kBoth) {
        Chip chip(which);
        INFO(chip.name());
        {
            auto dev = chip.hcq(SkipStep::sdma_rb_cntl_fields);
            CHECK_FALSE(copy_runs(*dev, 300ms));
        }
        INFO(chip.violations());
        CHECK(chip.has("has RB_PRIV clear, RPTR_WRITEBACK_ENABLE clear"));
        CHECK(chip.has("WPTR_POLL_ENABLE"));
    }
}

TEST_CASE("realism: SH_MEM_CONFIG left in DWORD alignment mode faults a misaligned access") {
    for (Asic which : kBoth) {
        Chip chip(which);
        INFO(chip.name());
        {
            auto dev = chip.hcq(SkipStep::sh_mem_config);
            CHECK(compute_runs(*dev, 5s));  // aligned buffers run
            CHECK_FALSE(compute_runs(*dev, 300ms, /*byte_offset=*/2));
        }
        INFO(chip.violations());
        CHECK(chip.has("SH_MEM_CONFIG"));
        CHECK(chip.has("ALIGNMENT_MODE 0, not UNALIGNED 3"));
    }
}

TEST_CASE("realism: GC 12's VM_CONTEXT0_CNTL written with GC 11's field layout retries range faults forever") {
    Chip chip(Asic::navi48);
    auto d = chip.open(SkipStep::vm_context_gc11_layout);
    const uint64_t outside = am::kVmEnd + 1 + 0x1000;  // past PAGE_TABLE_END: a RANGE protection fault
    CHECK_FALSE(chip.model->gpu_access(outside, 4, false));
    CHECK(d->pending_interrupts().empty());  // not reported
    INFO(chip.violations());
    CHECK(chip.has("RETRY_OTHER_FAULT set (bit 9 in GC 12 / MMHUB 4.1's field layout"));
    CHECK(chip.has("RANGE_PROTECTION_FAULT_ENABLE_INTERRUPT"));

    // With GC 12's own layout the same access is a reported fault.
    Chip good(Asic::navi48);
    auto g = good.open(SkipStep::none);
    CHECK_FALSE(good.model->gpu_access(outside, 4, false));
    auto faults = g->take_page_faults();
    REQUIRE(faults.size() == 1);
    CHECK(faults[0].hub == "GC");
    INFO(good.violations());
    CHECK(good.bus->violations().empty());
}

TEST_CASE("realism: TLB invalidations need VM_INVALIDATE_ENG*_ADDR_RANGE programmed (reset value 0)") {
    for (Asic which : kBoth) {
        Chip chip(which);
        INFO(chip.name());
        auto d = chip.open(SkipStep::invalidate_addr_range);
        INFO(chip.violations());
        CHECK(chip.has("ADDR_RANGE_LO32 0x0, HI32 0x0; their reset value is 0"));
        CHECK(chip.has("translations above stay stale"));
    }
}

TEST_CASE("realism: every MM hub invalidation is followed by the MMHUB private invalidation") {
    for (Asic which : kBoth) {
        Chip chip(which);
        INFO(chip.name());
        auto d = chip.open(SkipStep::mmhub_private_invalidation);
        d->flush_tlbs();  // the second MM hub flush finds the first one unfinished
        INFO(chip.violations());
        CHECK(chip.has("MMHUB private invalidation"));
        CHECK(chip.has("MMVM_L2_BANK_SELECT_RESERVED_CID2"));
    }
}

TEST_CASE("realism: the IH ring needs IH_RB_CNTL.MC_SPACE to be written to") {
    for (Asic which : kBoth) {
        Chip chip(which);
        INFO(chip.name());
        auto d = chip.open(SkipStep::ih_mc_space);
        CHECK_FALSE(chip.model->gpu_access(am::kVmStart + (1ull << 30), 4, false));
        CHECK(d->pending_interrupts().empty());  // the IH wrote nothing
        INFO(chip.violations());
        CHECK(chip.has("MC_SPACE (bits 30:28) is 0"));
    }
}

TEST_CASE("realism: discovery waits for the IFWI init of a chip that just powered on (MP0_SMN_C2PMSG_33 bit 31)") {
    for (Asic which : kBoth) {
        Chip chip(which);  // attached now: its IFWI init runs for the model's first 60 ms
        INFO(chip.name());
        CHECK_THROWS_AS(chip.open(SkipStep::discovery_ifwi_wait), ProtocolError);
        INFO(chip.violations());
        CHECK(chip.has("RCC_CONFIG_MEMSIZE read while the IFWI init is still running"));
    }
}

TEST_CASE("realism: code loaded where other code ran needs GLI_INV and GL2_INV before it runs (emit_mem_sync)") {
    for (SkipStep skip : {SkipStep::none, SkipStep::code_cache_invalidate}) {
        for (Asic which : kBoth) {
            Chip chip(which);
            INFO(chip.name() << " skip " << am::to_string(skip));
            auto dev = chip.hcq(skip);
            uint64_t first_code = 0;
            {
                CHECK(compute_runs(*dev, 5s));  // the instruction cache now holds `fill`
                auto fill = test::load_kernel(*dev, "fill", "fill");
                first_code = dynamic_cast<const am::AmProgram&>(*fill).code().address().value();
                dev->synchronize();
            }
            dev->synchronize();  // both `fill` loads are freed: their code ranges go back to the allocator
            auto copy = test::load_kernel(*dev, "fill", "copy_words");
            const uint64_t code = dynamic_cast<const am::AmProgram&>(*copy).code().address().value();
            hcq::Buffer src = dev->allocate(256), dst = dev->allocate(256);
            hcq::Signal done = dev->new_signal(0, "done");
            dev->compute_queue().exec(*copy, hcq::KernelArgs(*copy, {src, dst}, {64}), {64}, {1}).signal(done, 1).submit();
            // Without the invalidate the model refuses the dispatch: once its engines are idle the
            // signal can no longer come (no need to wait out a timeout).
            if (skip != SkipStep::none) REQUIRE(chip.model->wait_engines_idle());
            const bool ran = done.try_wait(1, skip == SkipStep::none ? 5s : 10ms);
            INFO(chip.violations());
            if (skip == SkipStep::none) {
                CHECK(ran);
                CHECK(chip.bus->violations().empty());
            } else {
                // Only a load at an address the cache holds is stale; the allocator hands the same range back.
                REQUIRE(code == first_code);
                CHECK_FALSE(ran);
                CHECK(chip.has("changed since a dispatch fetched it into the instruction cache"));
                CHECK(chip.has("GLI_INV"));
            }
        }
    }
}

}  // namespace am_realism_test
