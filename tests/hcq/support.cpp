#include "tests/hcq/support.hpp"

#include "drivers/registry.hpp"

#include <cstdlib>
#include <mutex>
#include <stdexcept>

namespace baregpu::test_kernels {
std::span<const std::byte> find_object(std::string_view name);
}

namespace baregpu::test {

namespace {
void register_backends() {
    static std::once_flag once;
    std::call_once(once, [] { registry::register_backends(hcq::registry()); });
}
}  // namespace

std::vector<std::string> hcq_devices() {
    std::vector<std::string> out;
    if (const char* env = std::getenv("BAREGPU_TEST_DEVICES"); env && *env) {
        std::string list = env;
        size_t start = 0;
        while (start <= list.size()) {
            size_t comma = list.find(',', start);
            std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
            if (!item.empty()) out.push_back(item);
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
    }
    if (out.empty()) out.push_back("cpu");
    return out;
}

std::shared_ptr<hcq::Device> open_device(const std::string& name) {
    register_backends();
    return hcq::open_device(name);
}

std::string with_options(const std::string& name, const std::string& options) {
    auto uri = hcq::DeviceUri::parse(name);
    // Backends declare their options; add them here as they come. "ring" is every queue's ring size.
    if (uri.scheme() != "cpu" && uri.scheme() != "sim-am") return {};
    return name + (name.find('?') == std::string::npos ? "?" : "&") + options;
}

std::string peer_of(const std::string& name) {
    if (const char* env = std::getenv("BAREGPU_TEST_PEER"); env && *env) return env;
    auto uri = hcq::DeviceUri::parse(name);
    if (uri.scheme() == "cpu") return uri.path() == "1" ? "cpu:2" : "cpu:1";
    return {};
}

std::span<const std::byte> kernel_object(const hcq::Device& device, std::string_view object) {
    if (device.arch() != "x86_64") {
        throw std::runtime_error("no test kernels compiled for " + device.arch() + " (" + device.name() + ")");
    }
    auto bytes = test_kernels::find_object(std::string(object) + ".o");
    if (bytes.empty()) throw std::runtime_error("no test kernel object " + std::string(object) + ".o");
    return bytes;
}

std::shared_ptr<hcq::Program> load_kernel(hcq::Device& device, std::string_view object, std::string_view kernel) {
    return device.load_program(kernel_object(device, object), kernel);
}

bool long_run() {
    const char* env = std::getenv("BAREGPU_LONG");
    return env && std::string(env) == "full";
}

}  // namespace baregpu::test
