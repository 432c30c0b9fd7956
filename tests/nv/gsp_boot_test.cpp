// drivers/nv's GSP boot against the simulated AD102 (drivers/sim/nvgpu), with the real ad102
// booter_load / bootloader 570.144 from firmware/ and a synthetic GSP-RM ELF (the real
// gsp-570.144.bin, about 63 MB, is not in firmware/): a clean boot with zero model violations,
// then the negative cases (stale WPR2, bad RPC checksum, silent GSP, wrong firmware, missing FWSEC,
// falcon steps out of order, GFW boot that never ends), each asserting its specific error.
#include "drivers/nv/booter.hpp"
#include "drivers/nv/falcon.hpp"
#include "drivers/nv/gsp_boot.hpp"
#include "drivers/nv/gsp_rpc_functions.hpp"
#include "drivers/pci/sim_bus.hpp"
#include "drivers/sim/nvgpu/ad102.hpp"
#include "firmware-loader/search_path.hpp"
#include "tests/nv/gsp_firmware.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <string>

namespace gsp_boot_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
namespace nvsim = baregpu::sim::nvgpu;
using baregpu::test::nv::firmware;
using baregpu::test::nv::firmware_dir;
using baregpu::test::nv::synthetic_gsp_elf;

namespace {

// The tiny RM stand-in: echoes the parameters back with the first word incremented.
struct EchoServer : nvsim::GspRpcServer {
    std::vector<uint32_t> functions;
    std::vector<std::byte> last_params;
    bool reply_size_only = false;  // answer with the parameter byte count instead of an echo
    uint32_t handle(uint32_t function, std::span<const std::byte> params, std::vector<std::byte>& reply) override {
        functions.push_back(function);
        last_params.assign(params.begin(), params.end());
        if (reply_size_only) {
            const auto n = static_cast<uint32_t>(params.size());
            reply.resize(4);
            std::memcpy(reply.data(), &n, 4);
            return nvsim::kNvOk;
        }
        reply.assign(params.begin(), params.end());
        if (reply.size() >= 4) {
            uint32_t v;
            std::memcpy(&v, reply.data(), 4);
            ++v;
            std::memcpy(reply.data(), &v, 4);
        }
        return nvsim::kNvOk;
    }
};

struct Rig {
    pci::sim::SimBus bus;
    nvsim::Ad102Model* model = nullptr;
    pci::PciAddress address;
    std::unique_ptr<pci::PciDevice> pci;
    std::shared_ptr<EchoServer> server = std::make_shared<EchoServer>();

    explicit Rig(nvsim::Ad102Options o = {}) {
        o.server = server;
        o.firmware_dir = firmware_dir();
        auto m = nvsim::make_ad102(std::move(o));
        model = m.get();
        address = bus.attach(std::move(m));
        pci = bus.open(address);
    }
    std::string violations() const {
        std::string out;
        for (const auto& v : bus.violations()) out += v.describe() + "\n";
        return out;
    }
};

std::vector<std::byte> words(std::initializer_list<uint32_t> w) {
    std::vector<std::byte> b(w.size() * 4);
    size_t i = 0;
    for (uint32_t v : w) std::memcpy(b.data() + 4 * i++, &v, 4);
    return b;
}

}  // namespace

TEST_CASE("sim-nv:ad102 boots GSP-RM through the driver with the real booter and zero violations", "[nv][gsp-boot]") {
    const nv::GspFirmware fw = firmware();
    Rig rig;
    auto gpu = nv::GspDevice::open(*rig.pci, fw);
    INFO(rig.violations());
    REQUIRE(rig.bus.violations().empty());
    REQUIRE(rig.model->gsp_initialized());
    // GSP-RM took BAR1 into its virtual mode; the driver put it back to a physical window after GSP_INIT_DONE.
    CHECK(rig.pci->bar(0).read32(BarOffset{0x1704}) == 0);

    const nv::BootReport& r = gpu->report();
    CHECK(r.chip == "ad102");
    CHECK_FALSE(r.function_reset);
    CHECK(r.vram_bytes == (uint64_t{512} << 20));
    CHECK(r.frts_offset == r.vram_bytes - (uint64_t{2} << 20));
    std::vector<std::string> names;
    for (const auto& s : r.stages) names.push_back(s.name);
    CHECK(names == std::vector<std::string>{"chip id", "firmware", "stale state", "GFW boot", "VRAM", "FWSEC-FRTS",
                                            "GSP-RM image", "booter", "message queues", "GSP_INIT_DONE"});
    for (const auto& s : r.stages) INFO(s.name << ": " << s.detail);
    CHECK(r.stages.back().detail == "1 CPU-sequencer run(s)");
    CHECK(rig.model->rpcs_seen() == std::vector<uint32_t>{nv::gsp::kFnGspSetSystemInfo, nv::gsp::kFnSetRegistry});
    CHECK(rig.model->registry_keys() == std::vector<std::string>{"RMForcePcieConfigSave", "RMSecBusResetEnable"});
    CHECK(rig.model->wpr2_up());

    // After boot the RPC seam answers: the reply matched by function (the model's replies carry their own sequence
    // numbers, not the request's), payload from the server.
    const nv::RpcReply a = gpu->rpc().call(nv::gsp::kFnGspRmControl, words({41, 7}));
    CHECK(a.function == nv::gsp::kFnGspRmControl);
    CHECK(a.rpc_result == 0);
    CHECK(a.payload == words({42, 7}));
    const nv::RpcReply b = gpu->rpc().call(nv::gsp::kFnGspRmAlloc, words({99}));
    CHECK(b.sequence == a.sequence + 1);
    CHECK(b.payload == words({100}));
    CHECK(rig.server->functions == std::vector<uint32_t>{nv::gsp::kFnGspRmControl, nv::gsp::kFnGspRmAlloc});

    // An asynchronous OS_ERROR_LOG waiting in the status queue is serviced on the way to a reply.
    std::vector<std::byte> log(12 + 0x100);
    std::memcpy(log.data() + 12, "Xid 31: simulated", 17);
    rig.model->post_event(nv::gsp::kEvOsErrorLog, log);
    rig.model->post_event(nv::gsp::kEvMmuFaultQueued, {});
    CHECK(gpu->rpc().call(nv::gsp::kFnGspRmControl, words({1})).payload == words({2}));
    CHECK(gpu->rpc().events().mmu_faults == 1);
    REQUIRE(gpu->rpc().events().os_errors.size() == 1);
    CHECK(gpu->rpc().events().os_errors[0] == "Xid 31: simulated");

    // An RPC larger than one record goes as CONTINUATION_RECORDs; the server gets it whole.
    std::vector<std::byte> big(150000);
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::byte>(i * 7);
    rig.server->reply_size_only = true;
    const nv::RpcReply c = gpu->rpc().call(nv::gsp::kFnGspRmControl, big);
    CHECK(c.payload == words({150000}));
    CHECK(rig.server->last_params == big);

    gpu->close();
    CHECK(rig.model->gsp_unloaded());
    CHECK_FALSE(rig.model->wpr2_up());  // UNLOADING_GUEST_DRIVER leaves the chip clean
    INFO(rig.violations());
    CHECK(rig.bus.violations().empty());
}

TEST_CASE("stale WPR2 at open takes the function-reset path, then boots", "[nv][gsp-boot][negative]") {
    nvsim::Ad102Options o;
    o.stale_wpr2 = true;
    Rig rig(o);
    REQUIRE(rig.model->wpr2_up());
    std::unique_ptr<nv::GspDevice> gpu;
    {
        const nv::GspFirmware fw = firmware();  // needed only while booting
        gpu = nv::GspDevice::open(*rig.pci, fw);
    }
    INFO(rig.violations());
    CHECK(rig.bus.violations().empty());
    CHECK(gpu->report().function_reset);
    CHECK(rig.model->function_resets() == 1);
    CHECK(rig.model->gsp_initialized());
    CHECK(gpu->rpc().call(nv::gsp::kFnGspRmControl, words({5})).payload == words({6}));
    gpu.reset();  // the destructor unloads GSP-RM too
    CHECK(rig.model->gsp_unloaded());
    CHECK_FALSE(rig.model->wpr2_up());
}

TEST_CASE("a reply with a bad checksum from GSP is a ProtocolError", "[nv][gsp-rpc][negative]") {
    const nv::GspFirmware fw = firmware();
    Rig rig;
    auto gpu = nv::GspDevice::open(*rig.pci, fw);
    rig.model->corrupt_next_reply();
    REQUIRE_THROWS_MATCHES(gpu->rpc().call(nv::gsp::kFnGspRmControl, words({1})), ProtocolError,
                           Catch::Matchers::Predicate<ProtocolError>([](const ProtocolError& e) {
                               return std::string(e.what()).find("checksum") != std::string::npos &&
                                      std::string(e.what()).find("function 76") != std::string::npos;
                           }, "names the checksum and the function"));
}

// A device torn down without a clean GSP unload frees the message queues while the model's engines
// may still post events (a channel fault's OS_ERROR_LOG). Real GSP's writes would then fault in the
// IOMMU; the model must not write into the freed pages (it did: SIGSEGV in p2p-sim's teardown).
TEST_CASE("GSP-RM writes nothing into its queues once the CPU has freed them", "[nv][gsp-rpc][negative]") {
    const nv::GspFirmware fw = firmware();
    Rig rig;
    auto gpu = nv::GspDevice::open(*rig.pci, fw);
    rig.model->corrupt_next_reply();
    CHECK_THROWS_AS(gpu->close(), ProtocolError);  // the unload's reply is refused: no clean hand-back
    gpu.reset();  // the queues' DMA memory is unmapped and freed
    std::vector<std::byte> log(12 + 0x100);
    std::memcpy(log.data() + 12, "Xid 31: after teardown", 22);
    rig.model->post_event(nv::gsp::kEvOsErrorLog, log);
    rig.model->post_event(nv::gsp::kEvMmuFaultQueued, {});
    CHECK(rig.model->gsp_unloaded());
}

TEST_CASE("GSP that stops replying gives a TimeoutError naming the RPC", "[nv][gsp-rpc][negative]") {
    const nv::GspFirmware fw = firmware();
    Rig rig;
    auto gpu = nv::GspDevice::open(*rig.pci, fw);
    rig.model->stop_replying(true);
    REQUIRE_THROWS_MATCHES(gpu->rpc().call(nv::gsp::kFnGspRmControl, words({1}), std::chrono::milliseconds(50)),
                           TimeoutError, Catch::Matchers::Predicate<TimeoutError>([](const TimeoutError& e) {
                               return std::string(e.what()).find("GSP_RM_CONTROL (76)") != std::string::npos;
                           }, "names GSP_RM_CONTROL (76)"));
    rig.model->stop_replying(false);
}

TEST_CASE("wrong-chip GSP-RM firmware is refused before anything reaches the device", "[nv][gsp-boot][negative]") {
    const nv::GspFirmware fw = firmware({"gb20x"});  // a Blackwell-only signature
    Rig rig;
    rig.bus.reset_counters(rig.address);
    REQUIRE_THROWS_MATCHES(nv::GspDevice::open(*rig.pci, fw), FirmwareError,
                           Catch::Matchers::Predicate<FirmwareError>([](const FirmwareError& e) {
                               return e.field() == ".fwsignature_ad10x section" &&
                                      e.found().find(".fwsignature_gb20x") != std::string::npos;
                           }, "names the missing .fwsignature_ad10x and what was there"));
    const auto c = rig.bus.counters(rig.address);
    CHECK(c.mmio_writes == 0);
    CHECK(c.dma_reads == 0);
    CHECK(c.mmio_reads <= 2);  // only PMC_BOOT_0 / BOOT_42
}

TEST_CASE("a VBIOS without FWSEC is a clear FirmwareError", "[nv][gsp-boot][negative]") {
    const nv::GspFirmware fw = firmware();
    nvsim::Ad102Options o;
    o.fwsec_in_vbios = false;
    Rig rig(o);
    REQUIRE_THROWS_MATCHES(nv::GspDevice::open(*rig.pci, fw), FirmwareError,
                           Catch::Matchers::Predicate<FirmwareError>([](const FirmwareError& e) {
                               return e.field() == "falcon ucode table ApplicationID" &&
                                      e.file().find("VBIOS") != std::string::npos;
                           }, "names the ucode table and the VBIOS"));
    CHECK(rig.bus.violations().empty());
}

TEST_CASE("falcon DMA before the engine reset is a model violation", "[nv][falcon][negative]") {
    Rig rig;
    rig.pci->set_bus_master(true);
    nv::Falcon gsp(*rig.pci, "GSP", 0x110000);
    gsp.write(0x624, 1u << 7);  // FBIF_CTL.ALLOW_PHYS_NO_CTX
    gsp.write(0x10c, 0);        // DMACTL
    gsp.write(0x600, 1u << 2);  // FBIF_TRANSCFG(0): local FB, physical
    gsp.dma_load(true, 0, 0, 256, false);
    const auto v = rig.bus.violations();
    REQUIRE(v.size() == 1);
    CHECK(v[0].what.find("DMA before the engine was reset") != std::string::npos);
    // After a proper reset the same transfer is accepted.
    rig.bus.clear_violations();
    gsp.reset(0);
    gsp.write(0x624, 1u << 7);
    gsp.write(0x10c, 0);
    gsp.dma_load(true, 0, 0, 256, false);  // FBIF_TRANSCFG(0) as power-on left it: refused
    REQUIRE(rig.bus.violations().size() == 1);
    CHECK(rig.bus.violations()[0].what.find("FBIF_TRANSCFG") != std::string::npos);
    rig.bus.clear_violations();
    gsp.write(0x600, 1u << 2);
    gsp.dma_load(true, 0, 0, 256, false);
    CHECK(rig.bus.violations().empty());
}

TEST_CASE("starting SEC2 without the booter loaded is a model violation", "[nv][falcon][negative]") {
    Rig rig;
    rig.pci->set_bus_master(true);
    nv::Falcon sec2(*rig.pci, "SEC2", 0x840000);
    sec2.reset(0);
    sec2.write(0x119c, 1);   // ENGIDMASK
    sec2.write(0x1180, 1);   // MOD_SEL
    sec2.write(0x100, 1u << 1);  // CPUCTL.STARTCPU
    const auto v = rig.bus.violations();
    REQUIRE(v.size() == 1);
    CHECK(v[0].what.find("SEC2 started without the booter loaded") != std::string::npos);
}

TEST_CASE("FWSEC started without the FRTS command patched is a model violation and raises no WPR2",
          "[nv][falcon][negative]") {
    Rig rig;
    rig.pci->set_bus_master(true);
    const auto& rom = rig.model->vbios();
    // The unpatched FWSEC straight from the ROM, loaded and started the way execute_hs does.
    std::vector<std::byte> imem(rom.imem().begin(), rom.imem().end()), dmem(rom.dmem().begin(), rom.dmem().end());
    rig.pci->bar(1).write_block(BarOffset{0}, imem);
    rig.pci->bar(1).write_block(BarOffset{0x80000}, dmem);
    nv::Falcon gsp(*rig.pci, "GSP", 0x110000);
    gsp.reset(0);
    nv::HsUcodeLoad u{"FWSEC (unpatched)", 0, static_cast<uint32_t>(imem.size()), 0, 0, 0x80000,
                      static_cast<uint32_t>(dmem.size()), rom.pkc_data_offset, rom.engine_id_mask, rom.ucode_id, 0};
    gsp.execute_hs(u);
    const auto v = rig.bus.violations();
    REQUIRE(v.size() == 1);
    CHECK(v[0].what.find("FWSEC started without the FRTS command patched") != std::string::npos);
    CHECK_FALSE(rig.model->wpr2_up());
}

TEST_CASE("Hopper and Blackwell reach their BootFlow seam and say what is missing", "[nv][gsp-boot][negative]") {
    const nv::GspFirmware fw = firmware();
    const std::pair<uint32_t, std::string> chips[] = {{0x1b200000, "FSP chain-of-trust"}, {0x18000000, "Hopper (GH100)"}};
    for (const auto& chip : chips) {
        const uint32_t boot42 = chip.first;
        const std::string& words_expected = chip.second;  // named, not bound: the predicate captures it
        nvsim::Ad102Options o;
        o.pmc_boot42 = boot42;
        Rig rig(o);
        rig.bus.reset_counters(rig.address);
        REQUIRE_THROWS_MATCHES(nv::GspDevice::open(*rig.pci, fw), UnsupportedError,
                               Catch::Matchers::Predicate<UnsupportedError>([&](const UnsupportedError& e) {
                                   return std::string(e.what()).find(words_expected) != std::string::npos;
                               }, "names " + words_expected));
        CHECK(rig.bus.counters(rig.address).mmio_writes == 0);
    }
}

TEST_CASE("GFW boot that never finishes is a bounded TimeoutError naming the scratch register", "[nv][gsp-boot][negative]") {
    const nv::GspFirmware fw = firmware();
    nvsim::Ad102Options o;
    o.gfw_boot_hangs = true;
    Rig rig(o);
    REQUIRE_THROWS_MATCHES(nv::GspDevice::open(*rig.pci, fw), TimeoutError,
                           Catch::Matchers::Predicate<TimeoutError>([](const TimeoutError& e) {
                               const std::string w = e.what();
                               return w.find("GFW boot") != std::string::npos &&
                                      w.find("GROUP_05(0) 0xf") != std::string::npos;
                           }, "names GFW boot, the register and the last value"));
}

TEST_CASE("the booter is loaded the GA102+ way: secure app 0 at IMEM 0, tagged and started at its virtual address", "[nv][gsp-boot]") {
    // RM kernel_gsp_booter.c (imemPa 0, imemVa = app 0's code offset) and kernel_gsp_falcon_ga102.c (DMATRFFBOFFS and
    // BOOTVEC = imemVa); the ad102 booter_load-570.144 header puts app 0 at 0x100 and has no separate boot code to load.
    const nv::GspFirmware fw = firmware();
    const nv::BooterImage b = nv::prepare_booter(fw.booter_load, fw.booter_name);
    CHECK(b.nmem.empty());
    CHECK(b.imem_dst == 0);
    CHECK(b.imem_tag == 0x100);
    CHECK(b.boot_vector == 0x100);
}

}  // namespace gsp_boot_test
