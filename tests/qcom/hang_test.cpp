// Waiting done right on sim-qcom:a630: a hang becomes a TimeoutError within the caller's
// timeout, never a process stuck in IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID; the message names the
// KGSL context, the awaited and the last retired timestamp; later calls report the error state.
// A wait the kernel fails with an errno is a device error naming it.
#include "base/error.hpp"
#include "drivers/qcom/qcom_device.hpp"
#include "drivers/registry.hpp"
#include "hcq/clock.hpp"
#include "hcq/device.hpp"
#include "tests/hcq/support.hpp"

#include <catch2/catch.hpp>
#include <cerrno>
#include <regex>
#include <unistd.h>

namespace hang_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

using namespace baregpu;
using namespace std::chrono_literals;
using baregpu::hcq::Signal;

TEST_CASE("sim-qcom: a hung context surfaces as TimeoutError within the caller's timeout, then DeviceLostError") {
    auto dev = test::open_device("sim-qcom:a630");
    // Work before the hang completes normally.
    hcq::Signal before = dev->new_signal(0, "before");
    dev->compute_queue().signal(before, 1).submit();
    before.wait(1, 5s);
    REQUIRE(registry::inject_kgsl_hang(*dev, true));
    uint64_t v = dev->next_timeline();
    dev->compute_queue().wait(dev->timeline(), v - 1).signal(dev->timeline(), v).submit();
    uint64_t t0 = hcq::host_now_ns();
    std::string text;
    try {
        dev->synchronize(200ms);
        FAIL("synchronize returned on a hung context");
    } catch (const TimeoutError& e) {
        text = e.what();
    }
    double elapsed_ms = double(hcq::host_now_ns() - t0) / 1e6;
    CHECK(elapsed_ms >= 200);
    CHECK(elapsed_ms < 1000);  // never blocks past the caller's timeout (tinygrad's defect)
    INFO(text);
    CHECK(std::regex_search(text, std::regex("KGSL context [0-9]+")));
    CHECK_THAT(text, Catch::Contains("awaiting timestamp 2"));
    CHECK_THAT(text, Catch::Contains("last retired timestamp 1"));
    REQUIRE(dev->failed());
    CHECK_THROWS_AS(dev->synchronize(), DeviceLostError);
    CHECK_THROWS_AS(dev->compute_queue(), DeviceLostError);
    CHECK_THROWS_AS(dev->allocate(64), DeviceLostError);
    // recover(): fresh KGSL contexts; the device takes work again and the old tickets count as done.
    registry::inject_kgsl_hang(*dev, false);
    uint32_t old_context = dynamic_cast<qcom::QcomDevice&>(*dev).compute_context();
    dev->recover();
    CHECK_FALSE(dev->failed());
    CHECK(dynamic_cast<qcom::QcomDevice&>(*dev).compute_context() != old_context);
    hcq::Signal after = dev->new_signal(0, "after");
    uint64_t w = dev->next_timeline();
    dev->compute_queue().wait(dev->timeline(), w - 1).signal(after, 1).signal(dev->timeline(), w).submit();
    after.wait(1, 5s);
    dev->synchronize(5s);
}

TEST_CASE("sim-qcom: a wait the kernel fails with an errno is a device error naming the errno and the context") {
    auto dev = test::open_device("sim-qcom:a630");
    hcq::Signal gate = dev->new_signal(0, "gate");
    uint64_t v = dev->next_timeline();
    dev->compute_queue().wait(gate, 1).signal(dev->timeline(), v).submit();
    REQUIRE(registry::inject_kgsl_wait_error(*dev, EIO));
    uint64_t t0 = hcq::host_now_ns();
    std::string text;
    try {
        dev->synchronize(2s);
        FAIL("synchronize returned although every KGSL wait fails");
    } catch (const DeviceLostError& e) {
        text = e.what();
    }
    CHECK(hcq::host_now_ns() - t0 < 1'000'000'000ull);  // the first failed wait ends it
    INFO(text);
    CHECK_THAT(text, Catch::Contains("EIO"));
    CHECK_THAT(text, Catch::Contains("IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID"));
    CHECK(std::regex_search(text, std::regex("KGSL context [0-9]+")));
    CHECK_THAT(text, Catch::Contains("last retired timestamp"));
    CHECK(dev->failed());
    CHECK_THROWS_AS(dev->copy_queue(), DeviceLostError);
    registry::inject_kgsl_wait_error(*dev, 0);
    gate.set(1);
}

TEST_CASE("sim-qcom: a GPU fault in the context fails waiters at once with the kernel's reason") {
    auto dev = test::open_device("sim-qcom:a630");
    hcq::Signal gate = dev->new_signal(0, "gate"), done = dev->new_signal(0, "done");
    dev->compute_queue().wait(gate, 1).signal(done, 1).submit();
    REQUIRE(registry::inject_kgsl_fault(*dev, "injected SMMU page fault at 0xdead000"));
    CHECK_THROWS_AS(done.wait(1, 5s), DeviceLostError);
    CHECK_THAT(dev->failure(), Catch::Contains("EDEADLK") && Catch::Contains("injected SMMU page fault"));
}

TEST_CASE("sim-qcom: options are checked, unknown ones refused") {
    CHECK_THROWS_WITH(test::open_device("sim-qcom:a630?bogus=1"), Catch::Contains("bogus"));
    CHECK_THROWS_WITH(test::open_device("sim-qcom:a640"), Catch::Contains("sim-qcom:a630") && Catch::Contains("sim-qcom:a730"));
    CHECK_THROWS_WITH(test::open_device("sim-qcom:a630?ring=1000"), Catch::Contains("ring=1000"));
    auto dev = test::open_device("sim-qcom:a630?ring=8192");
    CHECK(dev->arch() == "x86_64");
    CHECK(dev->timestamp_frequency() == 19'200'000);
}

TEST_CASE("qcom: the real scheme enumerates /dev/kgsl-3d0 only where it exists, and opening says what is missing") {
    test::open_device("cpu");  // registers the backends
    const hcq::Registry& reg = hcq::registry();
    REQUIRE(reg.has("qcom"));
    REQUIRE(reg.has("sim-qcom"));
    bool present = ::access("/dev/kgsl-3d0", F_OK) == 0;
    for (const hcq::Backend& b : reg.backends()) {
        if (b.scheme == "qcom") {
            CHECK(b.real_hardware);
            CHECK(b.enumerate().size() == (present ? 1u : 0u));
        }
        if (b.scheme == "sim-qcom") CHECK(b.enumerate() == std::vector<std::string>{"sim-qcom:a630", "sim-qcom:a730"});
    }
    if (!present) CHECK_THROWS_WITH(hcq::open_device("qcom:0"), Catch::Contains("/dev/kgsl-3d0") && Catch::Contains("ENOENT"));
    CHECK_THROWS_WITH(hcq::open_device("qcom:0?bogus=1"), Catch::Contains("bogus") || Catch::Contains("/dev/kgsl-3d0"));
}

TEST_CASE("sim-qcom: host memory imported with MAP_USER_MEM is written by a kernel and read by the host without a copy") {
    auto dev = test::open_device("sim-qcom:a630");
    auto* qcom = dynamic_cast<qcom::QcomDevice*>(dev.get());
    REQUIRE(qcom != nullptr);
    auto fill = test::load_kernel(*dev, "fill", "fill");
    // Not page aligned on purpose: the import maps the pages around it and returns its address.
    std::vector<uint32_t> host(1000 + 3, 0);
    uint32_t* words = host.data() + 3;
    GpuVirtualAddress gpu = qcom->import_user_memory(words, 1000 * 4);
    CHECK(gpu.value() == reinterpret_cast<uint64_t>(words));  // SVM on the model: the same address
    hcq::KernelArgs args(*fill);
    args.address(0, gpu).value(0, 1000).value(1, 0xfeed);
    uint64_t v = dev->next_timeline();
    dev->compute_queue().wait(dev->timeline(), v - 1).exec(*fill, args, {16}, {64}).signal(dev->timeline(), v).submit();
    dev->synchronize();
    for (uint32_t i = 0; i < 1000; ++i) REQUIRE(words[i] == 0xfeed);
    CHECK(host[0] == 0);  // outside the range the kernel was given
    qcom->release_user_memory(gpu);
    CHECK_THROWS_WITH(qcom->release_user_memory(gpu), Catch::Contains("not an import"));
    // After the release the model no longer maps the pages: a kernel writing there faults.
    Signal done = dev->new_signal(0, "done");
    dev->compute_queue().exec(*fill, args, {1}, {64}).signal(done, 1).submit();
    CHECK_THROWS_AS(done.wait(1, 5s), DeviceLostError);
    CHECK_THAT(dev->failure(), Catch::Contains("not mapped"));
}

}  // namespace hang_test
