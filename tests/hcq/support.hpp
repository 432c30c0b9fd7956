// What the HCQ acceptance suite needs besides the public HCQ API: the list of devices to run on,
// the test kernels for each ISA, and the BAREGPU_LONG switch.
#pragma once

#include "tests/skip.hpp"  // long_run()

#include "hcq/device.hpp"
#include "tests/elements.hpp"
#include "hcq/registry.hpp"

#include <catch2/catch.hpp>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace baregpu::test {

// $BAREGPU_TEST_DEVICES (comma-separated names), else every device this build can always open
// ("cpu"). Each later backend adds its simulated device here.
std::vector<std::string> hcq_devices();

// Opens a device by name (registering this build's backends first).
std::shared_ptr<hcq::Device> open_device(const std::string& name);
// `name` with extra options appended; empty when the backend does not take options (the test
// then skips what needs them).
std::string with_options(const std::string& name, const std::string& options);
// What a device opened by `name` calls itself: its URI less the options ("sim-am:navi31?isa=host" ->
// "sim-am:navi31").
std::string device_name(const std::string& name);
// A second device of the same kind for cross-device tests ("cpu" -> "cpu:1"), or empty.
std::string peer_of(const std::string& name);

// A compiled test kernel for `device`'s ISA (tests/hcq/kernels/<object>.c for x86_64,
// kernels/amdgpu/<object>.ll for gfx1100 and gfx1201).
std::span<const std::byte> kernel_object(const hcq::Device& device, std::string_view object);
std::shared_ptr<hcq::Program> load_kernel(hcq::Device& device, std::string_view object, std::string_view kernel);

// Host-visible helpers that go through the device's own copy path.
template <typename T>
void upload(hcq::Device& device, const hcq::Buffer& dst, const std::vector<T>& values) {
    device.copy_in(dst, std::as_bytes(std::span(values)));
}
template <typename T>
std::vector<T> download(hcq::Device& device, const hcq::Buffer& src, size_t count) {
    std::vector<T> out(count);
    device.synchronize();
    device.copy_out(std::as_writable_bytes(std::span(out)), src);
    return out;
}

}  // namespace baregpu::test

// One device name per run of the enclosing TEST_CASE.
#define HCQ_DEVICE_NAME() GENERATE(from_range(::baregpu::test::hcq_devices()))
