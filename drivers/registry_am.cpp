// The AM backends: sim-am (the simulated Navi31/Navi48 on a simulated bus), am (a real GPU by PCI
// address, or behind an ASM24xx USB bridge; am:usb:sim the simulated chip behind the simulated
// bridge). Every one runs the same driver, drivers/am, on whatever PciDevice the chip sits on.
#include "drivers/registry_am.hpp"

#include "base/error.hpp"
#include "drivers/am/am_device.hpp"
#include "drivers/am/hcq_device.hpp"
#include "drivers/pci/device_lock.hpp"
#include "drivers/pci/open.hpp"
#include "drivers/pci/usb_pci_device.hpp"
#include "drivers/registry_internal.hpp"
#include "drivers/sim/amdgpu/navi.hpp"
#include "drivers/sim/amdgpu/state_file.hpp"
#include "drivers/sim/asm24/sim_asm24.hpp"
#include "drivers/sim/firmware_path.hpp"
#include "drivers/usb/asm24_protocol.hpp"
#include "drivers/usb/libusb_backend.hpp"
#include "firmware-loader/search_path.hpp"

#include <fmt/format.h>
#include <functional>

namespace baregpu::registry {

namespace {

// ephemeral: no state file (what `baregpu devices` builds: another process may be driving the chip).
std::unique_ptr<pci::sim::SimDeviceModel> make_navi(sim::amdgpu::Asic asic, bool ephemeral) {
    sim::amdgpu::ModelOptions options;
    options.asic = asic;
    options.ephemeral = ephemeral;
    return sim::amdgpu::make_model(options);
}

// `name`: the URI without options.
std::string am_lock_key(std::string_view name) {
    // am:usb:sim is the sim-am:navi31 chip (same state file) behind a simulated bridge: one lock.
    if (name == "am:usb:sim") return am_lock_key("sim-am:navi31");
    if (name.starts_with("sim-am:")) {
        // The chip's lock lives next to its state file, in the user's own state directory: two
        // processes with different BAREGPU_SIM_STATE_DIRs (parallel tests) drive different chips,
        // and no other user can hold or plant it.
        const std::filesystem::path dir = std::filesystem::absolute(sim::amdgpu::StateFile::default_dir());
        return (dir / fmt::format("sim-am-{}.lock", name.substr(7))).string();
    }
    if (!name.starts_with("am:") || name.size() == 3) {
        throw Error(std::string(name), "not an AM device name: am:<pci address> (am:0000:03:00.0), am:usb:<bus>-<port>, am:usb:sim, "
                                       "sim-am:navi31 or sim-am:navi48");
    }
    return "am-" + std::string(name.substr(3));
}

// The simulated bridge's firmware (am:usb:sim?firmware=custom|uas|bot): tinygrad's custom firmware,
// or ASMedia's stock firmware as a shop dock ships it (its IDs; the link trained at power-on, as the
// stock firmware does itself), offering UAS and BOT or BOT only.
sim::asm24::SimAsm24Bridge::Options sim_bridge_options(std::string_view firmware) {
    sim::asm24::SimAsm24Bridge::Options o;
    if (firmware == "custom") return o;
    o.interfaces = firmware == "uas" ? sim::asm24::SimAsm24Bridge::Options::Interfaces::Uas : sim::asm24::SimAsm24Bridge::Options::Interfaces::Bot;
    o.vendor_id = usb::asm24::kAsmediaVendor;
    o.product_id = usb::asm24::kStockProduct2464;
    o.product = "ASM2464PD (simulated stock firmware)";
    o.link_trained = true;
    return o;
}

constexpr const char* kBridgeFirmwareHelp =
    "the simulated bridge's firmware: custom (tinygrad's, the default), uas or bot (ASMedia's stock firmware over UAS or BOT)";

// What open_am_parts built: the target and, for a simulated chip, what the hooks need.
struct AmParts {
    AmTarget target;
    detail::SimParts sim;
};

// Brings up drivers/am on what `name` ("sim-am:navi31", "am:usb:sim", "am:usb:3-2", "am:0000:03:00.0";
// no options) names. shared_bus: the simulated bus for sim-am (bus=<name>); access: how a real PCI
// function is opened.
AmParts open_am_parts(std::string_view name, am::AmOptions options, std::string_view sim_link,
                      std::shared_ptr<pci::sim::SimBus> shared_bus, pci::Backend access, std::string_view bridge_firmware = "custom") {
    if (options.lock_key.empty()) options.lock_key = am_lock_key(name);
    // A simulated chip finds the firmware the build carries; a real GPU only the system's.
    if (options.firmware_dirs.empty() && (name.starts_with("sim-am:") || name == "am:usb:sim")) {
        const fw::FirmwareSearchPath path = sim::firmware_search_path();
        for (const std::filesystem::path& dir : path.directories()) options.firmware_dirs.push_back(dir.string());
    }
    AmParts out;
    out.target.uri = std::string(name);
    if (name.starts_with("sim-am:")) {
        std::string_view asic = name.substr(7);
        sim::amdgpu::Asic which;
        if (asic == "navi31") {
            which = sim::amdgpu::Asic::navi31;
        } else if (asic == "navi48") {
            which = sim::amdgpu::Asic::navi48;
        } else {
            throw Error(std::string(name), "unknown simulated AMD GPU: the models are sim-am:navi31 and sim-am:navi48");
        }
        pci::sim::Transport link = pci::sim::Transport::pcie_gen4_x16();
        if (sim_link == "usb") {
            // Every register access one 100 µs USB round trip; bulk VRAM copies at the bridge's ~0.32 GB/s.
            link = {"usb-100us", 100'000, 100'000, 100'000, 0.32, 100'000, 0.32, 50'000'000, /*bar_mmap=*/false};
        } else if (!sim_link.empty() && sim_link != "pcie") {
            throw Error(std::string(name), fmt::format("unknown simulated link '{}': pcie or usb", sim_link));
        }
        auto bus = shared_bus ? shared_bus : std::make_shared<pci::sim::SimBus>(link);
        std::unique_ptr<pci::sim::SimDeviceModel> model = make_navi(which, /*ephemeral=*/false);
        out.sim.navi = static_cast<sim::amdgpu::NaviModel*>(model.get());
        const pci::PciAddress address = bus->attach(std::move(model));
        out.sim.bus = bus;
        out.sim.address = address;
        out.target.keepalive = bus;
        try {
            out.target.device = am::AmDevice::open(bus->open(address), options);
        } catch (const BusyError&) {
            throw;
        } catch (const Error&) {
            if (!options.force_reset) throw;
            // A chip whose saved state is damaged does not come back from a reset (discovery runs
            // before it, and a mode1 reset needs a running SMU): what brings a card back then is
            // a power cycle. The simulated chip's is its state file back to power-on, done while
            // holding the chip's lock, so that no process driving it loses its chip.
            {
                pci::DeviceLock lock = pci::DeviceLock::acquire(options.lock_key);
                out.sim.navi->power_cycle();
            }
            out.target.note = "the chip did not come up from its saved state with a reset: it was power-cycled (VRAM lost)";
            out.target.device = am::AmDevice::open(bus->open(address), std::move(options));
        }
        return out;
    }
    if (name.starts_with("am:usb:")) {
        // A GPU behind an ASM24xx bridge: "am:usb:sim" is the simulated Navi31 behind the
        // simulated bridge (drivers/sim/asm24), "am:usb:3-2" a real bridge at bus 3, port 2.
        const std::string_view where = name.substr(7);
        std::unique_ptr<usb::UsbBackend> link;
        if (where == "sim") {
            std::unique_ptr<pci::sim::SimDeviceModel> model = make_navi(sim::amdgpu::Asic::navi31, /*ephemeral=*/false);
            out.sim.navi = static_cast<sim::amdgpu::NaviModel*>(model.get());
            auto bridge = std::make_unique<sim::asm24::SimAsm24Bridge>(sim_bridge_options(bridge_firmware), std::move(model));
            out.sim.bridge = bridge.get();
            link = std::move(bridge);
            // The bridge lives inside the device; this token expires with the target, and the hooks' entry with it.
            out.target.keepalive = std::make_shared<std::string>("am:usb:sim");
        } else {
            link = usb::open_libusb(where);
        }
        pci::UsbOpenOptions usb_options;
        usb_options.write_once_bars = {2};  // AMD BAR2 is the doorbell aperture: only the host writes it
        out.target.device = am::AmDevice::open(pci::open_usb_device(std::move(link), usb_options), std::move(options));
        return out;
    }
    if (name.starts_with("am:")) {
        const hcq::DeviceUri uri = hcq::DeviceUri::parse(name);
        const detail::RealGpu gpu = detail::check_real_gpu(uri, "am", /*require_bus=*/true);
        if (access == pci::Backend::Vfio) detail::require_vfio_ready(uri, gpu);
        pci::OpenOptions open_options;
        open_options.backend = access;
        open_options.sysfs_root = detail::sysfs_root();
        out.target.device = am::AmDevice::open(pci::open_device(gpu.address, open_options), std::move(options));
        return out;
    }
    throw Error(std::string(name), "not an AM device URI (am:<pci address>, am:usb:<bus>-<port>, am:usb:sim, sim-am:navi31 / "
                                   "sim-am:navi48)");
}

// access=vfio|sysfs of a real am:<pci address>.
pci::Backend read_access(detail::UriOptions& u, const hcq::DeviceUri& uri) {
    std::string access = "vfio";
    if (uri.scheme() == "am" && !uri.path().starts_with("usb:")) {
        u.choice("access", access, {"vfio", "sysfs"},
                 "vfio (the default: IOMMU-protected, the GPU bound to vfio-pci) or sysfs (root, the GPU unbound, no IOMMU "
                 "protection)");
    }
    return access == "sysfs" ? pci::Backend::Sysfs : pci::Backend::Vfio;
}

// What an interpreter report holds, by the names `baregpu bench --json` and the profiler's trace give
// them (after "shader_"): instructions by unit, bytes, the modelled time.
std::vector<std::pair<std::string, double>> shader_numbers(const sim::amdgpu::NativeDispatchReport& r) {
    const auto& c = r.counts;
    return {{"instructions", double(c.instructions())}, {"valu", double(c.valu)},         {"salu", double(c.salu)},
            {"smem", double(c.smem)},                   {"vmem_load", double(c.vmem_load)}, {"vmem_store", double(c.vmem_store)},
            {"lds", double(c.lds)},                     {"branch", double(c.branch)},     {"other", double(c.other)},
            {"vopd", double(c.vopd)},
            {"bytes_loaded", double(c.bytes_loaded)},   {"bytes_stored", double(c.bytes_stored)},
            {"footprint_bytes", double(r.footprint_bytes)}, {"dram_bytes", double(r.dram_bytes)},
            {"modelled_ns", double(r.modelled_ns)}};
}

// The HCQ device over drivers/am for every AM URI: "sim-am:navi31?compute_ring=...", "am:0000:03:00.0",
// "am:usb:sim". Kernels are the chip's own AMDGPU code objects everywhere; a simulated chip runs them in
// its RDNA3/RDNA4 interpreter. isa=host (simulated chips only) loads x86-64 objects the model runs as
// host code instead: much faster, but no GPU code runs (ARCHITECTURE.md, "Code objects and ISAs").
std::shared_ptr<hcq::Device> open_am_hcq(const hcq::DeviceUri& uri) {
    am::AmHcqOptions options;
    const bool simulated = uri.scheme() == "sim-am" || uri.name() == "am:usb:sim";
    std::string isa = "native";
    std::optional<std::string> bus_name;
    detail::UriOptions u(uri);
    detail::ring_options(u, options);
    detail::memory_options(u, options);
    u.count("compute_queues", options.compute_queues, "compute HQDs, 1-8")
        .choice("isa", isa, {"native", "host"}, "native (the default: AMDGPU code objects; a model runs them in its interpreter) or, on a "
                "simulated chip, host (x86-64 code objects the model runs as host code: faster, no GPU code runs)")
        .bytes("peer_va", options.peer_va_bytes, "bytes of the window peers are mapped in");
    if (uri.scheme() == "sim-am") u.text("bus", bus_name, detail::kBusHelp);
    std::string bridge_firmware = "custom";
    if (uri.name() == "am:usb:sim") u.choice("firmware", bridge_firmware, {"custom", "uas", "bot"}, kBridgeFirmwareHelp);
    const pci::Backend access = read_access(u, uri);
    u.done();
    if (isa == "host" && !simulated) {
        throw Error(uri.name(), "isa=host is for simulated chips (a model that runs x86-64 code); a real GPU runs its own machine code "
                                "(isa=native, the default)");
    }
    options.isa = isa == "native" ? am::KernelIsa::native : am::KernelIsa::host;

    std::shared_ptr<pci::sim::SimBus> bus = bus_name ? detail::sim_bus_for(bus_name, pci::sim::Transport::pcie_gen4_x16()) : nullptr;
    AmParts parts = open_am_parts(uri.name(), {}, {}, bus, access, bridge_firmware);
    options.keepalive = parts.target.keepalive;
    options.name = detail::sim_device_name(uri, bus_name, parts.sim.address);
    const bool interpreted = options.isa == am::KernelIsa::native;
    std::shared_ptr<am::AmHcqDevice> device = am::AmHcqDevice::create(std::move(parts.target.device), std::move(options));
    if (parts.sim.navi != nullptr) {
        detail::remember_sim(std::shared_ptr<hcq::Device>(device), parts.sim);
        // The profiler's trace gets, for every kernel, what the chip's interpreter counted between
        // the kernel's two timestamps on its HQD. The model lives as long as the device (keepalive);
        // the device owns the source, so it is not captured as a handle.
        if (interpreted) {
            device->set_exec_details([navi = parts.sim.navi, am = device.get()](const hcq::Engine& engine, uint64_t begin, uint64_t end) {
                hcq::Device::ExecDetails out;
                const std::optional<uint32_t> hqd = am->compute_hqd_of(engine);
                if (!hqd) return out;
                for (const auto& [key, value] : shader_numbers(navi->native_between(0, *hqd, begin, end)))
                    out.emplace_back("shader_" + key, value);
                return out;
            });
        }
    }
    return device;
}

}  // namespace

namespace detail {

void register_am_backends(hcq::Registry& registry) {
    hcq::Backend sim_am;
    sim_am.scheme = "sim-am";
    sim_am.description = "simulated AMD GPUs (drivers/sim/amdgpu) driven by drivers/am; their gfx1100/gfx1201 machine code runs in the "
                         "model's interpreter (?isa=host: x86-64 host code instead, faster)";
    sim_am.enumerate = [] { return std::vector<std::string>{"sim-am:navi31", "sim-am:navi48"}; };
    sim_am.open = open_am_hcq;
    registry.add(std::move(sim_am));
    // The same driver on a GPU named by where it is: am:<pci address>, am:usb:<bus>-<port> behind
    // an ASM24xx bridge, am:usb:sim (the simulated Navi31 behind the simulated bridge).
    hcq::Backend am;
    am.scheme = "am";
    am.description = "AMD GPUs driven by drivers/am: am:<pci address> (vfio; ?access=sysfs as root), am:usb:<bus>-<port> "
                     "(ASM24xx USB bridge), am:usb:sim";
    am.real_hardware = true;
    am.enumerate = [] { return enumerate_real("am"); };
    am.open = open_am_hcq;
    registry.add(std::move(am));
}

Route am_route(const hcq::DeviceUri& uri) {
    if (uri.path().starts_with("usb:")) throw Error(uri.name(), "a GPU behind a USB bridge, not on the PCI bus: no route to show");
    UriOptions u(uri);  // only what decides the route
    const pci::Backend access = read_access(u, uri);
    check_real_gpu(uri, "am", /*require_bus=*/true);
    return {"am", "", access == pci::Backend::Sysfs ? "sysfs" : "vfio"};
}

std::vector<BuiltinDevice> am_builtin_devices() {
    std::vector<BuiltinDevice> devices;
    // Both sim-am chips are HCQ devices (drivers/am queues): GC 11 / SDMA 6 and GC 12 / SDMA 7.
    const struct {
        const char* name;
        const char* models;
        const char* gfx;
        sim::amdgpu::Asic asic;
    } chips[] = {
        {"sim-am:navi31", "AMD Navi31 / RX 7900 XTX (RDNA3), driven by drivers/am", "gfx1100", sim::amdgpu::Asic::navi31},
        {"sim-am:navi48", "AMD Navi48 / RX 9070 XT (RDNA4), driven by drivers/am", "gfx1201", sim::amdgpu::Asic::navi48},
    };
    for (const auto& chip : chips) {
        devices.push_back({chip.name, "simulated", true,
                           fmt::format("model of {} on the simulated PCI bus ({}): a simulated GPU (HCQ device) running its own {} "
                                       "machine code in the model's interpreter; {}?isa=host runs x86-64 host code instead (faster, no "
                                       "GPU code runs)",
                                       chip.models,
                                       presented(make_navi(chip.asic, /*ephemeral=*/true)), chip.gfx, chip.name)});
    }
    // GPUs behind ASM24xx USB bridges: listed from libusb (nothing without it). HCQ
    // devices with host copies of device memory (drivers/am/shadow_memory.hpp).
    for (const usb::BridgeInfo& bridge : usb::enumerate_bridges()) {
        std::string path = "its firmware is not one drivers/usb knows from its descriptors";
        if (bridge.protocol == usb::BridgeProtocol::CustomFirmware) {
            path = "custom firmware: vendor requests, the SRAM bulk engine for copies";
        } else if (bridge.protocol) {
            path = fmt::format("stock firmware, {}: PCIe through the XDATA TLP engine, copies in through WRITE(16) into the SRAM",
                               usb::to_string(*bridge.protocol));
        }
        devices.push_back({"am:usb:" + bridge.location, "usb", true,
                           fmt::format("ASM24xx USB bridge {:04x}:{:04x} at USB {} ({}): an AMD GPU behind it is brought up by drivers/am "
                                       "over the usb backend (amctl load --device am:usb:{}); HCQ queues over shadowed memory",
                                       bridge.vendor_id, bridge.product_id, bridge.location, path, bridge.location)});
    }
    return devices;
}

}  // namespace detail

bool inject_dispatch_hang(hcq::Device& device, bool hang) {
    std::optional<detail::SimPartsRef> ref = detail::sim_parts_of(&device);
    if (!ref || ref->parts.navi == nullptr) return false;
    ref->parts.navi->inject_dispatch_hang(hang);
    return true;
}

std::vector<std::string> am_firmware_dirs(std::string_view uri) {
    const std::string_view name = uri.substr(0, uri.find('?'));
    const bool simulated = name.starts_with("sim-am:") || name == "am:usb:sim";
    const fw::FirmwareSearchPath path = simulated ? sim::firmware_search_path() : fw::FirmwareSearchPath::from_environment();
    std::vector<std::string> out;
    for (const std::filesystem::path& dir : path.directories()) out.push_back(dir.string());
    return out;
}

std::optional<std::map<std::string, double>> sim_shader_counters(hcq::Device& device) {
    if (device.arch() == "x86_64") return std::nullopt;  // isa=host: the model interprets nothing
    std::optional<detail::SimPartsRef> ref = detail::sim_parts_of(&device);
    if (!ref || ref->parts.navi == nullptr) return std::nullopt;
    std::map<std::string, double> out;
    for (const auto& [key, value] : shader_numbers(ref->parts.navi->native_totals())) out.emplace(key, value);
    return out;
}

bool is_am_uri(std::string_view uri) { return uri.starts_with("am:") || uri.starts_with("sim-am:"); }

std::string default_am_uri(std::string* note) {
    try {
        std::vector<std::string> found = detail::enumerate_real("am");
        if (!found.empty()) {
            if (note) *note = fmt::format("using the AMD GPU at {}", found.front().substr(3));
            return found.front();
        }
    } catch (const Error&) {
        // A sysfs tree that cannot be read: the simulated chip it is.
    }
    if (note) *note = "no AMD GPU drivers/am drives on the PCI bus: using the simulated sim-am:navi31";
    return "sim-am:navi31";
}

std::optional<pid_t> am_owner(std::string_view uri) {
    return pci::DeviceLock::owner_of(am_lock_key(hcq::DeviceUri::parse(uri).name()));
}

AmTarget open_am(std::string_view text, am::AmOptions options, std::string_view sim_link) {
    const hcq::DeviceUri uri = hcq::DeviceUri::parse(text);
    detail::UriOptions u(uri);
    std::string bridge_firmware = "custom";
    if (uri.name() == "am:usb:sim") u.choice("firmware", bridge_firmware, {"custom", "uas", "bot"}, kBridgeFirmwareHelp);
    const pci::Backend access = read_access(u, uri);
    u.done();
    AmParts parts = open_am_parts(uri.name(), std::move(options), sim_link, nullptr, access, bridge_firmware);
    if (parts.sim.navi != nullptr) detail::remember_sim(parts.target.device.get(), parts.target.keepalive, parts.sim);
    parts.target.uri = std::string(text);
    return std::move(parts.target);
}

std::optional<SimUsbBridge> sim_usb_bridge(const AmTarget& target) {
    std::optional<detail::SimPartsRef> ref = detail::sim_parts_of(target.device.get());
    if (!ref || ref->parts.bridge == nullptr) return std::nullopt;
    const sim::asm24::SimAsm24Bridge& bridge = *ref->parts.bridge;
    SimUsbBridge out;
    out.now_ns = bridge.now_ns();
    out.transfers = bridge.counters().total();
    for (const sim::asm24::Violation& v : bridge.violations()) out.violations.push_back(v.describe());
    return out;
}

std::unique_ptr<usb::UsbBackend> open_sim_usb_bridge() {
    return std::make_unique<sim::asm24::SimAsm24Bridge>(sim::asm24::SimAsm24Bridge::Options{}, nullptr);
}

}  // namespace baregpu::registry
