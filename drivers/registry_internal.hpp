// What the registry's files share (registry.cpp and the per-vendor registry_am.cpp, registry_nv.cpp,
// registry_qcom.cpp): the one URI-option parser, the simulated buses devices share, the one side
// table of open simulated devices, and how real GPUs on the PCI bus are found and checked before a
// driver touches them. Part of the composer (it may see models and drivers); tools and tests use
// registry.hpp and registry_am.hpp instead.
#pragma once

#include "drivers/pci/enumerate.hpp"
#include "drivers/pci/pci_address.hpp"
#include "drivers/pci/sim_bus.hpp"
#include "drivers/registry.hpp"
#include "hcq/registry.hpp"

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::sim::amdgpu {
class NaviModel;
}
namespace baregpu::sim::asm24 {
class SimAsm24Bridge;
}
namespace baregpu::sim::kgsl {
class SimKgsl;
}

namespace baregpu::registry::detail {

// ---- URI options ----------------------------------------------------------------------------

// Reads a device URI's options into a backend's option struct, one declaration per option, and
// knows them all for the error about an unknown one: every backend lists what it takes once.
//   UriOptions u(uri);
//   ring_options(u, o);
//   u.bytes("va", o.va_bytes, "bytes of the SVM window").done();
class UriOptions {
public:
    explicit UriOptions(const hcq::DeviceUri& uri) : uri_(uri) {}

    // A byte count (k/M/G suffixes); `field` keeps its value when the option is absent.
    UriOptions& bytes(const char* key, uint64_t& field, std::string_view help);
    // A count that fits 32 bits.
    UriOptions& count(const char* key, uint32_t& field, std::string_view help);
    // Free text; nullopt when absent.
    UriOptions& text(const char* key, std::optional<std::string>& field, std::string_view help);
    // One of `allowed`; `field` keeps its value (the default) when absent.
    UriOptions& choice(const char* key, std::string& field, std::initializer_list<std::string_view> allowed,
                       std::string_view help);
    // Throws baregpu::Error naming the URI, the unknown options and every option declared above.
    void done() const;

private:
    void declare(const char* key, std::string_view help);
    const hcq::DeviceUri& uri_;
    std::string known_;
};

// The two command rings of the AM and NV HCQ devices: ring (both), compute_ring, copy_ring.
template <typename Options>
UriOptions& ring_options(UriOptions& u, Options& o) {
    uint64_t both = 0;
    u.bytes("ring", both, "both command rings' bytes, a power of two of at least 4 KiB");
    if (both != 0) o.compute_ring_bytes = o.copy_ring_bytes = both;
    return u.bytes("compute_ring", o.compute_ring_bytes, "the compute ring's bytes")
        .bytes("copy_ring", o.copy_ring_bytes, "the copy ring's bytes");
}

// What every HCQ backend takes about memory: memory (bytes buffers may map at once), staging and
// staging_slots (the copy_in/copy_out staging area).
template <typename Options>
UriOptions& memory_options(UriOptions& u, Options& o) {
    return u.bytes("memory", o.memory_bytes, "bytes buffers may map at once")
        .bytes("staging", o.staging_bytes, "bytes of each copy_in/copy_out staging slot")
        .count("staging_slots", o.staging_slots, "copy_in/copy_out staging slots");
}

// ---- simulated buses and devices ------------------------------------------------------------

// The bus=<name> option: every simulated device opened with the same name sits on one
// process-wide SimBus (one root complex: peers), alive while any device on it is. Without a name
// each device gets a bus of its own.
std::shared_ptr<pci::sim::SimBus> sim_bus_for(const std::optional<std::string>& name, const pci::sim::Transport& link);
inline constexpr std::string_view kBusHelp = "a simulated bus shared with the devices opened with the same name: peers";

// The HCQ name of a device on a named bus: two models of one kind (two ad102s) need two names
// (and so two peer groups): "sim-nv:ad102@p2p/0000:00:02.0".
std::string sim_device_name(const hcq::DeviceUri& uri, const std::optional<std::string>& bus, pci::PciAddress address);

// What a model presents on a simulated bus, for `baregpu devices`: "1234:11e8, BAR0 1 MiB".
std::string presented(std::unique_ptr<pci::sim::SimDeviceModel> model);

// What the registry built under one open simulated device, for the hooks of registry.hpp (bus
// traffic, fault injection): one table for every kind of simulated device.
struct SimParts {
    std::weak_ptr<pci::sim::SimBus> bus;  // sim-am, sim-nv: the bus and the device's function on it
    pci::PciAddress address;
    sim::amdgpu::NaviModel* navi = nullptr;  // sim-am, am:usb:sim (the bus or the bridge owns it)
    sim::asm24::SimAsm24Bridge* bridge = nullptr;  // am:usb:sim (the device's PciDevice owns it)
    std::shared_ptr<sim::kgsl::SimKgsl> kgsl;  // sim-qcom
};
// `owner` is what the hooks are asked about (an hcq::Device, an am::AmDevice); the entry lives while
// `alive` does.
void remember_sim(const void* owner, std::weak_ptr<const void> alive, SimParts parts);
// The parts of a live entry, with `alive` held (so are the models) while the result is.
struct SimPartsRef {
    std::shared_ptr<const void> alive;
    SimParts parts;
};
std::optional<SimPartsRef> sim_parts_of(const void* owner);
// An HCQ device's entry (the hooks are asked with an hcq::Device&).
inline void remember_sim(const std::shared_ptr<hcq::Device>& device, SimParts parts) {
    remember_sim(static_cast<const hcq::Device*>(device.get()), device, std::move(parts));
}

// ---- real GPUs on the PCI bus ---------------------------------------------------------------

// The sysfs tree real GPUs are found and opened under: $BAREGPU_SYSFS_ROOT when set (tests point
// it at a fake tree), else /sys.
std::string sysfs_root();

// The URIs of the GPUs on the PCI bus whose verdict names `backend` ("am", "nv"), whether or not
// they open now, in address order. Nothing when no PCI bus is visible (containers).
std::vector<std::string> enumerate_real(std::string_view backend);

// A real GPU named by `uri` ("am:0000:03:00.0"), checked before its driver touches it.
struct RealGpu {
    pci::PciAddress address;
    std::optional<pci::GpuFunction> function;  // nullopt when no PCI bus is visible (and it was not required)
};
// Throws, naming the URI: not a PCI address; no PCI function there ("there is no PCI function at
// ..."); not a GPU; a GPU the verdict gives another backend or none (a chip not driven yet).
// `require_bus` false: a machine without a visible PCI bus passes with no `function` (nvrm reaches
// the GPU through nvidia.ko alone).
RealGpu check_real_gpu(const hcq::DeviceUri& uri, std::string_view backend, bool require_bus);
// Throws the verdict's advice (bound to amdgpu: unbind or use vfio-pci, no IOMMU group, ...) when
// `gpu` cannot be opened through VFIO now. A lock held by another process is left to the open
// (BusyError names its pid).
void require_vfio_ready(const hcq::DeviceUri& uri, const RealGpu& gpu);

// ---- per-vendor parts of register_backends, builtin_devices and route -----------------------

void register_am_backends(hcq::Registry& registry);
void register_nv_backends(hcq::Registry& registry);
void register_qcom_backends(hcq::Registry& registry);
std::vector<BuiltinDevice> am_builtin_devices();
std::vector<BuiltinDevice> nv_builtin_devices();
std::vector<BuiltinDevice> qcom_builtin_devices();
Route am_route(const hcq::DeviceUri& uri);
Route nv_route(const hcq::DeviceUri& uri);

}  // namespace baregpu::registry::detail
