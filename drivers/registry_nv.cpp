// The NV backends: sim-nv (the simulated AD102 on a simulated bus, GSP booted by drivers/nv: nvpci),
// sim-nvrm (the simulated AD102 behind a simulated nvidia.ko: nvrm), and nv (a real NVIDIA GPU by
// PCI address, through nvidia.ko's ioctls when nvidia.ko is bound, else through our own GSP boot).
#include "base/error.hpp"
#include "drivers/nv/chips.hpp"
#include "drivers/nv/gsp_boot.hpp"
#include "drivers/nv/hcq_device.hpp"
#include "drivers/nv/nvrm_platform.hpp"
#include "drivers/pci/device_files.hpp"
#include "drivers/pci/gpu_ids.hpp"
#include "drivers/pci/open.hpp"
#include "drivers/registry_internal.hpp"
#include "drivers/sim/firmware_path.hpp"
#include "drivers/sim/nvgpu/ad102.hpp"
#include "drivers/sim/nvgpu/fake_nvidia.hpp"
#include "drivers/sim/nvgpu/nvrm_gpu.hpp"
#include "drivers/sim/nvgpu/rm_gsp_server.hpp"
#include "drivers/sim/nvgpu/rm_layouts.hpp"
#include "drivers/sim/nvgpu/rm_model.hpp"
#include "drivers/sim/nvgpu/synthetic_gsp.hpp"
#include "firmware-loader/search_path.hpp"

#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <sys/stat.h>

namespace baregpu::registry::detail {

namespace {

// What every NVIDIA HCQ device takes: both rings, GP entries per channel, memory and staging.
UriOptions& nv_queue_options(UriOptions& u, nv::NvHcqOptions& o) {
    ring_options(u, o);
    u.count("gpfifo_entries", o.gpfifo_entries, "GP entries per channel, a power of two");
    return memory_options(u, o);
}

// ---- sim-nv:ad102 ---------------------------------------------------------------------------

// "sim-nv:ad102?...": the simulated AD102 booted through GSP by drivers/nv (NVPCI), its RM the
// model's RmModel behind GSP-RM; the RM model announces channels to the model's engines and the
// engines' faults come back as GSP OS_ERROR_LOG events (what real GSP-RM posts for a channel error).
constexpr const char* kAd102Booter = "nvidia/ad102/gsp/booter_load-570.144.bin";
constexpr const char* kAd102Bootloader = "nvidia/ad102/gsp/bootloader-570.144.bin";
// Xid numbers GSP-RM reports in rpc_os_error_log_v17_00.exceptType (ROBUST_CHANNEL_* in nverror.h).
constexpr uint32_t kXidMmuFault = 31, kXidGrException = 13, kXidPbdmaError = 32;

struct SimNv {
    std::shared_ptr<pci::sim::SimBus> bus;
    sim::nvgpu::Ad102Model* model = nullptr;
    std::shared_ptr<sim::nvgpu::RmModel> rm;
};

// The simulated AD102's VRAM: from 64 MiB (what RM keeps for itself leaves room for buffers) to
// 64 GiB (more than any AD102 board has), in 2 MiB pages.
void check_sim_vram(const hcq::DeviceUri& uri, uint64_t vram) {
    if (vram < (64ull << 20) || vram > (64ull << 30) || vram % (2ull << 20) != 0) {
        throw Error(uri.name(), fmt::format("option vram={}: the simulated AD102 has from 64M to 64G of VRAM, a multiple of 2M", vram));
    }
}

std::shared_ptr<hcq::Device> open_sim_nv(const hcq::DeviceUri& uri) {
    if (uri.name() != "sim-nv:ad102") throw Error(uri.name(), "unknown simulated NVIDIA GPU: the model is sim-nv:ad102");
    nv::NvHcqOptions options;
    uint64_t vram = 1ull << 30;
    std::optional<std::string> bus_name;
    UriOptions u(uri);
    nv_queue_options(u, options).bytes("vram", vram, "the model's VRAM bytes, default 1 GiB").text("bus", bus_name, kBusHelp).done();
    check_sim_vram(uri, vram);

    // The real ad102 booter / bootloader from the firmware search path; the GSP-RM ELF is the
    // model's synthetic stand-in (drivers/sim/nvgpu/synthetic_gsp.hpp): gsp-570.144.bin is not available.
    const fw::FirmwareSearchPath path = sim::firmware_search_path();
    std::optional<std::filesystem::path> booter = path.find(kAd102Booter);
    if (!booter) {
        throw Error(uri.name(), fmt::format("{} is not in the firmware search path ($BAREGPU_FIRMWARE_PATH, {}, /lib/firmware/updates, "
                                            "/lib/firmware); sim-nv:ad102 boots GSP with the real ad102 booter",
                                            kAd102Booter, sim::carried_firmware_dir().string()));
    }
    nv::GspFirmware firmware;
    firmware.booter_name = kAd102Booter;
    firmware.bootloader_name = kAd102Bootloader;
    firmware.gsp_name = "synthetic gsp-570.144.bin (drivers/sim/nvgpu)";
    firmware.booter_load = path.load(kAd102Booter).bytes;
    firmware.bootloader = path.load(kAd102Bootloader).bytes;
    firmware.gsp_elf = sim::nvgpu::synthetic_gsp_elf();

    auto sim = std::make_shared<SimNv>();
    sim->bus = sim_bus_for(bus_name, pci::sim::Transport::pcie_gen4_x16());
    sim->rm = std::make_shared<sim::nvgpu::RmModel>();
    sim::nvgpu::Ad102Options o;
    o.server = std::make_shared<sim::nvgpu::RmGspServer>(sim->rm);
    // booter <dir>/nvidia/ad102/gsp/...: the model wants <dir>.
    o.firmware_dir = booter->parent_path().parent_path().parent_path().parent_path().string();
    o.vram_bytes = vram;
    auto model = sim::nvgpu::make_ad102(std::move(o));
    sim->model = model.get();
    const pci::PciAddress address = sim->bus->attach(std::move(model));
    options.name = sim_device_name(uri, bus_name, address);
    std::unique_ptr<pci::PciDevice> pci = sim->bus->open(address);

    // RM <-> engines: channels RM allocates run on the engines; engine faults are posted by GSP-RM.
    sim::nvgpu::GpuEngines& engines = sim->model->engines();
    sim::nvgpu::RmEngineHooks hooks;
    hooks.channel_allocated = [&engines](const sim::nvgpu::RmChannelInfo& c) {
        engines.register_channel(c.token, {c.gpfifo_va, c.gpfifo_entries, c.userd_va, c.userd_vram, c.page_directory_base, sim::nvgpu::MmuFormat::v2,
                                           c.name});
    };
    hooks.channel_freed = [&engines](uint32_t token) { engines.unregister_channel(token); };
    sim->rm->set_engine_hooks(std::move(hooks));
    sim::nvgpu::Ad102Model* m = sim->model;
    engines.set_hooks({}, [m](const sim::nvgpu::EngineFault& f) {
        using Kind = sim::nvgpu::EngineFault::Kind;
        const uint32_t xid = f.kind == Kind::mmu ? kXidMmuFault : f.kind == Kind::bad_gp_entry ? kXidPbdmaError : kXidGrException;
        const char* kind = f.kind == Kind::mmu            ? "MMU page fault"
                           : f.kind == Kind::bad_method   ? "bad method"
                           : f.kind == Kind::bad_class    ? "bad class"
                           : f.kind == Kind::bad_launch   ? "bad launch"
                                                          : "bad GP entry";
        const std::string text = fmt::format("Xid {}: {} at VA {:#x}: {}", xid, kind, f.address, f.what);
        // rpc_os_error_log_v17_00 {exceptType, runlistId, chid, errString[0x100]}
        std::vector<std::byte> payload(12 + 0x100);
        std::memcpy(payload.data(), &xid, 4);
        std::memcpy(payload.data() + 8, &f.token, 4);
        std::memcpy(payload.data() + 12, text.data(), std::min<size_t>(text.size(), 0xff));
        m->post_event(0x1006 /* NV_VGPU_MSG_EVENT_OS_ERROR_LOG */, payload);
    });

    std::unique_ptr<nv::GspDevice> gsp = nv::GspDevice::open(*pci, firmware);
    options.keepalive = sim;
    std::shared_ptr<hcq::Device> device = nv::NvHcqDevice::create(std::move(pci), std::move(gsp), std::move(options));
    SimParts parts;
    parts.bus = sim->bus;
    parts.address = address;
    remember_sim(device, std::move(parts));
    return device;
}

// ---- sim-nvrm:ad102 -------------------------------------------------------------------------

// "sim-nvrm:ad102?...": drivers/nv over nvidia.ko's ioctls (NvrmPlatform) where nvidia.ko is the
// simulated one (drivers/sim/nvgpu/fake_nvidia.hpp) with a simulated AD102 behind it
// (drivers/sim/nvgpu/nvrm_gpu.hpp: the same engines sim-nv:ad102 runs, RM owning VRAM and page tables).
struct SimNvrm {
    std::shared_ptr<sim::nvgpu::RmModel> rm;
    std::shared_ptr<sim::nvgpu::NvrmGpu> gpu;
    std::unique_ptr<sim::nvgpu::FakeNvidia> nvidia;
    ~SimNvrm() {
        nvidia.reset();
        gpu.reset();  // engines stop before the model goes
    }
};

std::shared_ptr<hcq::Device> open_sim_nvrm(const hcq::DeviceUri& uri) {
    const bool h100 = uri.name() == "sim-nvrm:h100";
    if (uri.name() != "sim-nvrm:ad102" && !h100)
        throw Error(uri.name(), "unknown simulated NVIDIA GPU behind nvidia.ko: the models are sim-nvrm:ad102 and sim-nvrm:h100");
    nv::NvHcqOptions options;
    uint64_t vram = 1ull << 30;
    std::optional<std::string> driver;
    UriOptions u(uri);
    nv_queue_options(u, options)
        .bytes("vram", vram, "the model's VRAM bytes, default 1 GiB")
        .text("driver", driver, "the nvidia.ko version RM reports, default 570.144 (ad102) / 580.142 (h100)")
        .done();
    check_sim_vram(uri, vram);
    options.name = uri.name();

    auto sim = std::make_shared<SimNvrm>();
    sim::nvgpu::RmModelOptions rm;
    rm.driver_version = driver.value_or(h100 ? "580.142" : "570.144");
    rm.runlist_id = 1;  // tokens are not channel ids (nvidia.ko's Xid lines print the channel id)
    if (h100) {
        // GH100's usermode, channel, copy and compute classes (RM's g_gpu_class_list.c lists no Ampere/Ada ones for it);
        // GMMU v3's 57-bit VA range (kern_gmmu.c maxVASize). The engines behind it are the AD102's, held to Hopper's
        // host-class and QMD V04 rules per channel class.
        rm.classes = {sim::nvgpu::rm::kHopperUsermode, sim::nvgpu::rm::kHopperGpfifo, sim::nvgpu::rm::kHopperDmaCopyA,
                      sim::nvgpu::rm::kHopperComputeA};
        rm.max_va_size = uint64_t{1} << 57;
    }
    sim->rm = std::make_shared<sim::nvgpu::RmModel>(rm);
    sim->gpu = std::make_shared<sim::nvgpu::NvrmGpu>(sim->rm, sim::nvgpu::NvrmGpuOptions{uri.name(), vram});
    // 10de:2330: H100 SXM5 80GB (pci.ids).
    sim->nvidia = std::make_unique<sim::nvgpu::FakeNvidia>(sim->rm, h100 ? uint16_t{0x2330} : sim::nvgpu::kAd102DeviceId, sim->gpu);
    // Buffers may take VRAM less what RM keeps for page tables and channel memory (1/16, at least 16 MiB).
    const uint64_t memory = vram - std::max<uint64_t>(vram / 16, 16ull << 20);
    options.keepalive = sim;
    return nv::NvHcqDevice::create(nv::NvrmPlatform::open(*sim->nvidia, 0, memory), std::move(options));
}

// ---- nv:<pci address> -----------------------------------------------------------------------

// nvrm's budget for buffers when memory= is not given: RM is not asked for the VRAM size yet
// (drivers/nv/README.md), and every Ada card has at least this much.
constexpr uint64_t kNvrmDefaultMemory = 4ull << 30;

// "nv:0000:01:00.0" over nvidia.ko: its RM through /dev/nvidiactl and the /dev/nvidia<minor> of the
// card at that address.
std::shared_ptr<hcq::Device> open_nvrm(const hcq::DeviceUri& uri, const RealGpu& gpu, nv::NvHcqOptions options) {
    struct stat st {};
    if (::stat("/dev/nvidiactl", &st) != 0) {
        throw Error(uri.name(), fmt::format("no /dev/nvidiactl: nvidia.ko is not loaded, so the nvrm transport cannot reach {} "
                                            "(`modprobe nvidia`, or bind the GPU to vfio-pci for nvpci: udev/README.md)",
                                            gpu.address.to_string()));
    }
    const uint64_t memory = options.memory_bytes != 0 ? options.memory_bytes : kNvrmDefaultMemory;
    std::unique_ptr<nv::NvrmPlatform> platform = nv::NvrmPlatform::open(pci::host_device_files(), gpu.address.to_string(), memory);
    // Without a PCI bus to read (containers) the chip is checked here, from nvidia.ko's card list.
    if (nv::find_chip_by_device_id(platform->gpu().device_id) == nullptr) {
        throw UnsupportedError(uri.name(), fmt::format("10de:{:04x} is not a GPU drivers/nv drives (it drives {})", platform->gpu().device_id,
                                                       pci::driven_chips("nv")));
    }
    return nv::NvHcqDevice::create(std::move(platform), std::move(options));
}

// "nv:0000:01:00.0" over our own GSP boot (nvpci): the PCI function through VFIO (or sysfs), GSP-RM
// booted with the system's firmware (never the build's carried files, which are the simulated
// devices'). Real NVIDIA silicon has not been driven yet: expect the boot to stop with an error
// naming its stage.
std::shared_ptr<hcq::Device> open_nvpci(const hcq::DeviceUri& uri, const RealGpu& gpu, pci::Backend access,
                                        nv::NvHcqOptions options) {
    if (access == pci::Backend::Vfio) require_vfio_ready(uri, gpu);
    const nv::NvChip* chip = nv::find_chip_by_device_id(gpu.function->device_id);  // the verdict said nv: never null
    if (chip == nullptr) throw UnsupportedError(uri.name(), fmt::format("not a chip drivers/nv drives ({})", pci::driven_chips("nv")));
    if (chip->gsp_version.empty())
        throw UnsupportedError(uri.name(), fmt::format("{} is driven through nvidia.ko only (transport=nvrm): booting its GSP ourselves "
                                                       "goes through the FSP, which nvpci does not do", chip->name));
    nv::GspFirmware firmware;
    try {
        firmware = nv::load_gsp_firmware(fw::FirmwareSearchPath::from_environment(), chip->name, chip->gsp_version);
    } catch (const Error& e) {
        throw Error(uri.name(), fmt::format("nvpci boots GSP-RM {} from linux-firmware's nvidia/{}/gsp/ files: {} (install them, or "
                                            "point $BAREGPU_FIRMWARE_PATH at them)",
                                            chip->gsp_version, chip->name, e.what()));
    }
    pci::OpenOptions open_options;
    open_options.backend = access;
    open_options.sysfs_root = sysfs_root();
    std::unique_ptr<pci::PciDevice> pci = pci::open_device(gpu.address, open_options);
    std::unique_ptr<nv::GspDevice> gsp = nv::GspDevice::open(*pci, firmware);
    return nv::NvHcqDevice::create(std::move(pci), std::move(gsp), std::move(options));
}

// The transport and access nv:<address> takes, and the GPU checked: the one decision route() shows
// and open_nv follows. transport/access: as the URI gives them ("" when absent).
struct NvRoute {
    RealGpu gpu;
    std::string transport;  // "nvrm", "nvpci"
    pci::Backend access = pci::Backend::Vfio;
};

NvRoute decide_nv_route(const hcq::DeviceUri& uri, const std::string& transport, const std::string& access) {
    // nvrm needs no PCI bus of ours, only nvidia.ko's nodes: a container may show no /sys/bus/pci,
    // and then the transport can only be nvrm.
    NvRoute r{check_real_gpu(uri, "nv", /*require_bus=*/transport == "nvpci"), transport, pci::Backend::Vfio};
    // The transport: as asked, else from the driver bound to it (the rule `baregpu devices` shows).
    if (r.transport.empty()) r.transport = r.gpu.function ? std::string(pci::nv_transport_for(r.gpu.function->driver)) : "nvrm";
    if (access == "sysfs") r.access = pci::Backend::Sysfs;
    return r;
}

constexpr const char* kTransportHelp =
    "nvrm (nvidia.ko's ioctls) or nvpci (baregpu boots GSP-RM itself); default: nvrm when nvidia.ko is bound, else nvpci";
constexpr const char* kAccessHelp = "how nvpci reaches the PCI function: vfio (the default) or sysfs (root)";

std::shared_ptr<hcq::Device> open_nv(const hcq::DeviceUri& uri) {
    nv::NvHcqOptions options;
    std::string transport, access;
    UriOptions u(uri);
    nv_queue_options(u, options)
        .choice("transport", transport, {"nvrm", "nvpci"}, kTransportHelp)
        .choice("access", access, {"vfio", "sysfs"}, kAccessHelp)
        .done();
    options.name = uri.name();
    NvRoute r = decide_nv_route(uri, transport, access);
    if (r.transport == "nvrm") return open_nvrm(uri, r.gpu, std::move(options));
    return open_nvpci(uri, r.gpu, r.access, std::move(options));
}

}  // namespace

void register_nv_backends(hcq::Registry& registry) {
    hcq::Backend sim_nv;
    sim_nv.scheme = "sim-nv";
    sim_nv.description = "the simulated AD102 (drivers/sim/nvgpu) booted through GSP by drivers/nv (nvpci); kernels run as host code";
    sim_nv.enumerate = [] { return std::vector<std::string>{"sim-nv:ad102"}; };
    sim_nv.open = open_sim_nv;
    registry.add(std::move(sim_nv));
    hcq::Backend sim_nvrm;
    sim_nvrm.scheme = "sim-nvrm";
    sim_nvrm.description = "the simulated AD102 behind a simulated nvidia.ko (drivers/sim/nvgpu/fake_nvidia) driven by drivers/nv "
                           "over its ioctls (nvrm); kernels run as host code";
    sim_nvrm.enumerate = [] { return std::vector<std::string>{"sim-nvrm:ad102", "sim-nvrm:h100"}; };
    sim_nvrm.open = open_sim_nvrm;
    registry.add(std::move(sim_nvrm));
    hcq::Backend nv;
    nv.scheme = "nv";
    nv.description = "NVIDIA GPUs driven by drivers/nv: nv:<pci address> through nvidia.ko (nvrm) when it is bound, else through "
                     "our own GSP boot over vfio-pci (nvpci); ?transport=nvrm|nvpci overrides";
    nv.real_hardware = true;
    nv.enumerate = [] { return enumerate_real("nv"); };
    nv.open = open_nv;
    registry.add(std::move(nv));
}

Route nv_route(const hcq::DeviceUri& uri) {
    std::string transport, access;
    UriOptions u(uri);  // only what decides the route; the queue options do not
    u.choice("transport", transport, {"nvrm", "nvpci"}, kTransportHelp).choice("access", access, {"vfio", "sysfs"}, kAccessHelp);
    const NvRoute r = decide_nv_route(uri, transport, access);
    return {"nv", r.transport, r.transport == "nvrm" ? "" : r.access == pci::Backend::Sysfs ? "sysfs" : "vfio"};
}

std::vector<BuiltinDevice> nv_builtin_devices() {
    return {
        {"sim-nv:ad102", "simulated", true,
         fmt::format("model of NVIDIA AD102 / RTX 4090 (Ada), GSP-RM booted and driven by drivers/nv (nvpci) on the simulated PCI "
                     "bus ({}): a simulated GPU (HCQ device)",
                     presented(sim::nvgpu::make_ad102()))},
        // nvidia.ko is not on the PCI bus: the simulated driver with the AD102's engines behind it.
        {"sim-nvrm:ad102", "simulated", true,
         "model of NVIDIA AD102 / RTX 4090 (Ada) behind a simulated nvidia.ko (/dev/nvidiactl, /dev/nvidia0; RM owns VRAM and the "
         "page tables), driven by drivers/nv over its ioctls (nvrm): a simulated GPU (HCQ device)"},
        {"sim-nvrm:h100", "simulated", true,
         "model of NVIDIA GH100 / H100 (Hopper: HOPPER_CHANNEL_GPFIFO_A, HOPPER_COMPUTE_A with QMD V04, HOPPER_DMA_COPY_A) behind "
         "a simulated nvidia.ko 580, driven by drivers/nv over its ioctls (nvrm): a simulated GPU (HCQ device)"},
    };
}

}  // namespace baregpu::registry::detail
