#include "hcq/registry.hpp"

#include "base/error.hpp"
#include "hcq/profiler.hpp"

#include <charconv>
#include <cstdlib>
#include <fmt/format.h>
#include <stdexcept>

namespace baregpu::hcq {

DeviceUri DeviceUri::parse(std::string_view text) {
    DeviceUri uri;
    uri.text_ = std::string(text);
    std::string_view base = text, query;
    if (auto q = text.find('?'); q != std::string_view::npos) {
        base = text.substr(0, q);
        query = text.substr(q + 1);
    }
    auto colon = base.find(':');
    uri.scheme_ = std::string(base.substr(0, colon));
    if (colon != std::string_view::npos) uri.path_ = std::string(base.substr(colon + 1));
    if (uri.scheme_.empty()) throw std::invalid_argument(fmt::format("device name '{}' has no scheme (like cpu or am:...)", text));
    while (!query.empty()) {
        auto amp = query.find('&');
        std::string_view item = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        if (item.empty()) continue;
        auto eq = item.find('=');
        if (eq == std::string_view::npos || eq == 0) {
            throw std::invalid_argument(fmt::format("device name '{}': option '{}' is not key=value", text, item));
        }
        std::string key(item.substr(0, eq));
        if (uri.options_.count(key)) {
            throw std::invalid_argument(fmt::format("device name '{}': option '{}' is given twice; give it once", text, key));
        }
        uri.options_[key] = std::string(item.substr(eq + 1));
    }
    return uri;
}

std::optional<std::string> DeviceUri::option(const std::string& key) const {
    auto it = options_.find(key);
    if (it == options_.end()) return std::nullopt;
    used_[key] = true;
    return it->second;
}

uint64_t DeviceUri::option_u64(const std::string& key, uint64_t fallback) const {
    auto v = option(key);
    if (!v) return fallback;
    uint64_t out = 0;
    uint64_t scale = 1;
    std::string_view digits = *v;
    // Accept k/M/G suffixes (powers of two): ring=64k.
    if (!digits.empty()) {
        char last = digits.back();
        if (last == 'k' || last == 'K') scale = 1ull << 10;
        if (last == 'm' || last == 'M') scale = 1ull << 20;
        if (last == 'g' || last == 'G') scale = 1ull << 30;
        if (scale != 1) digits.remove_suffix(1);
    }
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() || (out && scale > ~uint64_t{0} / out)) {
        throw Error(name(), fmt::format("option {}={} is not a number", key, *v));
    }
    return out * scale;
}

uint32_t DeviceUri::option_u32(const std::string& key, uint32_t fallback, uint32_t max) const {
    const uint64_t value = option_u64(key, fallback);
    if (value > max) throw Error(name(), fmt::format("option {}={} is larger than {}", key, *option(key), max));
    return static_cast<uint32_t>(value);
}

void DeviceUri::reject_unused(std::string_view known) const {
    std::string unknown;
    for (const auto& [key, value] : options_) {
        if (!used_.count(key)) unknown += (unknown.empty() ? "" : ", ") + key;
    }
    if (!unknown.empty()) {
        throw Error(name(), fmt::format("unknown option(s) {} in '{}'; this backend knows: {}", unknown, text_, known));
    }
}

void Registry::add(Backend backend) {
    std::lock_guard lock(mutex_);
    for (auto& b : backends_) {
        if (b.scheme == backend.scheme) {
            b = std::move(backend);
            return;
        }
    }
    backends_.push_back(std::move(backend));
}

bool Registry::has(std::string_view scheme) const {
    std::lock_guard lock(mutex_);
    for (const auto& b : backends_) {
        if (b.scheme == scheme) return true;
    }
    return false;
}

std::vector<std::string> Registry::schemes() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& b : backends_) out.push_back(b.scheme);
    return out;
}

std::vector<Backend> Registry::backends() const {
    std::lock_guard lock(mutex_);
    return backends_;
}

std::string DefaultChoice::describe() const {
    std::string text = fmt::format("device {} ({})", name, reason);
    for (const Skipped& s : skipped) text += fmt::format("\n  {} not used: {}", s.name, s.why);
    return text;
}

namespace {

// "am:0000:03:00.0: bound to amdgpu: ..." -> "bound to amdgpu: ...": the name is already said.
std::string without_name(std::string what, const std::string& name) {
    if (what.starts_with(name + ": ")) what.erase(0, name.size() + 2);
    return what;
}

}  // namespace

std::shared_ptr<Device> Registry::open_default(DefaultChoice* out) const {
    // A bad BAREGPU_TIMEOUT_MS or an unwritable BAREGPU_PROFILE is refused now, naming it, not at
    // the first wait or after the work.
    default_timeout();
    Profiler::check_environment();
    DefaultChoice choice;
    std::shared_ptr<Device> device;
    if (const char* env = std::getenv("BAREGPU_DEVICE"); env && *env) {
        device = open(env);  // the user named it: its errors are the answer
        choice.name = env;
        choice.reason = "$BAREGPU_DEVICE";
    } else {
        bool found = false;
        for (const Backend& b : backends()) {
            if (!b.real_hardware || !b.enumerate) continue;
            std::vector<std::string> names;
            try {
                names = b.enumerate();
            } catch (const std::exception& e) {
                choice.skipped.push_back({b.scheme + ":", fmt::format("cannot list its devices: {}", e.what())});
                continue;
            }
            for (const std::string& name : names) {
                found = true;
                try {
                    device = b.open(DeviceUri::parse(name));
                } catch (const std::exception& e) {
                    choice.skipped.push_back({name, without_name(e.what(), name.substr(0, name.find('?')))});
                    continue;
                }
                choice.name = name;
                choice.reason = "the first real GPU that opens";
                break;
            }
            if (device) break;
        }
        if (!device) {
            device = open("cpu");
            choice.name = "cpu";
            choice.reason = found ? "no real GPU opened" : "no real GPU found";
        }
    }
    if (out) *out = std::move(choice);
    return device;
}

std::shared_ptr<Device> Registry::open(std::string_view name) const {
    if (name.empty()) return open_default();
    default_timeout();
    Profiler::check_environment();
    DeviceUri uri = DeviceUri::parse(name);
    std::function<std::shared_ptr<Device>(const DeviceUri&)> opener;
    std::string known;
    {
        std::lock_guard lock(mutex_);
        for (const auto& b : backends_) {
            known += (known.empty() ? "" : ", ") + b.scheme;
            if (b.scheme == uri.scheme()) opener = b.open;
        }
    }
    if (!opener) {
        throw Error(uri.name(), fmt::format("no backend for '{}' in this build (known: {}); see `baregpu devices`", uri.scheme(),
                                            known.empty() ? "none registered" : known));
    }
    return opener(uri);
}

Registry& registry() {
    static Registry r;
    return r;
}

std::shared_ptr<Device> open_device(std::string_view name) { return registry().open(name); }

std::shared_ptr<Device> open_default_device(DefaultChoice* choice) { return registry().open_default(choice); }

}  // namespace baregpu::hcq
