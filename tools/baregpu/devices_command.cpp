// `baregpu devices`: what this machine has. One block per GPU (PCI address, names, bound driver,
// render node, IOMMU group, owner, and the backend verdict), then the built-in devices (cpu and
// the simulated ones). --json prints the same as the schema in tools/baregpu/README.md.
#include "base/error.hpp"
#include "drivers/pci/enumerate.hpp"
#include "drivers/registry.hpp"
#include "tools/baregpu/commands.hpp"
#include "tools/baregpu/json_writer.hpp"

#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <optional>
#include <string>

namespace baregpu::tools {

namespace {

constexpr const char* kHelp =
    "usage: baregpu devices [--json]\n"
    "\n"
    "Lists every display controller and processing accelerator on the PCI bus with the kernel\n"
    "driver bound to it, its DRM render node, IOMMU group, the baregpu process that owns it, and\n"
    "which baregpu backend could drive it (or what to do first); then the built-in devices: the\n"
    "host CPU and the simulated devices of this build. Exits 0 when nothing is found.\n"
    "\n"
    "  --json              machine-readable output (schema: tools/baregpu/README.md)\n"
    "  --sysfs-root DIR    read DIR instead of /sys (for tests: a fake sysfs tree); default: $BAREGPU_SYSFS_ROOT,\n"
    "                      which the registry also reads when it opens the URIs listed here, else /sys\n"
    "  --pci-ids FILE      name devices from FILE instead of the system's pci.ids\n";

constexpr int kJsonSchemaVersion = 1;

struct Options {
    bool json = false;
    pci::EnumerateOptions enumerate;
};

struct Listing {
    std::vector<pci::GpuFunction> gpus;
    std::vector<std::string> warnings;
    std::optional<std::string> no_bus;  // why no PCI bus could be read (then gpus is empty)
    std::vector<registry::BuiltinDevice> builtin;
};

std::string hex4(uint16_t v) { return fmt::format("{:04x}", v); }

std::string group_text(const pci::GpuFunction& gpu) {
    if (!gpu.iommu_group) return "none (no IOMMU, or it is off)";
    std::string text = std::to_string(*gpu.iommu_group);
    if (!gpu.iommu_group_peers.empty()) {
        text += " (with";
        for (const pci::IommuGroupPeer& peer : gpu.iommu_group_peers) {
            text += fmt::format(" {} {}", peer.address, peer.driver.empty() ? "unbound" : peer.driver);
            if (&peer != &gpu.iommu_group_peers.back()) text += ",";
        }
        text += ")";
    }
    return text;
}

std::string owner_text(const std::optional<pid_t>& owner) {
    if (!owner) return "none";
    if (*owner == 0) return "a baregpu process (pid not yet written)";
    return fmt::format("pid {}", *owner);
}

void print_human(const Listing& listing) {
    std::printf("GPUs\n");
    if (listing.no_bus) std::printf("  %s\n", listing.no_bus->c_str());
    if (listing.gpus.empty()) {
        std::printf("  no GPU found (no display controller or processing accelerator on the PCI bus)\n");
    }
    for (const pci::GpuFunction& gpu : listing.gpus) {
        const pci::BackendVerdict& v = gpu.verdict;
        if (&gpu != &listing.gpus.front()) std::printf("\n");
        std::printf("  %s  %s %s (rev %02x)\n", gpu.address.to_string().c_str(), gpu.vendor_name.c_str(),
                    gpu.device_name.c_str(), gpu.revision);
        auto line = [](const char* label, const std::string& value) {
            std::printf("      %-12s %s\n", label, value.c_str());
        };
        line("class", fmt::format("{} ({:06x})", gpu.class_name, gpu.class_code));
        std::string ids = fmt::format("{}:{}", hex4(gpu.vendor_id), hex4(gpu.device_id));
        if (!gpu.subsystem_name.empty()) {
            ids += fmt::format(", subsystem {}:{} {}", hex4(gpu.subsystem_vendor_id), hex4(gpu.subsystem_id),
                               gpu.subsystem_name);
        }
        line("ids", ids);
        line("driver", gpu.driver.empty() ? "none" : gpu.driver);
        line("render node", gpu.render_node.empty() ? "none" : gpu.render_node);
        line("iommu group", group_text(gpu));
        line("owner", owner_text(gpu.owner));
        std::string backend = v.transport.empty() ? v.backend : fmt::format("{} ({})", v.backend, v.transport);
        line("backend", v.backend.empty() ? "none" : v.family.empty() ? backend : backend + ", " + v.family);
        line("verdict", v.reason);
    }
    std::printf("\nBuilt-in devices\n");
    for (const registry::BuiltinDevice& d : listing.builtin) {
        std::printf("  %-10s %s\n", d.name.c_str(), d.summary.c_str());
    }
    if (!listing.warnings.empty()) {
        std::printf("\nWarnings\n");
        for (const std::string& w : listing.warnings) std::printf("  %s\n", w.c_str());
    }
}

void print_json(const Listing& listing) {
    JsonWriter w;
    w.begin_object();
    w.key("schema_version");
    w.value(int64_t{kJsonSchemaVersion});
    w.key("pci_bus_visible");
    w.value(!listing.no_bus.has_value());
    w.key("gpus");
    w.begin_array();
    for (const pci::GpuFunction& gpu : listing.gpus) {
        w.begin_object();
        w.key("address");
        w.value(gpu.address.to_string());
        w.key("vendor_id");
        w.value(hex4(gpu.vendor_id));
        w.key("device_id");
        w.value(hex4(gpu.device_id));
        w.key("revision");
        w.value(fmt::format("{:02x}", gpu.revision));
        w.key("class");
        w.value(fmt::format("{:06x}", gpu.class_code));
        w.key("subsystem_vendor_id");
        w.value(hex4(gpu.subsystem_vendor_id));
        w.key("subsystem_id");
        w.value(hex4(gpu.subsystem_id));
        w.key("vendor");
        w.value(gpu.vendor_name);
        w.key("device");
        w.value(gpu.device_name);
        w.key("subsystem");
        gpu.subsystem_name.empty() ? w.null() : w.value(gpu.subsystem_name);
        w.key("class_name");
        w.value(gpu.class_name);
        w.key("driver");
        gpu.driver.empty() ? w.null() : w.value(gpu.driver);
        w.key("render_node");
        gpu.render_node.empty() ? w.null() : w.value(gpu.render_node);
        w.key("iommu_group");
        gpu.iommu_group ? w.value(int64_t{*gpu.iommu_group}) : w.null();
        w.key("iommu_group_peers");
        w.begin_array();
        for (const pci::IommuGroupPeer& peer : gpu.iommu_group_peers) {
            w.begin_object();
            w.key("address");
            w.value(peer.address);
            w.key("driver");
            peer.driver.empty() ? w.null() : w.value(peer.driver);
            w.end_object();
        }
        w.end_array();
        w.key("owner_pid");
        gpu.owner ? w.value(int64_t{*gpu.owner}) : w.null();
        const pci::BackendVerdict& v = gpu.verdict;
        w.key("backend");
        v.backend.empty() ? w.null() : w.value(v.backend);
        w.key("family");
        v.family.empty() ? w.null() : w.value(v.family);
        w.key("uri");
        v.uri.empty() ? w.null() : w.value(v.uri);
        w.key("transport");
        v.transport.empty() ? w.null() : w.value(v.transport);
        w.key("ready");
        w.value(v.ready);
        w.key("reason");
        w.value(v.reason);
        w.end_object();
    }
    w.end_array();
    w.key("builtin");
    w.begin_array();
    for (const registry::BuiltinDevice& d : listing.builtin) {
        w.begin_object();
        w.key("name");
        w.value(d.name);
        w.key("kind");
        w.value(d.kind);
        w.key("hcq_device");
        w.value(d.hcq_device);
        w.key("summary");
        w.value(d.summary);
        w.end_object();
    }
    w.end_array();
    w.key("warnings");
    w.begin_array();
    for (const std::string& warning : listing.warnings) w.value(warning);
    if (listing.no_bus) w.value(*listing.no_bus);
    w.end_array();
    w.end_object();
    std::fputs(w.text().c_str(), stdout);
}

}  // namespace

int devices_command(std::span<const std::string_view> args) {
    Options options;
    if (const char* root = std::getenv("BAREGPU_SYSFS_ROOT"); root && *root) options.enumerate.sysfs_root = root;
    for (size_t i = 0; i < args.size(); ++i) {
        std::string_view arg = args[i];
        auto operand = [&]() -> std::string {
            if (i + 1 >= args.size()) throw Error("", fmt::format("{} needs a value (see baregpu devices --help)", arg));
            return std::string(args[++i]);
        };
        if (arg == "--json") {
            options.json = true;
        } else if (arg == "--sysfs-root") {
            options.enumerate.sysfs_root = operand();
        } else if (arg == "--pci-ids") {
            options.enumerate.pci_ids = operand();
        } else if (arg == "--help" || arg == "-h") {
            std::fputs(kHelp, stdout);
            return 0;
        } else {
            std::fprintf(stderr, "baregpu devices: unknown option \"%.*s\"\n\n%s", static_cast<int>(arg.size()),
                         arg.data(), kHelp);
            return 2;
        }
    }

    Listing listing;
    try {
        pci::Enumeration found = pci::enumerate_gpus(options.enumerate);
        listing.gpus = std::move(found.gpus);
        listing.warnings = std::move(found.warnings);
    } catch (const UnsupportedError& e) {
        listing.no_bus = e.what();  // no PCI bus here: still a valid answer, with cpu and sim
    }
    listing.builtin = registry::builtin_devices();
    if (options.json) {
        print_json(listing);
    } else {
        print_human(listing);
    }
    return 0;
}

}  // namespace baregpu::tools
