// drivers/nv's RM layer over the nvrm transport, against the simulated nvidia.ko
// (drivers/sim/nvgpu/fake_nvidia) and its strict RM object model: the open sequence down to
// scheduled channels, per-branch layouts, and RM's own error statuses surfacing as RmError
// naming the class or control, the object and the status.
#include "drivers/nv/nvrm_escape.hpp"
#include "drivers/nv/nvrm_transport.hpp"
#include "drivers/nv/nv_status.hpp"
#include "drivers/nv/rm_device.hpp"
#include "drivers/sim/nvgpu/fake_nvidia.hpp"
#include "drivers/sim/nvgpu/rm_model.hpp"

#include <catch2/catch.hpp>

#include <cerrno>
#include <memory>

namespace rm_nvrm_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::nv;
using Catch::Matchers::Contains;

namespace {

struct Driver {
    std::shared_ptr<sim::nvgpu::RmModel> rm;
    std::unique_ptr<sim::nvgpu::FakeNvidia> files;
    explicit Driver(std::string version = "570.144", std::vector<uint32_t> classes = {}) {
        sim::nvgpu::RmModelOptions options;
        options.driver_version = std::move(version);
        options.classes = std::move(classes);
        rm = std::make_shared<sim::nvgpu::RmModel>(options);
        files = std::make_unique<sim::nvgpu::FakeNvidia>(rm);
    }
};

template <class F>
RmError rm_error(F&& f) {
    try {
        f();
    } catch (const RmError& e) {
        return e;
    }
    FAIL("expected an RmError");
    throw;
}

}  // namespace

TEST_CASE("nvrm: the open sequence reaches two scheduled channels, and closing frees every RM object") {
    Driver driver;
    {
        auto nvrm = NvrmTransport::open(*driver.files);
        CHECK(nvrm->driver_version() == "570.144");
        CHECK(nvrm->branch() == RmBranch::r570);
        REQUIRE(nvrm->gpus().size() == 1);
        CHECK(nvrm->gpus()[0].device_id == 0x2684);
        CHECK(nvrm->gpus()[0].pci_address == "0000:01:00.0");
        nvrm->attach_gpu(0);
        CHECK(nvrm->device() == "nvrm:/dev/nvidia0");

        auto gpu = RmDevice::open(*nvrm, nvrm->client(), nvrm->branch(), 0, RmVaspaceOwner::rm);
        CHECK(gpu->classes().compute == ADA_COMPUTE_A);
        CHECK(gpu->classes().copy == AMPERE_DMA_COPY_B);
        CHECK(gpu->classes().gpfifo == AMPERE_CHANNEL_GPFIFO_A);
        CHECK(gpu->classes().usermode == TURING_USERMODE_A);
        CHECK(driver.rm->class_of(nvrm->client(), gpu->context_share()) == FERMI_CONTEXT_SHARE_A);

        NvHandle area = gpu->alloc_vram(0x300000, 0x200000);
        RmChannel compute = gpu->create_channel({gpu->classes().compute, area, 0x1000000000, 0x10000, 0x80000});
        RmChannel copy = gpu->create_channel({gpu->classes().copy, area, 0x1000100000, 0x10000, 0x180000});
        CHECK(compute.work_submit_token != 0);
        CHECK(copy.work_submit_token != 0);
        CHECK(compute.work_submit_token != copy.work_submit_token);
        CHECK(driver.rm->token_of(nvrm->client(), compute.channel) == compute.work_submit_token);
        CHECK(driver.rm->class_of(nvrm->client(), compute.engine) == ADA_COMPUTE_A);
        gpu->schedule();
        // client, device, subdevice, virtmem, usermode, vaspace, group, ctxshare, memory, 2 x (channel + engine)
        CHECK(driver.rm->object_count() == 13);
    }
    CHECK(driver.rm->object_count() == 0);
    CHECK(driver.files->open_files() == 0);
}

TEST_CASE("nvrm: the driver branch picks the layouts, and a layout of the wrong branch is refused by RM") {
    CHECK(NvrmTransport::branch_of("570.144") == RmBranch::r570);
    CHECK(NvrmTransport::branch_of("580.65.06") == RmBranch::r580);
    CHECK(NvrmTransport::branch_of("595.45.04") == RmBranch::r580);

    Driver r580("580.65.06");
    auto nvrm = NvrmTransport::open(*r580.files);
    CHECK(nvrm->branch() == RmBranch::r580);
    auto gpu = RmDevice::open(*nvrm, nvrm->client(), nvrm->branch(), 0, RmVaspaceOwner::rm);  // the 56-byte VA space parameters
    CHECK(gpu->vaspace() != 0);

    // The 570 layout (48 bytes, no pasid) sent to a 580 RM: NV_ERR_INVALID_ARGUMENT naming the class.
    Rm rm(*nvrm);
    NvVaspaceAllocationParameters params{};
    RmError e = rm_error([&] { rm.alloc(nvrm->client(), gpu->device(), FERMI_VASPACE_A, params, 48); });
    CHECK(e.status() == NV_ERR_INVALID_ARGUMENT);
    CHECK_THAT(e.what(), Contains("FERMI_VASPACE_A (0x90f1)") && Contains("NV_ERR_INVALID_ARGUMENT") &&
                             Contains("48 bytes"));
}

TEST_CASE("nvrm: a driver branch whose layouts are unknown is refused before any layout-dependent call") {
    for (const char* version : {"535.113.01", "610.10"}) {
        Driver driver(version);
        try {
            NvrmTransport::open(*driver.files);
            FAIL("opened " << version);
        } catch (const UnsupportedError& e) {
            CHECK_THAT(e.what(), Contains(version) && Contains("570-599"));
        }
        // Only the client and the version query reached RM; the client was freed again.
        CHECK(driver.rm->object_count() == 0);
    }
}

TEST_CASE("nvrm: RM's error statuses name the class or control, the object and the status") {
    Driver driver;
    auto nvrm = NvrmTransport::open(*driver.files);
    auto gpu = RmDevice::open(*nvrm, nvrm->client(), nvrm->branch(), 0, RmVaspaceOwner::rm);
    Rm& rm = gpu->rm();
    NvHandle client = nvrm->client();

    SECTION("wrong parent: a subdevice under the client") {
        Nv2080AllocParameters p{0};
        RmError e = rm_error([&] { rm.alloc(client, client, NV20_SUBDEVICE_0, p); });
        CHECK(e.status() == NV_ERR_INVALID_OBJECT_PARENT);
        CHECK_THAT(e.what(), Contains("NV20_SUBDEVICE_0 (0x2080)") &&
                                 Contains("NV_ERR_INVALID_OBJECT_PARENT") && Contains("nvrm:/dev/nvidiactl"));
    }
    SECTION("wrong class: Blackwell's compute class on an Ada GPU") {
        NvHandle area = gpu->alloc_vram(0x200000, 0x200000);
        RmChannel ch = gpu->create_channel({gpu->classes().copy, area, 0x1000000000, 1024, 0x100000});
        RmError e = rm_error([&] { rm.alloc_empty(client, ch.channel, BLACKWELL_COMPUTE_B); });
        CHECK(e.status() == NV_ERR_INVALID_CLASS);
        CHECK_THAT(e.what(), Contains("BLACKWELL_COMPUTE_B (0xcec0)") && Contains("NV_ERR_INVALID_CLASS"));
    }
    SECTION("bad parameters: a control with the wrong parameter size") {
        uint32_t too_small = 0;
        RmError e = rm_error([&] { rm.control(client, gpu->device(), NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, too_small); });
        CHECK(e.status() == NV_ERR_INVALID_PARAM_STRUCT);  // resserv rs_resource.c resControlLookup
        CHECK_THAT(e.what(), Contains("NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2 (0x800292)") &&
                                 Contains("4 bytes"));
    }
    SECTION("bad parameters: a channel whose context share is not one") {
        NvHandle area = gpu->alloc_vram(0x200000, 0x200000);
        NvChannelAllocParams p{};
        p.gpFifoOffset = 0x1000000000;
        p.gpFifoEntries = 1024;
        p.hContextShare = gpu->vaspace();  // a VA space, not a FERMI_CONTEXT_SHARE_A
        p.hUserdMemory[0] = area;
        p.userdOffset[0] = 0x100000;
        RmError e = rm_error([&] { rm.alloc(client, gpu->channel_group(), AMPERE_CHANNEL_GPFIFO_A, p); });
        CHECK(e.status() == NV_ERR_INVALID_OBJECT_HANDLE);
    }
    SECTION("bad parameters: GPFIFO entries not a power of two, USERD outside its memory") {
        NvHandle area = gpu->alloc_vram(0x200000, 0x200000);
        RmError entries = rm_error([&] { gpu->create_channel({gpu->classes().copy, area, 0x1000000000, 1000, 0x100000}); });
        CHECK(entries.status() == NV_ERR_INVALID_ARGUMENT);
        RmError userd = rm_error([&] { gpu->create_channel({gpu->classes().copy, area, 0x1000000000, 1024, 0x200000}); });
        CHECK(userd.status() == NV_ERR_INVALID_ARGUMENT);
    }
    SECTION("an unknown control and a control on the wrong object") {
        uint32_t word = 0;
        RmError unknown = rm_error([&] { rm.control(client, gpu->device(), 0x0080dead, word); });
        CHECK(unknown.status() == NV_ERR_NOT_SUPPORTED);
        CHECK_THAT(unknown.what(), Contains("control 0x80dead"));
        NvC36fCtrlGetWorkSubmitTokenParams token{};
        RmError wrong = rm_error([&] { rm.control(client, gpu->device(), NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, token); });
        CHECK(wrong.status() == NV_ERR_NOT_SUPPORTED);
    }
    SECTION("scheduling a channel group with no channel") {
        RmError e = rm_error([&] { gpu->schedule(); });
        CHECK(e.status() == NV_ERR_INVALID_STATE);
        CHECK_THAT(e.what(), Contains("NVA06C_CTRL_CMD_GPFIFO_SCHEDULE"));
    }
    SECTION("a handle already in use, a free of one that does not exist") {
        NvHandle taken = gpu->subdevice();
        Nv2080AllocParameters p{0};
        NvHandle object = taken;
        CHECK(nvrm->alloc(client, gpu->device(), &object, NV20_SUBDEVICE_0, std::as_writable_bytes(std::span(&p, 1))) ==
              NV_ERR_INSERT_DUPLICATE_NAME);
        RmError e = rm_error([&] { rm.free(client, gpu->device(), 0x12345678); });
        CHECK(e.status() == NV_ERR_OBJECT_NOT_FOUND);
    }
}

TEST_CASE("nvrm: the GPU must offer the classes we drive; the message lists what it has") {
    Driver driver("570.144", {TURING_USERMODE_A, AMPERE_CHANNEL_GPFIFO_A, AMPERE_DMA_COPY_B});  // no compute class
    auto nvrm = NvrmTransport::open(*driver.files);
    try {
        RmDevice::open(*nvrm, nvrm->client(), nvrm->branch(), 0, RmVaspaceOwner::rm);
        FAIL("opened a GPU without a compute class");
    } catch (const UnsupportedError& e) {
        CHECK_THAT(e.what(), Contains("no compute class") && Contains("ADA_COMPUTE_A") &&
                                 Contains("0xc56f"));
    }
}

TEST_CASE("nvrm: ioctl-level failures say what failed") {
    SECTION("no /dev/nvidiactl") {
        struct NoNodes final : pci::DeviceFiles {
            int open(const char*, int) override { return -ENOENT; }
            int close(int) override { return 0; }
            int ioctl(int, unsigned long, void*) override { return -EBADF; }
            void* mmap(void*, size_t, int, int, int, off_t, int* error) override {
                *error = ENODEV;
                return nullptr;
            }
            int munmap(void*, size_t) override { return 0; }
        } none;
        try {
            NvrmTransport::open(none);
            FAIL("opened without nodes");
        } catch (const Error& e) {
            CHECK_THAT(e.what(), Contains("/dev/nvidiactl") && Contains("nvidia.ko"));
        }
    }
    SECTION("an escape of the wrong size is refused by the kernel with EINVAL") {
        Driver driver;
        int fd = driver.files->open("/dev/nvidiactl", 0);
        nvrm::Nvos21Parameters p{};
        CHECK(driver.files->ioctl(fd, nvrm::escape_request(nvrm::NV_ESC_RM_ALLOC, 24), &p) == -EINVAL);
        CHECK(driver.files->ioctl(fd + 100, nvrm::kIoctlAlloc, &p) == -EBADF);
        driver.files->close(fd);
    }
    SECTION("an ioctl the kernel fails surfaces with its errno and escape name") {
        Driver driver;
        auto nvrm = NvrmTransport::open(*driver.files);
        driver.files->fail_next_ioctl(EIO);
        uint32_t word = 0;
        Rm rm(*nvrm);
        try {
            rm.control(nvrm->client(), nvrm->client(), NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, word);
            FAIL("no error");
        } catch (const RmError&) {
            FAIL("an ioctl failure is not an RM status");
        } catch (const Error& e) {
            CHECK_THAT(e.what(), Contains("NV_ESC_RM_CONTROL") && Contains("Input/output error"));
        }
    }
}

TEST_CASE("nvrm memory: VRAM mapped for the CPU through a fresh GPU fd, and at a fixed GPU VA per branch") {
    for (const char* version : {"570.144", "580.65.06"}) {
        INFO(version);
        Driver driver(version);
        auto nvrm = NvrmTransport::open(*driver.files);
        nvrm->attach_gpu(0);
        auto gpu = RmDevice::open(*nvrm, nvrm->client(), nvrm->branch(), 0, RmVaspaceOwner::rm);
        NvHandle memory = gpu->alloc_vram(0x200000, 0x200000);

        // Two CPU mappings of one object see the same bytes (one backing, as VRAM through BAR1).
        auto* a = static_cast<uint32_t*>(nvrm->map_memory(gpu->device(), memory, 0, 0x200000, nullptr, 2));
        auto* b = static_cast<uint32_t*>(nvrm->map_memory(gpu->device(), memory, 0x1000, 0x1000, nullptr, 2));
        a[0x1000 / 4] = 0xfeedf00d;
        CHECK(b[0] == 0xfeedf00d);
        nvrm->unmap_memory(b, 0x1000);

        // The NVOS46 layout of this branch reaches RM: the mapping is where we asked.
        nvrm->map_memory_dma(gpu->device(), gpu->virtual_memory(), memory, 0, 0x200000, 0x2000000000, true);
        auto maps = driver.rm->dma_mappings();
        REQUIRE(maps.size() == 1);
        CHECK(maps[0].va == 0x2000000000);
        CHECK(maps[0].memory == memory);
        // An overlapping fixed mapping and one past the object's end are refused with RM's statuses.
        RmError overlap = rm_error([&] {
            nvrm->map_memory_dma(gpu->device(), gpu->virtual_memory(), memory, 0, 0x1000, 0x2000100000, false);
        });
        CHECK(overlap.status() == NV_ERR_INVALID_ADDRESS);
        CHECK_THAT(overlap.what(), Contains("NV_ESC_RM_MAP_MEMORY_DMA") && Contains("0x2000100000"));
        RmError past = rm_error([&] {
            nvrm->map_memory_dma(gpu->device(), gpu->virtual_memory(), memory, 0x100000, 0x200000, 0x3000000000, false);
        });
        CHECK(past.status() == NV_ERR_INVALID_LIMIT);
        nvrm->unmap_memory(a, 0x200000);

        // Freeing the memory object drops its GPU mapping.
        gpu->free_object(gpu->device(), memory);
        CHECK(driver.rm->dma_mappings().empty());
    }
}

TEST_CASE("nvrm memory: the 570 NVOS46 layout sent to a 580 driver is refused by the kernel (EINVAL)") {
    Driver driver("580.65.06");
    auto nvrm = NvrmTransport::open(*driver.files);
    auto gpu = RmDevice::open(*nvrm, nvrm->client(), nvrm->branch(), 0, RmVaspaceOwner::rm);
    int fd = driver.files->open("/dev/nvidiactl", 0);
    nvrm::Nvos46Parameters570 p{};
    CHECK(driver.files->ioctl(fd, nvrm::kIoctlMapMemoryDma570, &p) == -EINVAL);
    nvrm::Nvos46Parameters580 q{};
    q.hClient = nvrm->client();
    CHECK(driver.files->ioctl(fd, nvrm::kIoctlMapMemoryDma580, &q) == 0);
    CHECK(q.status != NV_OK);  // a zero handle: RM refuses, but the layout got through
    driver.files->close(fd);
}

TEST_CASE("nvrm memory: host pages as an OS descriptor, and CPU maps RM refuses") {
    Driver driver;
    auto nvrm = NvrmTransport::open(*driver.files);
    nvrm->attach_gpu(0);
    auto gpu = RmDevice::open(*nvrm, nvrm->client(), nvrm->branch(), 0, RmVaspaceOwner::rm);
    alignas(4096) static std::byte host[2 * 4096];
    NvHandle os = nvrm->alloc_os_descriptor(gpu->device(), host, sizeof(host));
    CHECK(driver.rm->class_of(nvrm->client(), os) == NV01_MEMORY_SYSTEM_OS_DESCRIPTOR);
    CHECK(driver.rm->memory_size(nvrm->client(), os) == sizeof(host));
    RmError unaligned = rm_error([&] { nvrm->alloc_os_descriptor(gpu->device(), host + 8, 4096); });
    CHECK(unaligned.status() == NV_ERR_INVALID_ARGUMENT);
    CHECK_THAT(unaligned.what(), Contains("NV01_MEMORY_SYSTEM_OS_DESCRIPTOR"));

    NvHandle memory = gpu->alloc_vram(0x10000, 0x1000);
    RmError beyond = rm_error([&] { nvrm->map_memory(gpu->device(), memory, 0x8000, 0x10000, nullptr, 2); });
    CHECK(beyond.status() == NV_ERR_INVALID_LIMIT);
    RmError not_memory = rm_error([&] { nvrm->map_memory(gpu->device(), gpu->vaspace(), 0, 0x1000, nullptr, 2); });
    CHECK(not_memory.status() == NV_ERR_INVALID_OBJECT_HANDLE);
    // No fd was leaked by the failed maps (each map opens its own /dev/nvidia0).
    CHECK(driver.files->open_files() == 2);  // /dev/nvidiactl and the attached /dev/nvidia0
}

TEST_CASE("nvrm: NV01_MEMORY_VIRTUAL bound to a VA space must end inside it (NV_ERR_INVALID_LIMIT otherwise)") {
    // mem_mgr/virt_mem_range.c vmrangeConstruct: limit < vasLimit + 1 when hVASpace names a VA space.
    Driver driver;
    auto nvrm = NvrmTransport::open(*driver.files);
    nvrm->attach_gpu(0);
    auto gpu = RmDevice::open(*nvrm, nvrm->client(), nvrm->branch(), 0, RmVaspaceOwner::rm);
    CHECK(gpu->virtual_memory() != 0);
    NvMemoryVirtualAllocationParams past{};
    past.limit = 0x1ffffffffffffull;  // the 49-bit GMMU limit, past the VA space's 0x1fffffb000fff
    past.hVASpace = gpu->vaspace();
    RmError e = rm_error([&] { gpu->rm().alloc(nvrm->client(), gpu->device(), NV01_MEMORY_VIRTUAL, past); });
    CHECK(e.status() == NV_ERR_INVALID_LIMIT);
    // The same limit without a VA space is checked against the GMMU's range: legal (tinygrad's hDma).
    NvMemoryVirtualAllocationParams unbound{};
    unbound.limit = 0x1ffffffffffffull;
    CHECK(gpu->rm().alloc(nvrm->client(), gpu->device(), NV01_MEMORY_VIRTUAL, unbound) != 0);
    // RM returns the limit it settled on.
    NvMemoryVirtualAllocationParams whole{};
    whole.hVASpace = gpu->vaspace();
    gpu->rm().alloc(nvrm->client(), gpu->device(), NV01_MEMORY_VIRTUAL, whole);
    CHECK(whole.limit == 0x1fffffb000fffull);
}

TEST_CASE("nvrm: GET_CLASSLIST_V2 and GPFIFO_SCHEDULE take their branch's size; any other is NV_ERR_INVALID_PARAM_STRUCT") {
    // ctrl0080gpu.h NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE 100 (570, 575) / 200 (580); ctrla06fgpfifo.h bSkipEnable from
    // 575; resserv rs_resource.c resControlLookup refuses a size other than the exported one.
    CHECK(NvrmTransport::branch_of("570.144") == RmBranch::r570);
    CHECK(NvrmTransport::branch_of("575.57.08") == RmBranch::r575);
    CHECK(NvrmTransport::branch_of("580.142") == RmBranch::r580);
    struct Case {
        const char* version;
        uint32_t classlist, schedule;
    };
    for (Case c : {Case{"570.144", 404, 2}, Case{"575.57.08", 404, 3}, Case{"580.142", 804, 3}}) {
        INFO(c.version);
        Driver driver(c.version);
        auto nvrm = NvrmTransport::open(*driver.files);
        auto gpu = RmDevice::open(*nvrm, nvrm->client(), nvrm->branch(), 0, RmVaspaceOwner::rm);
        CHECK(gpu->classes().compute == ADA_COMPUTE_A);
        Nv0080CtrlGpuGetClasslistV2Params list{};
        for (uint32_t size : {404u, 804u}) {
            if (size == c.classlist) {
                gpu->rm().control(nvrm->client(), gpu->device(), NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, list, size);
            } else {
                RmError e = rm_error([&] {
                    gpu->rm().control(nvrm->client(), gpu->device(), NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, list, size);
                });
                CHECK(e.status() == NV_ERR_INVALID_PARAM_STRUCT);
            }
        }
        NvHandle area = gpu->alloc_vram(0x200000, 0x200000);
        gpu->create_channel({gpu->classes().copy, area, 0x1000000000, 1024, 0x100000});
        gpu->schedule();  // the branch's size
        NvA06cCtrlGpfifoScheduleParams schedule{1, 0, 0};
        RmError e = rm_error([&] {
            gpu->rm().control(nvrm->client(), gpu->channel_group(), NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, schedule, 5 - c.schedule);
        });
        CHECK(e.status() == NV_ERR_INVALID_PARAM_STRUCT);
    }
}

TEST_CASE("nvrm: the device object names RM's device instance of the GPU (GET_ID_INFO_V2), not 0") {
    // rmapi/alloc_free.c: NV01_DEVICE_0 of a device instance with no GPU is NV_ERR_INVALID_STATE.
    sim::nvgpu::RmModelOptions options;
    options.device_instance = 1;  // a host whose first GPU is another
    auto rm = std::make_shared<sim::nvgpu::RmModel>(options);
    sim::nvgpu::FakeNvidia files(rm);
    auto nvrm = NvrmTransport::open(files);
    nvrm->attach_gpu(0);
    CHECK(nvrm->device_instance() == 1);
    RmError e = rm_error([&] { RmDevice::open(*nvrm, nvrm->client(), nvrm->branch(), 0, RmVaspaceOwner::rm); });
    CHECK(e.status() == NV_ERR_INVALID_STATE);
    CHECK_THAT(e.what(), Contains("NV01_DEVICE_0"));
    auto gpu = RmDevice::open(*nvrm, nvrm->client(), nvrm->branch(), nvrm->device_instance(), RmVaspaceOwner::rm);
    CHECK(gpu->device() != 0);
}

TEST_CASE("nvrm: the context share asks RM for an async subcontext (NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC = 1)") {
    // nvos.h: SYNC 0, ASYNC 1, SPECIFIED 2 (kernel_channel_group.c asserts ASYNC == 1).
    Driver driver;
    auto nvrm = NvrmTransport::open(*driver.files);
    auto gpu = RmDevice::open(*nvrm, nvrm->client(), nvrm->branch(), 0, RmVaspaceOwner::rm);
    CHECK(driver.rm->subcontext_mode(nvrm->client(), gpu->context_share()) == 1u);
}

}  // namespace rm_nvrm_test
