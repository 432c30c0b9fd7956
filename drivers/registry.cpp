#include "drivers/registry.hpp"

#include "base/error.hpp"
#include "drivers/am/am_device.hpp"
#include "drivers/am/hcq_device.hpp"
#include "drivers/cpu/cpu_device.hpp"
#include "drivers/nv/gsp_boot.hpp"
#include "drivers/nv/hcq_device.hpp"
#include "drivers/pci/bar.hpp"
#include "drivers/pci/device_lock.hpp"
#include "drivers/pci/enumerate.hpp"
#include "drivers/pci/open.hpp"
#include "drivers/pci/sim_bus.hpp"
#include "drivers/pci/usb_pci_device.hpp"
#include "drivers/qcom/qcom_device.hpp"
#include "drivers/registry_am.hpp"
#include "drivers/registry_sim_nvrm.hpp"
#include "drivers/sim/amdgpu/navi.hpp"
#include "drivers/sim/amdgpu/state_file.hpp"
#include "drivers/sim/asm24/sim_asm24.hpp"
#include "drivers/sim/edu.hpp"
#include "drivers/sim/firmware_path.hpp"
#include "drivers/sim/kgsl/kgsl_abi.hpp"
#include "drivers/sim/kgsl/sim_kgsl.hpp"
#include "drivers/sim/nvgpu/ad102.hpp"
#include "drivers/sim/nvgpu/rm_gsp_server.hpp"
#include "drivers/sim/nvgpu/rm_model.hpp"
#include "drivers/sim/nvgpu/synthetic_gsp.hpp"
#include "firmware-loader/search_path.hpp"
#include "drivers/usb/libusb_backend.hpp"

#include <fmt/format.h>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <unistd.h>

namespace baregpu::registry {

namespace {

// One simulated device: its URI, what it models, whether it is an HCQ device, and how to build
// the model. A simulated GPU is one more line here once its model and driver exist, e.g.
//   {"sim-am:navi31", "AMD Navi31 (RDNA3) model", true, make_navi31},
// where make_navi31 builds the model and registration hands the bus's PciDevice to drivers/am.
struct SimulatedModel {
    std::string_view name;
    std::string_view models;
    bool hcq_device;
    // Builds a model only to read what it presents (presented()): one that shares no state with a
    // driver (the AM models are ephemeral here: no state file is created or mapped).
    std::unique_ptr<pci::sim::SimDeviceModel> (*build)();
};

// ephemeral: no state file (what presented() builds: another process may be driving the chip).
std::unique_ptr<pci::sim::SimDeviceModel> make_navi(sim::amdgpu::Asic asic, bool ephemeral) {
    sim::amdgpu::ModelOptions options;
    options.asic = asic;
    options.ephemeral = ephemeral;
    return sim::amdgpu::make_model(options);
}

// Both sim-am chips are HCQ devices (drivers/am queues, issue 7): GC 11 / SDMA 6 and GC 12 / SDMA 7.
const SimulatedModel kSimulatedModels[] = {
    {"sim-edu", "QEMU's edu test DMA device (docs/specs/edu.rst)", false,
     [] { return std::unique_ptr<pci::sim::SimDeviceModel>(std::make_unique<sim::EduDevice>()); }},
    {"sim-am:navi31", "AMD Navi31 / RX 7900 XTX (RDNA3), driven by drivers/am", true,
     [] { return make_navi(sim::amdgpu::Asic::navi31, /*ephemeral=*/true); }},
    {"sim-am:navi48", "AMD Navi48 / RX 9070 XT (RDNA4), driven by drivers/am", true,
     [] { return make_navi(sim::amdgpu::Asic::navi48, /*ephemeral=*/true); }},
    {"sim-nv:ad102", "NVIDIA AD102 / RTX 4090 (Ada), GSP-RM booted and driven by drivers/nv (NVPCI)", true,
     [] { return std::unique_ptr<pci::sim::SimDeviceModel>(sim::nvgpu::make_ad102()); }},
};

// What the model presents on the simulated bus: "1234:11e8, BAR0 1 MiB".
std::string presented(const SimulatedModel& entry) {
    pci::sim::SimBus bus;
    pci::PciAddress address = bus.attach(entry.build());
    std::unique_ptr<pci::PciDevice> device = bus.open(address);
    pci::PciIdentity id = device->identity();
    std::string text = fmt::format("{:04x}:{:04x}", id.vendor_id, id.device_id);
    for (unsigned i = 0; i < pci::kBarCount; ++i) {
        const pci::BarInfo& bar = device->bar_info(i);
        if (bar.type != pci::BarType::None) text += fmt::format(", BAR{} {}", i, pci::format_size(bar.size));
    }
    return text;
}

std::string field(std::string_view cpuinfo, std::string_view key) {
    size_t pos = 0;
    while (pos < cpuinfo.size()) {
        size_t eol = cpuinfo.find('\n', pos);
        std::string_view line = cpuinfo.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
        pos = eol == std::string_view::npos ? cpuinfo.size() : eol + 1;
        size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        std::string_view name = line.substr(0, colon);
        while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
        if (name != key) continue;
        std::string_view value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
        while (!value.empty() && (value.back() == ' ' || value.back() == '\r')) value.remove_suffix(1);
        if (!value.empty()) return std::string(value);
    }
    return "";
}

// Simulated devices that should reach each other as peers sit on one simulated bus (one root
// complex): the URI option bus=<name> puts every device opened with the same name on one
// process-wide SimBus, alive while any device on it is. Without it each device has a bus of its own.
std::mutex sim_buses_mutex;
std::map<std::string, std::weak_ptr<pci::sim::SimBus>> sim_buses;

std::shared_ptr<pci::sim::SimBus> sim_bus_for(const std::optional<std::string>& name, const pci::sim::Transport& link) {
    if (!name) return std::make_shared<pci::sim::SimBus>(link);
    std::lock_guard lock(sim_buses_mutex);
    std::shared_ptr<pci::sim::SimBus> bus = sim_buses[*name].lock();
    if (!bus) {
        bus = std::make_shared<pci::sim::SimBus>(link);
        sim_buses[*name] = bus;
    }
    return bus;
}

// The HCQ name of a device on a named bus: two models of one kind (two ad102s) need two names
// (and so two peer groups): "sim-nv:ad102@p2p/0000:00:02.0".
std::string sim_device_name(const hcq::DeviceUri& uri, const std::optional<std::string>& bus, pci::PciAddress address) {
    return bus ? fmt::format("{}@{}/{}", uri.name(), *bus, address.to_string()) : uri.name();
}

// Which bus function each open simulated GPU is, for the bus hooks (sim_bus_traffic, ...).
struct SimFunctionRef {
    std::weak_ptr<hcq::Device> device;
    std::weak_ptr<pci::sim::SimBus> bus;
    pci::PciAddress address;
};
std::mutex sim_functions_mutex;
std::vector<SimFunctionRef> sim_functions;

void remember_sim_function(const std::shared_ptr<hcq::Device>& device, const std::shared_ptr<pci::sim::SimBus>& bus,
                           pci::PciAddress address) {
    std::lock_guard lock(sim_functions_mutex);
    std::erase_if(sim_functions, [](const SimFunctionRef& f) { return f.device.expired(); });
    sim_functions.push_back({device, bus, address});
}

std::optional<std::pair<std::shared_ptr<pci::sim::SimBus>, pci::PciAddress>> sim_function_of(hcq::Device& device) {
    std::lock_guard lock(sim_functions_mutex);
    for (const SimFunctionRef& f : sim_functions) {
        auto alive = f.device.lock();
        auto bus = f.bus.lock();
        if (alive.get() == &device && bus) return std::make_pair(bus, f.address);
    }
    return std::nullopt;
}

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

std::shared_ptr<hcq::Device> open_sim_nv(const hcq::DeviceUri& uri) {
    if (uri.name() != "sim-nv:ad102") throw Error(uri.name(), "unknown simulated NVIDIA GPU: the model is sim-nv:ad102");
    nv::NvHcqOptions options;
    read_nv_queue_options(uri, options);
    const uint64_t vram = uri.option_u64("vram", 1ull << 30);
    const std::optional<std::string> bus_name = uri.option("bus");
    uri.reject_unused(std::string(kNvQueueOptionsHelp) + ", bus (a simulated bus shared with the devices opened with the same "
                      "name: peers)");

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
        engines.register_channel(c.token, {c.gpfifo_va, c.gpfifo_entries, c.userd_va, c.page_directory_base, sim::nvgpu::MmuFormat::v2,
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
    remember_sim_function(device, sim->bus, address);
    return device;
}

}  // namespace

namespace {

// "sim-am:navi31?compute_ring=...&copy_ring=...": the simulated chip brought up by the real AM
// driver, its kernels run as host code by the model (ARCHITECTURE.md, code objects).
// The models behind open sim-am devices, for the fault-injection hooks.
std::mutex sim_models_mutex;
std::vector<std::pair<std::weak_ptr<hcq::Device>, sim::amdgpu::NaviModel*>> sim_models;

AmTarget open_am_with_model(std::string_view uri, am::AmOptions options, std::string_view sim_link,
                            sim::amdgpu::NaviModel** model, std::shared_ptr<pci::sim::SimBus> bus = nullptr,
                            pci::PciAddress* address_out = nullptr);

std::shared_ptr<hcq::Device> open_sim_am(const hcq::DeviceUri& uri) {
    am::AmHcqOptions options;
    options.name = uri.name();
    // Host code by default: what the model runs. isa=native loads the chip's own AMDGPU code
    // objects (checked and uploaded; the model cannot execute them).
    const bool simulated = uri.scheme() == "sim-am" || uri.name() == "am:usb:sim";
    const std::string isa = uri.option("isa").value_or(simulated ? "host" : "native");
    if (isa != "host" && isa != "native") throw Error(uri.name(), fmt::format("isa={}: host or native", isa));
    options.isa = isa == "native" ? am::KernelIsa::native : am::KernelIsa::host;
    const uint64_t ring = uri.option_u64("ring", 0);  // both rings, as the cpu backend's option
    if (ring != 0) options.compute_ring_bytes = options.copy_ring_bytes = ring;
    options.compute_ring_bytes = uri.option_u64("compute_ring", options.compute_ring_bytes);
    options.copy_ring_bytes = uri.option_u64("copy_ring", options.copy_ring_bytes);
    options.memory_bytes = uri.option_u64("memory", 0);
    options.compute_queues = static_cast<uint32_t>(uri.option_u64("compute_queues", 1));
    options.staging_bytes = uri.option_u64("staging", options.staging_bytes);
    options.staging_slots = static_cast<uint32_t>(uri.option_u64("staging_slots", options.staging_slots));
    const std::optional<std::string> bus_name = uri.option("bus");
    options.peer_va_bytes = uri.option_u64("peer_va", options.peer_va_bytes);
    uri.reject_unused("ring, compute_ring, copy_ring (bytes, powers of two of at least 4 KiB), memory (bytes buffers may map), "
                      "staging, staging_slots (copy_in/copy_out slots), compute_queues (1-8 HQDs), isa (host or native), bus (a "
                      "simulated bus shared with the devices opened with the same name: peers), peer_va (bytes of the window "
                      "peers are mapped in)");
    sim::amdgpu::NaviModel* model = nullptr;
    std::shared_ptr<pci::sim::SimBus> bus = bus_name ? sim_bus_for(bus_name, pci::sim::Transport::pcie_gen4_x16()) : nullptr;
    pci::PciAddress address;
    AmTarget target = open_am_with_model(uri.name(), {}, {}, &model, bus, &address);
    options.keepalive = target.keepalive;
    options.name = sim_device_name(uri, bus_name, address);
    std::shared_ptr<hcq::Device> device = am::AmHcqDevice::create(std::move(target.device), std::move(options));
    remember_sim_function(device, std::static_pointer_cast<pci::sim::SimBus>(target.keepalive), address);
    std::lock_guard lock(sim_models_mutex);
    std::erase_if(sim_models, [](const auto& entry) { return entry.first.expired(); });
    sim_models.emplace_back(device, model);
    return device;
}

}  // namespace

namespace {

// The simulated KGSL device behind drivers/qcom's syscall seam: the driver cannot tell it from
// /dev/kgsl-3d0 except by what it answers.
class SimKgslSyscalls final : public qcom::KgslSyscalls {
public:
    explicit SimKgslSyscalls(std::shared_ptr<sim::kgsl::SimKgsl> sim) : sim_(std::move(sim)) {}
    int open(const char* path, int flags, int& err) override { return sim_->open(path, flags, err); }
    int close(int fd) override { return sim_->close(fd); }
    int ioctl(int fd, unsigned long request, void* arg, int& err) override { return sim_->ioctl(fd, request, arg, err); }
    void* mmap(void* addr, uint64_t length, int prot, int flags, int fd, uint64_t offset, int& err) override {
        return sim_->mmap(addr, length, prot, flags, fd, offset, err);
    }
    int munmap(void* addr, uint64_t length) override { return sim_->munmap(addr, length); }
    std::string kernel_log(uint32_t context_id) override { return sim_->kernel_log(context_id); }

private:
    std::shared_ptr<sim::kgsl::SimKgsl> sim_;
};

// The models behind open sim-qcom devices, for the fault-injection hooks.
std::mutex sim_kgsl_mutex;
std::vector<std::pair<std::weak_ptr<hcq::Device>, std::shared_ptr<sim::kgsl::SimKgsl>>> sim_kgsl_models;

std::shared_ptr<sim::kgsl::SimKgsl> kgsl_model_of(hcq::Device& device) {
    std::lock_guard lock(sim_kgsl_mutex);
    for (const auto& [weak, model] : sim_kgsl_models) {
        if (auto alive = weak.lock(); alive.get() == &device) return model;
    }
    return nullptr;
}

// "sim-qcom:a630?ring=...&va=...": the simulated KGSL device driven by drivers/qcom; kernels run as
// host code by the model's A630 command processor.
// The simulated Adreno chips: KGSL chip_id (core, major, minor, patch bytes).
struct SimulatedAdreno {
    std::string_view name;
    uint32_t chip_id;
    std::string_view what;
};
const SimulatedAdreno kSimulatedAdrenos[] = {
    {"a630", 0x06030000, "Qualcomm Adreno 630 (A6xx; Snapdragon 845)"},
    {"a730", 0x07030001, "Qualcomm Adreno 730 (A7xx: CP_EVENT_WRITE7, the moved SP_CS_* registers; Snapdragon 8 Gen 1)"},
};

std::shared_ptr<hcq::Device> open_sim_qcom(const hcq::DeviceUri& uri) {
    const SimulatedAdreno* chip = nullptr;
    for (const SimulatedAdreno& a : kSimulatedAdrenos) {
        if (uri.path() == a.name) chip = &a;
    }
    if (!chip) throw Error(uri.name(), "unknown simulated Adreno: the models are sim-qcom:a630 and sim-qcom:a730");
    qcom::QcomOptions options;
    options.name = uri.name();
    options.isa = qcom::KernelIsa::host;
    options.ring_bytes = uri.option_u64("ring", options.ring_bytes);
    options.va_bytes = uri.option_u64("va", options.va_bytes);
    options.memory_bytes = uri.option_u64("memory", 0);
    options.staging_bytes = uri.option_u64("staging", options.staging_bytes);
    options.staging_slots = static_cast<uint32_t>(uri.option_u64("staging_slots", options.staging_slots));
    uri.reject_unused("ring (bytes of each KGSL context's command ring, a multiple of 4 KiB), va (bytes of the SVM window), "
                      "memory (bytes buffers may map), staging, staging_slots (copy_in/copy_out slots)");
    auto model = std::make_shared<sim::kgsl::SimKgsl>(sim::kgsl::SimKgsl::Options{chip->chip_id});
    std::shared_ptr<hcq::Device> device = qcom::QcomDevice::create(std::make_shared<SimKgslSyscalls>(model), std::move(options));
    std::lock_guard lock(sim_kgsl_mutex);
    std::erase_if(sim_kgsl_models, [](const auto& entry) { return entry.first.expired(); });
    sim_kgsl_models.emplace_back(device, model);
    return device;
}

}  // namespace

bool inject_kgsl_hang(hcq::Device& device, bool hang) {
    auto model = kgsl_model_of(device);
    if (model) model->hang_context(0, hang);
    return model != nullptr;
}

bool inject_kgsl_wait_error(hcq::Device& device, int err) {
    auto model = kgsl_model_of(device);
    if (model) model->fail_waits(err);
    return model != nullptr;
}

bool inject_kgsl_fault(hcq::Device& device, const std::string& why) {
    auto model = kgsl_model_of(device);
    if (model) model->fault_context(0, why);
    return model != nullptr;
}

bool inject_dispatch_hang(hcq::Device& device, bool hang) {
    std::lock_guard lock(sim_models_mutex);
    for (const auto& [weak, model] : sim_models) {
        if (auto alive = weak.lock(); alive.get() == &device) {
            model->inject_dispatch_hang(hang);
            return true;
        }
    }
    return false;
}

std::optional<SimBusTraffic> sim_bus_traffic(hcq::Device& device) {
    auto f = sim_function_of(device);
    if (!f) return std::nullopt;
    const pci::sim::Counters c = f->first->counters(f->second);
    return SimBusTraffic{c.dma_bytes_read, c.dma_bytes_written, c.peer_bytes_read, c.peer_bytes_written, c.iommu_faults,
                         f->first->now_ns(), c.dma_ns};
}

std::vector<std::string> sim_iommu_faults(hcq::Device& device) {
    std::vector<std::string> out;
    auto f = sim_function_of(device);
    if (!f) return out;
    const std::string name = "sim:" + f->second.to_string();
    for (const pci::sim::IommuFault& fault : f->first->iommu_faults()) {
        if (fault.device == name) out.push_back(fault.describe());
    }
    return out;
}

size_t drop_sim_peer_mappings(hcq::Device& device) {
    auto f = sim_function_of(device);
    return f ? f->first->drop_peer_mappings(f->second) : 0;
}

void register_backends(hcq::Registry& registry) {
    cpu::register_cpu_backend(registry);
    hcq::Backend sim_am;
    sim_am.scheme = "sim-am";
    sim_am.description = "simulated AMD GPUs (drivers/sim/amdgpu) driven by drivers/am; kernels run as host code";
    sim_am.enumerate = [] { return std::vector<std::string>{"sim-am:navi31", "sim-am:navi48"}; };
    sim_am.open = open_sim_am;
    registry.add(std::move(sim_am));
    // The same driver on a GPU named by where it is: am:<pci address>, am:usb:<bus>-<port> behind
    // an ASM24xx bridge, am:usb:sim (the simulated Navi31 behind the simulated bridge; issue 10).
    hcq::Backend am;
    am.scheme = "am";
    am.description = "AMD GPUs driven by drivers/am: am:<pci address>, am:usb:<bus>-<port> (ASM24xx USB bridge), am:usb:sim";
    am.enumerate = [] { return std::vector<std::string>{}; };
    am.open = open_sim_am;
    registry.add(std::move(am));
    hcq::Backend sim_nv;
    sim_nv.scheme = "sim-nv";
    sim_nv.description = "the simulated AD102 (drivers/sim/nvgpu) booted through GSP by drivers/nv (NVPCI); kernels run as host code";
    sim_nv.enumerate = [] { return std::vector<std::string>{"sim-nv:ad102"}; };
    sim_nv.open = open_sim_nv;
    registry.add(std::move(sim_nv));
    hcq::Backend sim_nvrm;
    sim_nvrm.scheme = "sim-nvrm";
    sim_nvrm.description = "the simulated AD102 behind a simulated nvidia.ko (drivers/sim/nvgpu/fake_nvidia) driven by drivers/nv over "
                          "its ioctls (nvrm); kernels run as host code";
    sim_nvrm.enumerate = [] { return std::vector<std::string>{"sim-nvrm:ad102"}; };
    sim_nvrm.open = open_sim_nvrm;
    registry.add(std::move(sim_nvrm));
    qcom::register_qcom_backend(registry);
    hcq::Backend sim_qcom;
    sim_qcom.scheme = "sim-qcom";
    sim_qcom.description = "simulated Adreno 630 / 730 behind a simulated KGSL device (drivers/sim/kgsl) driven by drivers/qcom; kernels run as host code";
    sim_qcom.enumerate = [] { return std::vector<std::string>{"sim-qcom:a630", "sim-qcom:a730"}; };
    sim_qcom.open = open_sim_qcom;
    registry.add(std::move(sim_qcom));
}

std::string describe_cpu(std::string_view cpuinfo, unsigned online_cpus) {
    std::string model = field(cpuinfo, "model name");
    if (model.empty()) model = field(cpuinfo, "Model");
    if (model.empty()) model = field(cpuinfo, "Hardware");
    if (model.empty()) {
        std::string part = field(cpuinfo, "CPU part");
        if (!part.empty()) model = "Arm CPU part " + part;
    }
    if (model.empty()) model = "unknown CPU model";
    return fmt::format("{}, {} {}", model, online_cpus, online_cpus == 1 ? "core" : "cores");
}

std::vector<BuiltinDevice> builtin_devices() {
    std::vector<BuiltinDevice> devices;

    std::ifstream file("/proc/cpuinfo");
    std::stringstream text;
    text << file.rdbuf();
    long online = ::sysconf(_SC_NPROCESSORS_ONLN);
    devices.push_back({"cpu", "cpu", true,
                       describe_cpu(text.str(), online > 0 ? static_cast<unsigned>(online) : 1) +
                           ": the host CPU as an HCQ device (the default when no GPU is found)"});

    for (const SimulatedModel& entry : kSimulatedModels) {
        std::string role = entry.hcq_device ? "a simulated GPU (HCQ device)"
                                            : "a PCI test device for drivers/pci, not an HCQ GPU";
        devices.push_back({std::string(entry.name), "simulated", entry.hcq_device,
                           fmt::format("model of {} on the simulated PCI bus ({}): {}", entry.models,
                                       presented(entry), role)});
    }
    // GPUs behind ASM24xx USB bridges (issue 10): listed from libusb (nothing without it). HCQ
    // devices with host copies of device memory (drivers/am/shadow_memory.hpp).
    for (const usb::BridgeInfo& bridge : usb::enumerate_bridges()) {
        devices.push_back({"am:usb:" + bridge.location, "usb", true,
                           fmt::format("ASM24xx USB bridge {:04x}:{:04x} at USB {}: an AMD GPU behind it is brought up by drivers/am "
                                       "over the usb backend (amctl load --device am:usb:{}); HCQ queues over shadowed memory",
                                       bridge.vendor_id, bridge.product_id, bridge.location, bridge.location)});
    }
    // KGSL is not on the PCI bus: each model is described by what its device-info property says.
    for (const SimulatedAdreno& chip : kSimulatedAdrenos) {
        sim::kgsl::SimKgsl model(sim::kgsl::SimKgsl::Options{chip.chip_id});
        int err = 0;
        int fd = model.open("/dev/kgsl-3d0", 0, err);
        sim::kgsl::devinfo info{};
        sim::kgsl::getproperty p{sim::kgsl::KGSL_PROP_DEVICE_INFO, &info, sizeof info};
        model.ioctl(fd, sim::kgsl::DEVICE_GETPROPERTY, &p, err);
        model.close(fd);
        devices.push_back({fmt::format("sim-qcom:{}", chip.name), "simulated", true,
                           fmt::format("model of a {} behind a simulated KGSL device (/dev/kgsl-3d0, chip_id 0x{:08x}, "
                                       "gpu_id {}), driven by drivers/qcom: a simulated GPU (HCQ device)",
                                       chip.what, info.chip_id, info.gpu_id)});
    }
    // nvidia.ko is not on the PCI bus either: the simulated driver with the AD102's engines behind it.
    devices.push_back({"sim-nvrm:ad102", "simulated", true,
                       "model of NVIDIA AD102 / RTX 4090 (Ada) behind a simulated nvidia.ko (/dev/nvidiactl, /dev/nvidia0; "
                       "RM owns VRAM and the page tables), driven by drivers/nv over its ioctls (nvrm): a simulated GPU (HCQ device)"});
    return devices;
}

bool is_am_uri(std::string_view uri) { return uri.starts_with("am:") || uri.starts_with("sim-am:"); }

std::string default_am_uri(std::string* note) {
    try {
        for (const pci::GpuFunction& gpu : pci::enumerate_gpus().gpus) {
            if (gpu.vendor_id == 0x1002 && am::find_asic_by_device_id(gpu.device_id) != nullptr) {
                if (note) *note = fmt::format("using the AMD GPU at {}", gpu.address.to_string());
                return "am:" + gpu.address.to_string();
            }
        }
    } catch (const Error&) {
        // No visible PCI bus (containers): the simulated chip it is.
    }
    if (note) *note = "no supported AMD GPU on the PCI bus: using the simulated sim-am:navi31";
    return "sim-am:navi31";
}

namespace {
std::string am_lock_key(std::string_view uri) {
    // am:usb:sim is the sim-am:navi31 chip (same state file) behind a simulated bridge: one lock.
    if (uri == "am:usb:sim") return am_lock_key("sim-am:navi31");
    if (uri.starts_with("sim-am:")) {
        // One simulated chip per state directory: two processes with different
        // BAREGPU_SIM_STATE_DIRs (parallel tests) drive different chips.
        const std::string dir = sim::amdgpu::StateFile::default_dir().string();
        return fmt::format("sim-am-{}-{:016x}", uri.substr(7), std::hash<std::string>{}(dir));
    }
    return "am-" + std::string(uri.substr(3));
}
}  // namespace

std::optional<pid_t> am_owner(std::string_view uri) { return pci::DeviceLock::owner_of(am_lock_key(uri)); }

AmTarget open_am(std::string_view uri, am::AmOptions options, std::string_view sim_link) {
    return open_am_with_model(uri, std::move(options), sim_link, nullptr);
}

namespace {
AmTarget open_am_with_model(std::string_view uri, am::AmOptions options, std::string_view sim_link,
                            sim::amdgpu::NaviModel** model_out, std::shared_ptr<pci::sim::SimBus> shared_bus,
                            pci::PciAddress* address_out) {
    if (options.lock_key.empty()) options.lock_key = am_lock_key(uri);
    // A simulated chip finds the firmware the build carries; a real GPU only the system's.
    if (options.firmware_dirs.empty() && (uri.starts_with("sim-am:") || uri == "am:usb:sim")) {
        const fw::FirmwareSearchPath path = sim::firmware_search_path();
        for (const std::filesystem::path& dir : path.directories()) options.firmware_dirs.push_back(dir.string());
    }
    AmTarget target;
    target.uri = std::string(uri);
    if (uri.starts_with("sim-am:")) {
        std::string_view asic = uri.substr(7);
        sim::amdgpu::Asic which;
        if (asic == "navi31") {
            which = sim::amdgpu::Asic::navi31;
        } else if (asic == "navi48") {
            which = sim::amdgpu::Asic::navi48;
        } else {
            throw Error(std::string(uri), "unknown simulated AMD GPU: the models are sim-am:navi31 and sim-am:navi48");
        }
        pci::sim::Transport link = pci::sim::Transport::pcie_gen4_x16();
        if (sim_link == "usb") {
            // Every register access one 100 µs USB round trip; bulk VRAM copies at the bridge's ~0.32 GB/s.
            link = {"usb-100us", 100'000, 100'000, 100'000, 0.32, 100'000, 0.32, 50'000'000, /*bar_mmap=*/false};
        } else if (!sim_link.empty() && sim_link != "pcie") {
            throw Error(std::string(uri), fmt::format("unknown simulated link '{}': pcie or usb", sim_link));
        }
        auto bus = shared_bus ? shared_bus : std::make_shared<pci::sim::SimBus>(link);
        std::unique_ptr<pci::sim::SimDeviceModel> model = make_navi(which, /*ephemeral=*/false);
        if (model_out) *model_out = static_cast<sim::amdgpu::NaviModel*>(model.get());
        pci::PciAddress address = bus->attach(std::move(model));
        if (address_out) *address_out = address;
        target.keepalive = bus;
        target.device = am::AmDevice::open(bus->open(address), std::move(options));
        return target;
    }
    if (uri.starts_with("am:usb:")) {
        // A GPU behind an ASM24xx bridge (issue 10): "am:usb:sim" is the simulated Navi31 behind the
        // simulated bridge (drivers/sim/asm24), "am:usb:3-2" a real bridge at bus 3, port 2.
        const std::string_view where = uri.substr(7);
        std::unique_ptr<usb::UsbBackend> link;
        if (where == "sim") {
            std::unique_ptr<pci::sim::SimDeviceModel> model = make_navi(sim::amdgpu::Asic::navi31, /*ephemeral=*/false);
            if (model_out) *model_out = static_cast<sim::amdgpu::NaviModel*>(model.get());
            link = std::make_unique<sim::asm24::SimAsm24Bridge>(sim::asm24::SimAsm24Bridge::Options{}, std::move(model));
        } else {
            link = usb::open_libusb(where);
        }
        pci::UsbOpenOptions usb_options;
        usb_options.write_once_bars = {2};  // AMD BAR2 is the doorbell aperture: only the host writes it
        target.device = am::AmDevice::open(pci::open_usb_device(std::move(link), usb_options), std::move(options));
        return target;
    }
    if (uri.starts_with("am:")) {
        auto address = pci::PciAddress::parse(uri.substr(3));
        if (!address) throw Error(std::string(uri), "not a PCI address: expected am:0000:03:00.0");
        target.device = am::AmDevice::open(pci::open_device(*address), std::move(options));
        return target;
    }
    throw Error(std::string(uri), "not an AM device URI (am:<pci address>, am:usb:<bus>-<port>, am:usb:sim, sim-am:navi31 / sim-am:navi48)");
}
}  // namespace

}  // namespace baregpu::registry
