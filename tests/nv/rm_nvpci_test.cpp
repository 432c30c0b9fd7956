// drivers/nv's RM layer over the nvpci transport: the simulated AD102 booted through GSP
// (real ad102 booter/bootloader, synthetic GSP-RM ELF), its GSP-RM answering RM RPCs from the
// same RmModel the nvrm fake uses — the shared open sequence (rm_device) runs unchanged over both.
#include "drivers/nv/gsp_boot.hpp"
#include "drivers/nv/gsp_rpc_functions.hpp"
#include "drivers/nv/nvpci_transport.hpp"
#include "drivers/nv/rm_device.hpp"
#include "drivers/pci/sim_bus.hpp"
#include "drivers/sim/nvgpu/ad102.hpp"
#include "drivers/sim/nvgpu/rm_gsp_server.hpp"
#include "tests/nv/gsp_firmware.hpp"

#include <catch2/catch.hpp>

namespace rm_nvpci_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::nv;
using Catch::Matchers::Contains;
namespace nvsim = baregpu::sim::nvgpu;

namespace {

struct Booted {
    std::shared_ptr<nvsim::RmModel> rm = std::make_shared<nvsim::RmModel>();
    pci::sim::SimBus bus;
    nvsim::Ad102Model* model = nullptr;
    std::unique_ptr<pci::PciDevice> pci;
    std::unique_ptr<GspDevice> gsp;
    Booted() {
        nvsim::Ad102Options o;
        o.server = std::make_shared<nvsim::RmGspServer>(rm);
        o.firmware_dir = test::nv::firmware_dir();
        auto m = nvsim::make_ad102(std::move(o));
        model = m.get();
        pci = bus.open(bus.attach(std::move(m)));
        gsp = GspDevice::open(*pci, test::nv::firmware());
    }
};

}  // namespace

namespace {

// The open sequence's hook that hands GSP-RM the page directory (a root at VRAM 0x400000, 4 entries), as NvpciPlatform does.
std::function<void(RmDevice&)> page_directory(NvpciTransport& transport, NvHandle client) {
    return [&transport, client](RmDevice& d) { REQUIRE(transport.set_page_directory(client, d.device(), d.vaspace(), 0x400000, 4) == NV_OK); };
}

}  // namespace

TEST_CASE("nvpci: the shared open sequence over GSP RPC reaches scheduled channels; GSP-RM's RM saw it all") {
    Booted b;
    NvpciTransport transport(b.gsp->rpc(), "nvpci:sim-nv:ad102");
    Rm rm(transport);
    NvHandle client = rm.alloc_client();
    CHECK(client == 0xc1000000);
    {
        auto gpu = RmDevice::open(transport, client, RmBranch::r570, 0, RmVaspaceOwner::driver, page_directory(transport, client));
        CHECK(gpu->classes().compute == ADA_COMPUTE_A);
        NvHandle area = gpu->alloc_vram(0x300000, 0x200000);
        RmChannel compute = gpu->create_channel({gpu->classes().compute, area, 0x1000000000, 0x10000, 0x80000});
        RmChannel copy = gpu->create_channel({gpu->classes().copy, area, 0x1000100000, 0x10000, 0x180000});
        CHECK(compute.work_submit_token != copy.work_submit_token);
        gpu->schedule();
        CHECK(b.rm->class_of(client, compute.engine) == ADA_COMPUTE_A);
        CHECK(b.rm->object_count() == 13);
    }
    CHECK(b.rm->object_count() == 1);  // the device subtree is freed; the client stays the caller's
    rm.free(client, client, client);
    CHECK(b.rm->object_count() == 0);
    std::vector<uint32_t> seen = b.model->rpcs_seen();
    CHECK(std::count(seen.begin(), seen.end(), gsp::kFnGspRmAlloc) == 13);
    CHECK(std::count(seen.begin(), seen.end(), gsp::kFnGspRmControl) == 4);  // classlist, 2 tokens, schedule
    CHECK(b.bus.violations().empty());
}

TEST_CASE("nvpci: RM error statuses come back through GSP as RmError naming class and status") {
    Booted b;
    NvpciTransport transport(b.gsp->rpc(), "nvpci:sim-nv:ad102");
    Rm rm(transport);
    NvHandle client = rm.alloc_client();
    Nv2080AllocParameters p{0};
    try {
        rm.alloc(client, client, NV20_SUBDEVICE_0, p);
        FAIL("a subdevice under the client was accepted");
    } catch (const RmError& e) {
        CHECK(e.status() == NV_ERR_INVALID_OBJECT_PARENT);
        CHECK_THAT(e.what(), Contains("nvpci:sim-nv:ad102") && Contains("NV20_SUBDEVICE_0") && Contains("over nvpci"));
    }
    // A 580-layout VA space (56 bytes) to a 570 GSP-RM.
    auto gpu = RmDevice::open(transport, client, RmBranch::r570, 0, RmVaspaceOwner::driver, page_directory(transport, client));
    NvVaspaceAllocationParameters vas{};
    try {
        rm.alloc(client, gpu->device(), FERMI_VASPACE_A, vas, 56);
        FAIL("a 56-byte VA space parameter block was accepted by a 570 RM");
    } catch (const RmError& e) {
        CHECK(e.status() == NV_ERR_INVALID_ARGUMENT);
    }
}

TEST_CASE("nvpci: a GSP-RM that stops answering gives a TimeoutError naming the RM RPC, not a hang") {
    Booted b;
    NvpciTransport transport(b.gsp->rpc(), "nvpci:sim-nv:ad102", std::chrono::milliseconds(200));
    Rm rm(transport);
    NvHandle client = rm.alloc_client();
    b.model->stop_replying(true);
    uint32_t word = 0;
    auto start = std::chrono::steady_clock::now();
    try {
        rm.control(client, client, NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, word);
        FAIL("no timeout");
    } catch (const TimeoutError& e) {
        CHECK_THAT(e.what(), Contains("GSP_RM_CONTROL (76)"));
    }
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
    b.model->stop_replying(false);
}

TEST_CASE("nvpci: SET_PAGE_DIRECTORY hands RM the page directory (COPY_SERVER_RESERVED_PDES does not); channels then reach the engines") {
    Booted b;
    std::vector<nvsim::RmChannelInfo> announced;
    std::vector<uint32_t> freed;
    b.rm->set_engine_hooks({[&](const nvsim::RmChannelInfo& c) { announced.push_back(c); },
                            [&](uint32_t token) { freed.push_back(token); }});
    NvpciTransport transport(b.gsp->rpc(), "nvpci:sim-nv:ad102");
    Rm rm(transport);
    NvHandle client = rm.alloc_client();
    // COPY_SERVER_RESERVED_PDES is shape-checked and accepted, but it only edits a server-owned range of RM's own walker
    // (gpu_vaspace.c): the externally owned VA space still has no page directory, and its context share is refused
    // (kernel_ctxshare.c: NV_ERR_INVALID_STATE).
    try {
        RmDevice::open(transport, client, RmBranch::r570, 0, RmVaspaceOwner::driver, [&](RmDevice& d) {
            Nv90f1CtrlCopyServerReservedPdesParams p{};
            p.pageSize = 1ull << 47;
            p.virtAddrHi = (1ull << 47) - 1;
            p.numLevelsToCopy = 1;
            p.levels[0] = {0x400000, 0x1000, 4, 47};  // GMMU_APERTURE_SYS_COH: refused
            try {
                rm.control(client, d.vaspace(), NV90F1_CTRL_CMD_VASPACE_COPY_SERVER_RESERVED_PDES, p);
                FAIL("a system-memory page directory was accepted");
            } catch (const RmError& e) {
                CHECK(e.status() == NV_ERR_INVALID_ARGUMENT);
                CHECK_THAT(e.what(), Contains("NV90F1_CTRL_CMD_VASPACE_COPY_SERVER_RESERVED_PDES"));
            }
            d.copy_server_reserved_pdes(0x400000, 0x1000, 47, 0, (1ull << 47) - 1);
        });
        FAIL("a context share was made in a VA space without a page directory");
    } catch (const RmError& e) {
        CHECK(e.status() == NV_ERR_INVALID_STATE);
        CHECK_THAT(e.what(), Contains("FERMI_CONTEXT_SHARE_A"));
    }
    {
        auto gpu = RmDevice::open(transport, client, RmBranch::r570, 0, RmVaspaceOwner::driver, [&](RmDevice& d) {
            CHECK(transport.set_page_directory(client, d.device(), d.vaspace(), 0x400800, 4) == NV_ERR_INVALID_ARGUMENT);
            CHECK(transport.set_page_directory(client, d.device(), d.subdevice(), 0x400000, 4) == NV_ERR_INVALID_OBJECT_HANDLE);
            REQUIRE(transport.set_page_directory(client, d.device(), d.vaspace(), 0x400000, 4) == NV_OK);
        });
        NvHandle area = gpu->alloc_vram(0x300000, 0x200000);
        RmChannel ch = gpu->create_channel({gpu->classes().compute, area, 0x1000100000, 0x100, 0x100800});
        REQUIRE(announced.size() == 1);
        CHECK(announced[0].token == ch.work_submit_token);
        CHECK(announced[0].gpfifo_va == 0x1000100000);
        CHECK(announced[0].gpfifo_entries == 0x100);
        CHECK(announced[0].userd_va == 0x1000100000 + 0x100800);  // the documented USERD simplification
        CHECK(announced[0].page_directory_base == 0x400000);
        CHECK(freed.empty());
    }
    CHECK(freed == std::vector<uint32_t>{announced[0].token});  // freed with the device subtree
    rm.free(client, client, client);
    CHECK(b.bus.violations().empty());
}

}  // namespace rm_nvpci_test
