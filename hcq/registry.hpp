// The device registry: backends register a URI scheme; open_device() turns a name into a
// Device. hcq names no backend itself: drivers/registry.cpp (register_backends) registers them all.
//
// Names (docs/ARCHITECTURE.md, "Devices and names"): "cpu", "cpu:1", "am:0000:03:00.0",
// "nv:0000:01:00.0", "sim-am:navi31". Options follow a '?' as key=value pairs joined by '&', e.g.
// "cpu?threads=2&ring=4096"; a backend rejects options it does not know.
#pragma once

#include "hcq/device.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::hcq {

// A parsed device name.
class DeviceUri {
public:
    // Throws std::invalid_argument on a malformed name (empty scheme, option without '=', an
    // option given twice).
    static DeviceUri parse(std::string_view text);

    const std::string& text() const { return text_; }      // as given
    const std::string& scheme() const { return scheme_; }  // "cpu"
    const std::string& path() const { return path_; }      // "1" in "cpu:1", "" in "cpu"
    // The name without options: "cpu:1".
    std::string name() const { return path_.empty() ? scheme_ : scheme_ + ":" + path_; }

    // Option accessors mark the option used. Throw baregpu::Error naming the option when the
    // value does not parse.
    std::optional<std::string> option(const std::string& key) const;
    uint64_t option_u64(const std::string& key, uint64_t fallback) const;
    // option_u64, refused (naming the option) above `max` before it is narrowed.
    uint32_t option_u32(const std::string& key, uint32_t fallback, uint32_t max = UINT32_MAX) const;
    // Throws baregpu::Error listing the unknown options and `known` when any option was not read.
    void reject_unused(std::string_view known) const;

private:
    std::string text_;
    std::string scheme_;
    std::string path_;
    std::map<std::string, std::string> options_;
    mutable std::map<std::string, bool> used_;
};

struct Backend {
    std::string scheme;       // "cpu", "am", "sim-am"
    std::string description;  // one line for `baregpu devices`
    // True for backends that drive real hardware: the default device is the first of their
    // devices that opens, else "cpu" (Registry::open_default).
    bool real_hardware = false;
    // Names of the devices this backend finds on this machine (may be empty). For real hardware:
    // every GPU it could drive, whether or not it opens now (open says why not).
    std::function<std::vector<std::string>()> enumerate;
    std::function<std::shared_ptr<Device>(const DeviceUri&)> open;
};

// How open_default chose: the device, and why each real GPU tried before it did not open.
struct DefaultChoice {
    struct Skipped {
        std::string name;  // "am:0000:03:00.0", or "<scheme>:" when a backend could not list its devices
        std::string why;   // its error, without a leading "<name>: "
    };
    std::string name;    // what was opened: "$BAREGPU_DEVICE"'s name, a real GPU's, or "cpu"
    std::string reason;  // "$BAREGPU_DEVICE", "the first real GPU that opens", "no real GPU found", "no real GPU opened"
    std::vector<Skipped> skipped;  // in the order they were tried
    // One line saying which device and why, then one line per skipped GPU ("  am:... not used: why").
    std::string describe() const;
};

class Registry {
public:
    // Replaces a backend registered under the same scheme.
    void add(Backend backend);
    bool has(std::string_view scheme) const;
    std::vector<std::string> schemes() const;
    std::vector<Backend> backends() const;

    // Open by name. An empty name means open_default(). Throws baregpu::Error naming the
    // registered schemes for an unknown one.
    std::shared_ptr<Device> open(std::string_view name = {}) const;
    // The default device: $BAREGPU_DEVICE when set (its errors are thrown), else the first device
    // of a real-hardware backend (registration order, then each backend's enumeration order) that
    // opens, else "cpu". `choice`, when given, says which and why the GPUs before it did not open.
    std::shared_ptr<Device> open_default(DefaultChoice* choice = nullptr) const;

private:
    mutable std::mutex mutex_;
    std::vector<Backend> backends_;
};

// The process-wide registry.
Registry& registry();

// registry().open(name).
std::shared_ptr<Device> open_device(std::string_view name = {});
// registry().open_default(choice).
std::shared_ptr<Device> open_default_device(DefaultChoice* choice = nullptr);

}  // namespace baregpu::hcq
