#include "tests/hcq/support.hpp"

#include "base/error.hpp"
#include "drivers/registry.hpp"

#include <cstdlib>
#include <fmt/format.h>
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

namespace {

// BAREGPU_TEST_RECOVER_FIRST=1: every device a test opens has just been through a page fault
// (a kernel writing to freed, unmapped memory) and Device::recover(), so that the whole suite
// shows the recovered device works as a fresh one does.
void fault_and_recover(hcq::Device& dev) {
    std::shared_ptr<hcq::Program> fill;
    try {
        fill = load_kernel(dev, "fill", "fill");
    } catch (const std::exception&) {
        return;  // no test kernels for this ISA
    }
    GpuVirtualAddress freed;
    {
        hcq::Buffer b = dev.allocate(4096);
        freed = b.address();
    }
    dev.synchronize();  // the buffer retires and is unmapped
    hcq::Signal done = dev.new_signal(0, "fault-first");
    hcq::KernelArgs args(*fill);
    args.address(0, freed).value(0, 64).value(1, 1);
    dev.compute_queue().exec(*fill, args, {1}, {64}).signal(done, 1).submit();
    try {
        done.wait(1, std::chrono::seconds(5));
    } catch (const DeviceLostError&) {
    }
    if (!dev.failed()) throw std::runtime_error(dev.name() + ": BAREGPU_TEST_RECOVER_FIRST: the write to freed memory did not fault");
    try {
        dev.recover();
    } catch (const UnsupportedError&) {
        throw std::runtime_error(dev.name() + ": BAREGPU_TEST_RECOVER_FIRST set for a device that cannot recover");
    }
    if (dev.failed()) throw std::runtime_error(dev.name() + ": still failed after recover()");
}

}  // namespace

std::shared_ptr<hcq::Device> open_device(const std::string& name) {
    register_backends();
    std::shared_ptr<hcq::Device> dev = hcq::open_device(name);
    if (const char* env = std::getenv("BAREGPU_TEST_RECOVER_FIRST"); env && std::string(env) == "1") fault_and_recover(*dev);
    return dev;
}

std::string with_options(const std::string& name, const std::string& options) {
    auto uri = hcq::DeviceUri::parse(name);
    // Backends declare their options; add them here as they come. "ring" is every queue's ring size.
    if (uri.scheme() != "cpu" && uri.scheme() != "sim-am" && uri.scheme() != "am" && uri.scheme() != "sim-qcom" &&
        uri.scheme() != "sim-nv" && uri.scheme() != "sim-nvrm")
        return {};
    return name + (name.find('?') == std::string::npos ? "?" : "&") + options;
}

std::string device_name(const std::string& name) { return hcq::DeviceUri::parse(name).name(); }

std::string peer_of(const std::string& name) {
    if (const char* env = std::getenv("BAREGPU_TEST_PEER"); env && *env) return env;
    auto uri = hcq::DeviceUri::parse(name);
    if (uri.scheme() == "cpu") return uri.path() == "1" ? "cpu:2" : "cpu:1";
    return {};
}

std::span<const std::byte> kernel_object(const hcq::Device& device, std::string_view object) {
    // x86-64: kernels/<object>.c as an ELF relocatable object; an AMD chip: kernels/amdgpu/<object>.ll
    // built for it and linked (<object>.<gfx arch>.so).
    const std::string file = device.arch() == "x86_64" ? std::string(object) + ".o" : fmt::format("{}.{}.so", object, device.arch());
    auto bytes = test_kernels::find_object(file);
    if (bytes.empty()) {
        throw std::runtime_error(fmt::format("no test kernel {} for {} ({}): tests/hcq/kernels has no such kernel for this ISA, or "
                                             "llc-19 / ld.lld-19 were missing when the tests were built",
                                             file, device.arch(), device.name()));
    }
    return bytes;
}

std::shared_ptr<hcq::Program> load_kernel(hcq::Device& device, std::string_view object, std::string_view kernel) {
    return device.load_program(kernel_object(device, object), kernel);
}

}  // namespace baregpu::test
