#include "drivers/pci/peer_mapping.hpp"

#include "base/error.hpp"
#include "drivers/pci/kernel_files.hpp"
#include "drivers/pci/pci_device.hpp"

#include <filesystem>

#include <fmt/format.h>

namespace baregpu::pci {

BusMapping::BusMapping(BusAddress address, uint64_t size, std::string what, std::function<void()> release)
    : address_(address), size_(size), what_(std::move(what)), release_(std::move(release)) {}

BusMapping::~BusMapping() {
    if (release_) release_();
}

namespace {
// "pci0000:00" in "/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0": the host bridge (root
// complex) the device sits under.
std::string_view host_bridge(std::string_view path) {
    constexpr std::string_view kDevices = "/sys/devices/";
    size_t at = path.find(kDevices);
    if (at == std::string_view::npos) return {};
    std::string_view rest = path.substr(at + kDevices.size());
    std::string_view first = rest.substr(0, rest.find('/'));
    return first.starts_with("pci") ? first : std::string_view{};
}
}  // namespace

std::optional<std::string> peer_path_refusal(std::string_view requester_path, std::string_view owner_path) {
    std::string_view a = host_bridge(requester_path), b = host_bridge(owner_path);
    if (a.empty() || b.empty()) {
        return fmt::format("cannot tell where the devices sit in the PCI hierarchy ({} and {} are not under /sys/devices/pci*)",
                           requester_path, owner_path);
    }
    if (a != b) {
        return fmt::format("the devices are behind different root complexes ({} and {}): peer-to-peer writes are not forwarded "
                           "between host bridges here (no ACS peer forwarding between them); put both GPUs under one root complex",
                           a, b);
    }
    return std::nullopt;
}

std::optional<std::string> sysfs_peer_refusal(const std::string& sysfs_root, PciAddress requester, PciAddress owner) {
    std::error_code ec_a, ec_b;
    const auto a = std::filesystem::canonical(kfile::pci_device_dir(sysfs_root, requester), ec_a);
    const auto b = std::filesystem::canonical(kfile::pci_device_dir(sysfs_root, owner), ec_b);
    if (ec_a || ec_b) {
        return fmt::format("cannot resolve where {} and {} sit in the PCI hierarchy under {}: {}", requester.to_string(),
                           owner.to_string(), sysfs_root, (ec_a ? ec_a : ec_b).message());
    }
    return peer_path_refusal(a.string(), b.string());
}

void require_large_bar(PciDevice& owner, unsigned bar, uint64_t memory_bytes) {
    const BarInfo& info = owner.bar_info(bar);
    if (!info.is_memory()) throw UnsupportedError(owner.name(), fmt::format("no peer access: {} is not a memory BAR", info.describe()));
    if (info.size < memory_bytes) {
        throw UnsupportedError(owner.name(), fmt::format("small BAR: BAR{} decodes {} of the device's {} of memory, so a peer cannot "
                                                         "reach all of it; enable Resizable BAR (\"Above 4G decoding\") in the "
                                                         "firmware setup",
                                                         bar, format_size(info.size), format_size(memory_bytes)));
    }
}

}  // namespace baregpu::pci
