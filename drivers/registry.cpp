// The composer's shared part: register_backends and builtin_devices (each vendor's part is in
// registry_am.cpp, registry_nv.cpp, registry_qcom.cpp), and the helpers those files share
// (registry_internal.hpp): the URI-option parser, simulated buses, the side table of open
// simulated devices and its bus hooks, and how real GPUs are found on the PCI bus.
#include "drivers/registry.hpp"

#include "base/error.hpp"
#include "drivers/cpu/cpu_device.hpp"
#include "drivers/cpu/describe_cpu.hpp"
#include "drivers/pci/bar.hpp"
#include "drivers/pci/enumerate.hpp"
#include "drivers/pci/sim_bus.hpp"
#include "drivers/registry_internal.hpp"
#include "drivers/sim/edu.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <mutex>

namespace baregpu::registry {

namespace detail {

// ---- URI options ----------------------------------------------------------------------------

void UriOptions::declare(const char* key, std::string_view help) {
    known_ += fmt::format("{}{} ({})", known_.empty() ? "" : ", ", key, help);
}

UriOptions& UriOptions::bytes(const char* key, uint64_t& field, std::string_view help) {
    declare(key, help);
    field = uri_.option_u64(key, field);
    return *this;
}

UriOptions& UriOptions::count(const char* key, uint32_t& field, std::string_view help) {
    declare(key, help);
    field = uri_.option_u32(key, field);
    return *this;
}

UriOptions& UriOptions::text(const char* key, std::optional<std::string>& field, std::string_view help) {
    declare(key, help);
    field = uri_.option(key);
    return *this;
}

UriOptions& UriOptions::choice(const char* key, std::string& field, std::initializer_list<std::string_view> allowed,
                               std::string_view help) {
    declare(key, help);
    std::optional<std::string> value = uri_.option(key);
    if (!value) return *this;
    if (std::find(allowed.begin(), allowed.end(), *value) == allowed.end()) {
        std::string list;
        for (std::string_view a : allowed) list += fmt::format("{}{}", list.empty() ? "" : " or ", a);
        throw Error(uri_.name(), fmt::format("option {}={}: {} is {}", key, *value, key, list));
    }
    field = *value;
    return *this;
}

void UriOptions::done() const { uri_.reject_unused(known_); }

// ---- simulated buses and devices ------------------------------------------------------------

namespace {

std::mutex sim_buses_mutex;
std::map<std::string, std::weak_ptr<pci::sim::SimBus>> sim_buses;

struct SimEntry {
    const void* owner;
    std::weak_ptr<const void> alive;
    SimParts parts;
};
std::mutex sim_table_mutex;
std::vector<SimEntry> sim_table;

}  // namespace

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

std::string sim_device_name(const hcq::DeviceUri& uri, const std::optional<std::string>& bus, pci::PciAddress address) {
    return bus ? fmt::format("{}@{}/{}", uri.name(), *bus, address.to_string()) : uri.name();
}

std::string presented(std::unique_ptr<pci::sim::SimDeviceModel> model) {
    pci::sim::SimBus bus;
    pci::PciAddress address = bus.attach(std::move(model));
    std::unique_ptr<pci::PciDevice> device = bus.open(address);
    pci::PciIdentity id = device->identity();
    std::string text = fmt::format("{:04x}:{:04x}", id.vendor_id, id.device_id);
    for (unsigned i = 0; i < pci::kBarCount; ++i) {
        const pci::BarInfo& bar = device->bar_info(i);
        if (bar.type != pci::BarType::None) text += fmt::format(", BAR{} {}", i, pci::format_size(bar.size));
    }
    return text;
}

void remember_sim(const void* owner, std::weak_ptr<const void> alive, SimParts parts) {
    std::lock_guard lock(sim_table_mutex);
    std::erase_if(sim_table, [](const SimEntry& e) { return e.alive.expired(); });
    sim_table.push_back({owner, std::move(alive), std::move(parts)});
}

std::optional<SimPartsRef> sim_parts_of(const void* owner) {
    std::lock_guard lock(sim_table_mutex);
    // Newest first: an address may be reused once an older owner is gone.
    for (auto it = sim_table.rbegin(); it != sim_table.rend(); ++it) {
        if (it->owner != owner) continue;
        if (std::shared_ptr<const void> alive = it->alive.lock()) return SimPartsRef{std::move(alive), it->parts};
    }
    return std::nullopt;
}

// ---- real GPUs on the PCI bus ---------------------------------------------------------------

std::string sysfs_root() {
    const char* root = std::getenv("BAREGPU_SYSFS_ROOT");
    return root && *root ? root : "/sys";
}

std::vector<std::string> enumerate_real(std::string_view backend) {
    pci::Enumeration found;
    try {
        found = pci::enumerate_gpus({sysfs_root(), ""});
    } catch (const UnsupportedError&) {
        return {};  // no PCI bus is visible (a container): no GPU of ours
    }
    std::vector<std::string> uris;
    for (const pci::GpuFunction& gpu : found.gpus) {
        if (gpu.verdict.backend == backend) uris.push_back(gpu.verdict.uri);
    }
    return uris;
}

RealGpu check_real_gpu(const hcq::DeviceUri& uri, std::string_view backend, bool require_bus) {
    std::optional<pci::PciAddress> address = pci::PciAddress::parse(uri.path());
    if (!address) {
        throw Error(uri.name(), fmt::format("'{}' is not a PCI address: expected {}:0000:03:00.0 (`baregpu devices` lists this "
                                            "machine's GPUs and their URIs)",
                                            uri.path(), backend));
    }
    RealGpu gpu{*address, std::nullopt};
    const std::string root = sysfs_root();
    pci::Enumeration found;
    try {
        found = pci::enumerate_gpus({root, ""});
    } catch (const UnsupportedError& e) {
        if (!require_bus) return gpu;
        throw UnsupportedError(uri.name(), fmt::format("there is no PCI function at {}: {}", address->to_string(), e.what()));
    }
    for (pci::GpuFunction& f : found.gpus) {
        if (f.address == *address) gpu.function = std::move(f);
    }
    if (!gpu.function) {
        const std::filesystem::path dir = std::filesystem::path(root) / "bus" / "pci" / "devices" / address->to_string();
        std::error_code ec;
        if (!std::filesystem::exists(dir, ec)) {
            throw Error(uri.name(), fmt::format("there is no PCI function at {} ({} does not exist): no such GPU on this machine; "
                                                "`baregpu devices` lists the GPUs it has",
                                                address->to_string(), dir.string()));
        }
        throw Error(uri.name(), fmt::format("the PCI function at {} is not a GPU (neither a display controller nor a processing "
                                            "accelerator); `baregpu devices` lists the GPUs",
                                            address->to_string()));
    }
    const pci::BackendVerdict& v = gpu.function->verdict;
    if (v.backend != backend) {
        if (v.backend.empty()) throw UnsupportedError(uri.name(), v.reason);
        throw UnsupportedError(uri.name(), fmt::format("{} is {} {}, driven by the {} backend: open it as {}", address->to_string(),
                                                       gpu.function->vendor_name, v.family, v.backend, v.uri));
    }
    return gpu;
}

void require_vfio_ready(const hcq::DeviceUri& uri, const RealGpu& gpu) {
    if (!gpu.function) return;
    const pci::GpuFunction& f = *gpu.function;
    if (f.driver == "nvidia") {
        throw UnsupportedError(uri.name(), "bound to nvidia: nvpci boots GSP itself and needs the GPU on vfio-pci (udev/README.md); "
                                           "without transport=nvpci it opens through nvidia.ko (nvrm)");
    }
    if (!f.verdict.ready && !f.owner) throw UnsupportedError(uri.name(), f.verdict.reason);
}

}  // namespace detail

// ---- the simulated bus's hooks ----------------------------------------------------------------

namespace {

std::optional<std::pair<std::shared_ptr<pci::sim::SimBus>, pci::PciAddress>> sim_function_of(hcq::Device& device) {
    std::optional<detail::SimPartsRef> ref = detail::sim_parts_of(&device);
    if (!ref) return std::nullopt;
    std::shared_ptr<pci::sim::SimBus> bus = ref->parts.bus.lock();
    if (!bus) return std::nullopt;
    return std::make_pair(bus, ref->parts.address);
}

}  // namespace

std::optional<SimBusTraffic> sim_bus_traffic(hcq::Device& device) {
    auto f = sim_function_of(device);
    if (!f) return std::nullopt;
    const pci::sim::Counters c = f->first->counters(f->second);
    return SimBusTraffic{c.dma_bytes_read, c.dma_bytes_written, c.peer_bytes_read, c.peer_bytes_written, c.iommu_faults,
                         f->first->now_ns(), c.dma_ns};
}

bool inject_bus_removal(hcq::Device& device, bool gone) {
    auto f = sim_function_of(device);
    if (!f) return false;
    f->first->inject(f->second, pci::sim::Fault{gone ? pci::sim::FaultKind::DeviceGone : pci::sim::FaultKind::SurpriseRemoval});
    return true;
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

// ---- the registry -------------------------------------------------------------------------------

Route route(std::string_view text) {
    const hcq::DeviceUri uri = hcq::DeviceUri::parse(text);
    if (uri.scheme() == "am") return detail::am_route(uri);
    if (uri.scheme() == "nv") return detail::nv_route(uri);
    throw Error(uri.name(), fmt::format("not a real PCI GPU's URI (am:<pci address>, nv:<pci address>): '{}' has no route to show",
                                        uri.scheme()));
}

void register_backends(hcq::Registry& registry) {
    // Real-hardware backends in this order are what the default device tries: am, nv, qcom.
    cpu::register_cpu_backend(registry);
    detail::register_am_backends(registry);
    detail::register_nv_backends(registry);
    detail::register_qcom_backends(registry);
}

std::vector<BuiltinDevice> builtin_devices() {
    std::vector<BuiltinDevice> devices;
    devices.push_back({"cpu", "cpu", true, cpu::describe_host_cpu() + ": the host CPU as an HCQ device (the default when no GPU opens)"});
    // QEMU's edu device: a PCI test device for drivers/pci, described from what its model presents.
    devices.push_back({"sim-edu", "simulated", false,
                       fmt::format("model of QEMU's edu test DMA device (docs/specs/edu.rst) on the simulated PCI bus ({}): a PCI "
                                   "test device for drivers/pci, not an HCQ GPU",
                                   detail::presented(std::make_unique<sim::EduDevice>()))});
    for (auto part : {detail::am_builtin_devices, detail::nv_builtin_devices, detail::qcom_builtin_devices}) {
        std::vector<BuiltinDevice> more = part();
        devices.insert(devices.end(), more.begin(), more.end());
    }
    return devices;
}

}  // namespace baregpu::registry
