// The simulated nvidia.ko with a GPU behind it (drivers/sim/nvgpu/nvrm_gpu): RM places VRAM objects in
// the GPU's VRAM and writes the page tables of the VA spaces it owns on NV_ESC_RM_MAP_MEMORY_DMA; the CPU
// mapping of a VRAM object is the very bytes the engines' MMU reaches; OS descriptors map as system memory;
// freeing unmaps. And RM stays strict: bad handles, ranges, VA spaces and notifiers get RM's statuses.
#include "base/error.hpp"
#include "drivers/nv/hcq_device.hpp"
#include "drivers/nv/nv_status.hpp"
#include "drivers/nv/nvrm_platform.hpp"
#include "drivers/nv/nvrm_transport.hpp"
#include "drivers/nv/rm_device.hpp"
#include "drivers/sim/nvgpu/fake_nvidia.hpp"
#include "drivers/sim/nvgpu/nvrm_gpu.hpp"
#include "drivers/sim/nvgpu/rm_model.hpp"

#include "hcq/queue.hpp"
#include "hcq/signal.hpp"

#include <catch2/catch.hpp>

#include <cerrno>

#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <variant>

namespace nvrm_gpu_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace baregpu::nv;
using Catch::Matchers::Contains;

namespace {

struct Machine {
    std::shared_ptr<sim::nvgpu::RmModel> rm = std::make_shared<sim::nvgpu::RmModel>();
    std::shared_ptr<sim::nvgpu::NvrmGpu> gpu = std::make_shared<sim::nvgpu::NvrmGpu>(rm, sim::nvgpu::NvrmGpuOptions{"test-gpu", 64ull << 20});
    sim::nvgpu::FakeNvidia files{rm, 0x2684, gpu};
    std::unique_ptr<NvrmTransport> nvrm;
    std::unique_ptr<RmDevice> dev;
    explicit Machine(RmVaspaceOwner owner = RmVaspaceOwner::rm) {
        nvrm = NvrmTransport::open(files);
        nvrm->attach_gpu(0);
        dev = RmDevice::open(*nvrm, nvrm->client(), nvrm->branch(), 0, owner);
    }
    ~Machine() {
        dev.reset();
        nvrm.reset();
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

const sim::nvgpu::RmModel::DmaMapping& mapping_at(const std::vector<sim::nvgpu::RmModel::DmaMapping>& maps, uint64_t va) {
    for (const auto& m : maps)
        if (m.va == va) return m;
    FAIL("no DMA mapping at " << va);
    throw;
}

}  // namespace

TEST_CASE("nvrm GPU: MAP_MEMORY_DMA writes RM's page tables; the CPU mmap of VRAM is what the engines see; free unmaps") {
    Machine m;
    constexpr uint64_t kVa = 0x2000000000, kHostVa = 0x2000100000;
    NvHandle memory = m.dev->alloc_vram(0x4000, 0x1000);
    m.nvrm->map_memory_dma(m.dev->device(), m.dev->virtual_memory(), memory, 0, 0x4000, kVa, false);
    auto* cpu = static_cast<uint32_t*>(m.nvrm->map_memory(m.dev->device(), memory, 0, 0x4000, nullptr, 1));
    cpu[0x1000 / 4 + 3] = 0xc0ffee11;

    const auto maps = m.rm->dma_mappings();
    const auto& map = mapping_at(maps, kVa);
    REQUIRE(map.pdb.has_value());
    const auto placed = m.rm->backing_of(m.nvrm->client(), memory);
    REQUIRE(placed.has_value());
    REQUIRE(placed->vram);
    // The MMU walk of RM's tables lands on the object's VRAM, and those bytes are the CPU's.
    auto r = m.gpu->engines().mmu().translate(*map.pdb, sim::nvgpu::MmuFormat::v2, kVa + 0x100c, sim::nvgpu::MmuAccess::read);
    REQUIRE(std::holds_alternative<sim::nvgpu::MmuTranslation>(r));
    const auto& t = std::get<sim::nvgpu::MmuTranslation>(r);
    CHECK(t.vram);
    CHECK(t.address == placed->address + 0x100c);
    uint32_t seen = 0;
    std::memcpy(&seen, m.gpu->vram().data() + t.address, 4);
    CHECK(seen == 0xc0ffee11);

    // Host pages as an OS descriptor: system memory at their address, reached by the engines' port.
    alignas(4096) static std::byte host[4096];
    NvHandle os = m.nvrm->alloc_os_descriptor(m.dev->device(), host, sizeof host);
    m.nvrm->map_memory_dma(m.dev->device(), m.dev->virtual_memory(), os, 0, sizeof host, kHostVa, false);
    std::memcpy(host + 64, "nvrm", 4);
    std::byte back[4];
    REQUIRE_FALSE(m.gpu->engines().mmu().read(*map.pdb, sim::nvgpu::MmuFormat::v2, kHostVa + 64, back).has_value());
    CHECK(std::memcmp(back, "nvrm", 4) == 0);

    // Freeing the memory object unmaps it: the walk faults at the PTE.
    m.nvrm->unmap_memory(cpu, 0x4000);
    m.dev->free_object(m.dev->device(), memory);
    m.dev->free_object(m.dev->device(), os);
    auto after = m.gpu->engines().mmu().translate(*map.pdb, sim::nvgpu::MmuFormat::v2, kVa, sim::nvgpu::MmuAccess::read);
    REQUIRE(std::holds_alternative<sim::nvgpu::MmuFault>(after));
    CHECK(std::get<sim::nvgpu::MmuFault>(after).type == sim::nvgpu::MmuFaultType::pte_invalid);
    CHECK(m.gpu->engines().mmu().read(*map.pdb, sim::nvgpu::MmuFormat::v2, kHostVa, back).has_value());
    CHECK(m.gpu->dma_faults() == 0);  // the unmapped host page faulted in the walk, before any DMA
}

TEST_CASE("nvrm GPU: RM refuses bad MAP_MEMORY_DMA, VA-space, VRAM and error-notifier requests with its statuses") {
    Machine m;
    NvHandle memory = m.dev->alloc_vram(0x2000, 0x1000);
    const NvHandle device = m.dev->device(), dma = m.dev->virtual_memory();

    RmError unknown = rm_error([&] { m.nvrm->map_memory_dma(device, dma, 0xdead0001, 0, 0x1000, 0x3000000000, false); });
    CHECK(unknown.status() == NV_ERR_INVALID_OBJECT_HANDLE);
    CHECK_THAT(unknown.what(), Contains("0xdead0001") && Contains("NV_ERR_INVALID_OBJECT_HANDLE"));
    RmError not_dma = rm_error([&] { m.nvrm->map_memory_dma(device, memory, memory, 0, 0x1000, 0x3000000000, false); });
    CHECK(not_dma.status() == NV_ERR_INVALID_OBJECT_HANDLE);
    RmError beyond = rm_error([&] { m.nvrm->map_memory_dma(device, dma, memory, 0x1000, 0x2000, 0x3000000000, false); });
    CHECK(beyond.status() == NV_ERR_INVALID_LIMIT);
    CHECK(m.rm->dma_mappings().empty());

    // More VRAM than the GPU has: NV_ERR_NO_MEMORY.
    RmError full = rm_error([&] { m.dev->alloc_vram(128ull << 20, 0x1000); });
    CHECK(full.status() == NV_ERR_NO_MEMORY);

    // An hDma naming something that is not a VA space.
    NvMemoryVirtualAllocationParams bad_virt{};
    bad_virt.limit = 0x1ffffffffffffull;
    bad_virt.hVASpace = memory;
    RmError virt = rm_error([&] { m.dev->rm().alloc(m.nvrm->client(), device, NV01_MEMORY_VIRTUAL, bad_virt); });
    CHECK(virt.status() == NV_ERR_INVALID_OBJECT_HANDLE);

    // A channel whose error notifier is not memory.
    RmChannelSpec spec;
    spec.engine_class = m.dev->classes().copy;
    spec.memory = memory;
    spec.gpfifo_va = 0x3000000000;
    spec.entries = 64;
    spec.userd_offset = 0x1000;
    spec.error_notifier = m.dev->vaspace();
    RmError notifier = rm_error([&] { m.dev->create_channel(spec); });
    CHECK(notifier.status() == NV_ERR_INVALID_OBJECT_HANDLE);
    CHECK_THAT(notifier.what(), Contains("AMPERE_CHANNEL_GPFIFO_A"));
}

TEST_CASE("nvrm GPU: RM does not map into a VA space someone else owns (IS_EXTERNALLY_OWNED: NV_ERR_NOT_SUPPORTED)") {
    Machine m;
    NvHandle memory = m.dev->alloc_vram(0x1000, 0x1000);
    // A second VA space with nvpci's flags: the client writes its tables.
    NvVaspaceAllocationParameters owned_params{};
    owned_params.flags = NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED | NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING;
    owned_params.vaBase = 0x1000;
    owned_params.vaSize = 0x1fffffb000000ull;
    const NvHandle vaspace = m.dev->rm().alloc(m.nvrm->client(), m.dev->device(), FERMI_VASPACE_A, owned_params,
                                               vaspace_params_size(m.nvrm->branch()));
    NvMemoryVirtualAllocationParams bound{};
    bound.limit = 0;  // up to the VA space's own limit
    bound.hVASpace = vaspace;
    NvHandle dma = m.dev->rm().alloc(m.nvrm->client(), m.dev->device(), NV01_MEMORY_VIRTUAL, bound);
    RmError owned = rm_error([&] { m.nvrm->map_memory_dma(m.dev->device(), dma, memory, 0, 0x1000, 0x3000000000, false); });
    CHECK(owned.status() == NV_ERR_NOT_SUPPORTED);
}

TEST_CASE("nvrm GPU: /dev/kmsg reads back the kernel log record by record, EAGAIN at its end") {
    Machine m;
    int fd = m.files.open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
    REQUIRE(fd >= 0);
    char buffer[512];
    CHECK(m.files.read(fd, buffer, sizeof buffer) == -EAGAIN);  // nothing happened yet
    CHECK(m.files.ioctl(fd, 0, buffer) == -ENOTTY);
    // A doorbell with a token that names no channel is ignored and logged.
    auto* usermode = static_cast<uint32_t*>(m.nvrm->map_memory(m.dev->device(), m.dev->usermode(), 0, 0x10000, nullptr, 1));
    usermode[0x90 / 4] = 0x77;
    for (int i = 0; i < 500 && m.gpu->kernel_log().empty(); ++i) usleep(1000);
    const ssize_t n = m.files.read(fd, buffer, sizeof buffer);
    REQUIRE(n > 0);
    const std::string record(buffer, static_cast<size_t>(n));
    CHECK_THAT(record, Contains(";NVRM: doorbell rung with work submit token 0x77"));
    CHECK(record.back() == '\n');
    CHECK(m.files.read(fd, buffer, 8) == -EAGAIN);
    m.nvrm->unmap_memory(usermode, 0x10000);
    m.files.close(fd);
}

namespace {

// nvidia.ko's files with /dev/kmsg refused, as under kernel.dmesg_restrict for an unprivileged user.
struct NoKernelLog final : pci::DeviceFiles {
    pci::DeviceFiles& inner;
    explicit NoKernelLog(pci::DeviceFiles& files) : inner(files) {}
    int open(const char* path, int flags) override {
        return std::string(path) == "/dev/kmsg" ? -EPERM : inner.open(path, flags);
    }
    int close(int fd) override { return inner.close(fd); }
    int ioctl(int fd, unsigned long request, void* argument) override { return inner.ioctl(fd, request, argument); }
    void* mmap(void* address, size_t length, int prot, int flags, int fd, off_t offset, int* error) override {
        return inner.mmap(address, length, prot, flags, fd, offset, error);
    }
    int munmap(void* address, size_t length) override { return inner.munmap(address, length); }
};

}  // namespace

TEST_CASE("nvrm HCQ: without the kernel log, a fault still fails the device from the error notifier, saying what is missing") {
    auto rm = std::make_shared<sim::nvgpu::RmModel>();
    auto gpu = std::make_shared<sim::nvgpu::NvrmGpu>(rm, sim::nvgpu::NvrmGpuOptions{"test-gpu", 256ull << 20});
    sim::nvgpu::FakeNvidia nvidia(rm, 0x2684, gpu);
    NoKernelLog files(nvidia);
    NvHcqOptions options;
    options.name = "nvrm-test";
    {
        auto dev = NvHcqDevice::create(NvrmPlatform::open(files, 0, 128ull << 20), options);
        hcq::Buffer b = dev->allocate(4096);
        hcq::Signal done = dev->new_signal(0, "done");
        dev->copy_queue().copy(b.address(), GpuVirtualAddress(0x1e00000000), 64).signal(done, 1).submit();
        CHECK_THROWS_WITH(done.wait(1, std::chrono::seconds(5)),
                          Contains("error notifier: Xid 31") && Contains("/dev/kmsg") && Contains("Operation not permitted") &&
                              Contains("copy:0"));
        CHECK(dev->failed());
        CHECK_FALSE(gpu->kernel_log().empty());  // nvidia.ko did log it; we could not read it
    }
    CHECK(rm->object_count() == 0);  // closing the device freed the client and everything under it
}

TEST_CASE("nvrm HCQ: both driver branches' layouts (570: 48-byte VA space, 56-byte NVOS46; 580: 56 / 64) carry real work") {
    for (const char* version : {"570.144", "580.65.06"}) {
        INFO(version);
        sim::nvgpu::RmModelOptions o;
        o.driver_version = version;
        auto rm = std::make_shared<sim::nvgpu::RmModel>(o);
        auto gpu = std::make_shared<sim::nvgpu::NvrmGpu>(rm, sim::nvgpu::NvrmGpuOptions{"test-gpu", 256ull << 20});
        sim::nvgpu::FakeNvidia nvidia(rm, 0x2684, gpu);
        NvHcqOptions options;
        options.name = "nvrm-test";
        auto dev = NvHcqDevice::create(NvrmPlatform::open(nvidia, 0, 128ull << 20), options);
        hcq::Buffer src = dev->allocate(0x3000, {.cpu_access = true});
        hcq::Buffer dst = dev->allocate(0x3000, {.host = true});
        for (size_t i = 0; i < 0x3000; ++i) src.cpu()[i] = std::byte(static_cast<uint8_t>(i * 7 + 1));
        hcq::Signal done = dev->new_signal(0, "done");
        dev->copy_queue().copy(dst.address(), src.address(), 0x3000).signal(done, 1).submit();
        REQUIRE(done.try_wait(1, std::chrono::seconds(5)));
        CHECK(std::memcmp(dst.cpu(), src.cpu(), 0x3000) == 0);
        CHECK_FALSE(dev->failed());
    }
}

TEST_CASE("nvrm GPU: the PBDMA reads GPPut from hUserdMemory's pages, not from whatever the client mapped at the ring") {
    // kernel_channel_gv100.c kchannelGetUserdInfo: USERD = physical address of hUserdMemory[0] + userdOffset[0].
    Machine m;
    constexpr uint64_t kRingVa = 0x2000000000, kOtherVa = 0x2000200000, kUserd = 0x1000;
    NvHandle ring = m.dev->alloc_vram(0x2000, 0x1000), other = m.dev->alloc_vram(0x2000, 0x1000);
    m.nvrm->map_memory_dma(m.dev->device(), m.dev->virtual_memory(), ring, 0, 0x2000, kRingVa, false);
    m.nvrm->map_memory_dma(m.dev->device(), m.dev->virtual_memory(), other, 0, 0x2000, kOtherVa, false);
    auto* ring_cpu = static_cast<std::byte*>(m.nvrm->map_memory(m.dev->device(), ring, 0, 0x2000, nullptr, 1));
    auto* other_cpu = static_cast<std::byte*>(m.nvrm->map_memory(m.dev->device(), other, 0, 0x2000, nullptr, 1));
    std::memset(ring_cpu, 0, 0x2000);
    std::memset(other_cpu, 0, 0x2000);
    // USERD named in `other`, while the ring (and the USERD the client writes) is in `ring`.
    RmChannel ch = m.dev->create_channel({m.dev->classes().copy, other, kRingVa, 64, kUserd});
    // One control NOP GP entry (length 0, opcode NOP): GPGet moves past it once the PBDMA sees GPPut 1.
    const uint32_t put = 1;
    std::memcpy(ring_cpu + kUserd + 0x8c, &put, 4);
    m.gpu->engines().doorbell(ch.work_submit_token);
    m.gpu->engines().wait_idle(ch.work_submit_token, std::chrono::milliseconds(50));
    CHECK(m.gpu->engines().gp_get(ch.work_submit_token) == 0);
    // GPPut in hUserdMemory's USERD: the entry runs, and GPGet comes back there.
    std::memcpy(other_cpu + kUserd + 0x8c, &put, 4);
    m.gpu->engines().doorbell(ch.work_submit_token);
    REQUIRE(m.gpu->engines().wait_idle(ch.work_submit_token, std::chrono::seconds(5)));
    CHECK(m.gpu->engines().gp_get(ch.work_submit_token) == 1);
    uint32_t get = 0;
    std::memcpy(&get, other_cpu + kUserd + 0x88, 4);
    CHECK(get == 1);
    m.nvrm->unmap_memory(ring_cpu, 0x2000);
    m.nvrm->unmap_memory(other_cpu, 0x2000);
}

TEST_CASE("nvrm GPU: unmapping a buffer drops the CPU mapping before RM frees the object") {
    Machine m;
    auto platform = NvrmPlatform::open(m.files, 0, 16ull << 20);
    auto rm = RmDevice::open(platform->transport(), platform->client(), platform->branch(), platform->device_instance(),
                             platform->vaspace_owner());
    platform->attach(*rm);
    const GpuVirtualAddress va(0x1000000000);
    std::byte* cpu = platform->map(va, 0x2000, {.cpu_access = true});
    REQUIRE(cpu != nullptr);
    const NvHandle memory = platform->memory_object(va);
    CHECK(memory != 0);
    platform->unmap(va, 0x2000);
    CHECK(m.rm->class_of(platform->client(), memory) == 0);
    CHECK(m.files.unmaps_after_free() == 0);
    platform->detach();
}

namespace {

std::vector<std::byte> data_file(const std::string& name) {
    std::ifstream f(std::string(BAREGPU_TEST_DATA_DIR) + "/" + name, std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    REQUIRE(raw.size() > 64);
    std::vector<std::byte> bytes(raw.size());
    std::memcpy(bytes.data(), raw.data(), raw.size());
    return bytes;
}

// An H100 behind the simulated nvidia.ko 580 (as sim-nvrm:h100), driven by NvHcqDevice.
struct H100 {
    std::shared_ptr<sim::nvgpu::RmModel> rm;
    std::shared_ptr<sim::nvgpu::NvrmGpu> gpu;
    std::unique_ptr<sim::nvgpu::FakeNvidia> files;
    std::shared_ptr<NvHcqDevice> dev;
    H100() {
        sim::nvgpu::RmModelOptions o;
        o.driver_version = "580.142";
        o.classes = {HOPPER_USERMODE_A, HOPPER_CHANNEL_GPFIFO_A, HOPPER_DMA_COPY_A, HOPPER_COMPUTE_A};
        rm = std::make_shared<sim::nvgpu::RmModel>(o);
        gpu = std::make_shared<sim::nvgpu::NvrmGpu>(rm, sim::nvgpu::NvrmGpuOptions{"test-h100", 256ull << 20});
        files = std::make_unique<sim::nvgpu::FakeNvidia>(rm, 0x2330, gpu);
        NvHcqOptions options;
        options.name = "test-h100";
        dev = NvHcqDevice::create(NvrmPlatform::open(*files, 0, 128ull << 20), options);
    }
    ~H100() {
        dev.reset();
        files.reset();
        gpu.reset();
    }
};

}  // namespace

TEST_CASE("nvrm GPU: a cubin's launch follows its .nv.info (QMD V04 registers, barriers, shared memory; parameters at PARAM_CBANK)") {
    // tests/nv/data/axpy_fill_sm90.cubin: `nvcc -cubin -arch=sm_90 axpy_fill.cu` (CUDA 13.0.88). The model reads the
    // same file itself and checks the launch against it; SASS is not executed.
    H100 h;
    const std::vector<std::byte> sm90 = data_file("axpy_fill_sm90.cubin");
    h.gpu->engines().add_cubin(sm90);
    auto axpy = h.dev->load_program(sm90, "axpy");
    CHECK(axpy->info().kernarg_size == 24);  // out, in (u64), n (s32), a (f32)
    CHECK(axpy->info().num_buffers == 2);
    CHECK(axpy->info().num_values == 2);
    hcq::Buffer out = h.dev->allocate(4096), in = h.dev->allocate(4096);
    hcq::Signal done = h.dev->new_signal(0, "done");
    float a = 2.0f;
    uint32_t a_bits;
    std::memcpy(&a_bits, &a, 4);
    hcq::KernelArgs args(*axpy, {out, in}, {64u, a_bits});
    h.dev->compute_queue().exec(*axpy, args, {1, 1, 1}, {64, 1, 1}).signal(done, 1).submit();
    done.wait(1, std::chrono::seconds(5));
    CHECK(h.gpu->engines().cubin_launches() == 1);
    // A cubin for another SM is refused when loaded (the e_flags SM field): sm_89 SASS does not run on sm_90.
    CHECK_THROWS_WITH(h.dev->load_program(data_file("axpy_fill_sm89.cubin"), "axpy"), Contains("sm"));
}

}  // namespace nvrm_gpu_test
