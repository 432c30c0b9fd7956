// Unit: device names, options and the registry.
#include "base/error.hpp"
#include "hcq/registry.hpp"
#include "tests/hcq/support.hpp"

#include <chrono>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

using namespace baregpu;
using namespace baregpu::hcq;

TEST_CASE("registry: names parse into scheme, path and options") {
    auto u = DeviceUri::parse("am:0000:03:00.0?ring=64k&threads=2");
    CHECK(u.scheme() == "am");
    CHECK(u.path() == "0000:03:00.0");
    CHECK(u.name() == "am:0000:03:00.0");
    CHECK(u.option_u64("ring", 0) == 65536);
    CHECK(u.option_u64("threads", 0) == 2);
    CHECK(u.option_u64("absent", 9) == 9);
    CHECK_NOTHROW(u.reject_unused(""));
    auto bad = DeviceUri::parse("cpu?ring=lots&x=1");
    CHECK_THROWS_AS(bad.option_u64("ring", 0), Error);
    CHECK_THROWS_WITH(bad.reject_unused("ring"), Catch::Contains("unknown option(s) x"));
    CHECK_THROWS_AS(DeviceUri::parse(":0"), std::invalid_argument);
    CHECK_THROWS_AS(DeviceUri::parse("cpu?novalue"), std::invalid_argument);
    CHECK(DeviceUri::parse("cpu").name() == "cpu");
}

TEST_CASE("registry: open_device, BAREGPU_DEVICE, unknown schemes and options") {
    auto cpu = test::open_device("cpu");
    CHECK(cpu->name() == "cpu");
    CHECK(cpu->arch() == "x86_64");
    auto cpu3 = test::open_device("cpu:3");
    CHECK(cpu3->name() == "cpu:3");
    CHECK(cpu3.get() != cpu.get());
    CHECK_THROWS_WITH(test::open_device("nosuch:0"), Catch::Contains("no backend for 'nosuch'") && Catch::Contains("cpu"));
    CHECK_THROWS_WITH(test::open_device("cpu?bogus=1"), Catch::Contains("bogus") && Catch::Contains("threads"));
    CHECK_THROWS_WITH(test::open_device("cpu?ring=5000"), Catch::Contains("power of two"));
    CHECK_THROWS_WITH(test::open_device("cpu:x"), Catch::Contains("cpu:N"));
    // BAREGPU_DEVICE picks the default device.
    setenv("BAREGPU_DEVICE", "cpu:7?threads=1", 1);
    auto d = hcq::open_device();
    CHECK(d->name() == "cpu:7");
    unsetenv("BAREGPU_DEVICE");
    // No PCI bus (a sysfs root that does not exist): no real GPU, so the default is cpu.
    setenv("BAREGPU_SYSFS_ROOT", "/nonexistent-baregpu-sysfs", 1);
    DefaultChoice choice;
    CHECK(hcq::open_default_device(&choice)->name() == "cpu");
    CHECK(choice.name == "cpu");
    CHECK(hcq::open_device()->name() == "cpu");
    unsetenv("BAREGPU_SYSFS_ROOT");
    CHECK(hcq::registry().has("cpu"));
}

namespace {

// A registry of fake real-hardware backends around the process registry's cpu backend: `opens`
// names the devices whose open succeeds (they are cpu devices underneath); every other open throws
// the error a real backend would. `log` records every open tried, in order.
struct FakeMachine {
    hcq::Registry registry;
    std::vector<std::string> log;

    FakeMachine() {
        test::open_device("cpu");  // registers the process registry's backends
        Backend cpu;
        cpu.scheme = "cpu";
        cpu.open = [](const DeviceUri& uri) { return hcq::open_device(uri.text()); };
        registry.add(cpu);
    }
    void add(std::string scheme, bool real, std::vector<std::string> devices, std::set<std::string> opens) {
        Backend b;
        b.scheme = scheme;
        b.real_hardware = real;
        b.enumerate = [devices] { return devices; };
        b.open = [this, opens](const DeviceUri& uri) -> std::shared_ptr<Device> {
            log.push_back(uri.name());
            if (!opens.count(uri.name())) throw Error(uri.name(), "bound to amdgpu: unbind or use vfio-pci (udev/README.md)");
            return hcq::open_device("cpu:" + std::to_string(log.size()));
        };
        registry.add(b);
    }
};

}  // namespace

TEST_CASE("default device: the first real GPU that opens, in registration then enumeration order; the others say why") {
    unsetenv("BAREGPU_DEVICE");
    FakeMachine m;
    m.add("sim-x", false, {"sim-x:0"}, {"sim-x:0"});  // not real hardware: never tried
    m.add("am", true, {"am:0000:03:00.0", "am:0000:04:00.0"}, {"am:0000:04:00.0"});
    m.add("nv", true, {"nv:0000:01:00.0"}, {"nv:0000:01:00.0"});
    DefaultChoice choice;
    auto dev = m.registry.open_default(&choice);
    REQUIRE(dev);
    CHECK(choice.name == "am:0000:04:00.0");
    CHECK(choice.reason == "the first real GPU that opens");
    CHECK(m.log == std::vector<std::string>{"am:0000:03:00.0", "am:0000:04:00.0"});  // nv never tried
    REQUIRE(choice.skipped.size() == 1);
    CHECK(choice.skipped[0].name == "am:0000:03:00.0");
    CHECK(choice.skipped[0].why == "bound to amdgpu: unbind or use vfio-pci (udev/README.md)");  // without the name again
    CHECK(choice.describe() == "device am:0000:04:00.0 (the first real GPU that opens)\n"
                               "  am:0000:03:00.0 not used: bound to amdgpu: unbind or use vfio-pci (udev/README.md)");
    // An empty name is the same rule.
    m.log.clear();
    m.registry.open("");
    CHECK(m.log == std::vector<std::string>{"am:0000:03:00.0", "am:0000:04:00.0"});
}

TEST_CASE("default device: cpu when no real GPU opens, or none is found; a backend that cannot list is named") {
    unsetenv("BAREGPU_DEVICE");
    FakeMachine none;
    DefaultChoice choice;
    CHECK(none.registry.open_default(&choice)->name() == "cpu");
    CHECK(choice.name == "cpu");
    CHECK(choice.reason == "no real GPU found");
    CHECK(choice.skipped.empty());

    FakeMachine broken;
    broken.add("am", true, {"am:0000:03:00.0"}, {});
    broken.add("nv", true, {"nv:0000:01:00.0"}, {});
    Backend failing;
    failing.scheme = "qcom";
    failing.real_hardware = true;
    failing.enumerate = []() -> std::vector<std::string> { throw Error("", "libpci: cannot read the bus"); };
    failing.open = [](const DeviceUri& uri) -> std::shared_ptr<Device> { throw Error(uri.name(), "never opened"); };
    broken.registry.add(failing);
    CHECK(broken.registry.open_default(&choice)->name() == "cpu");
    CHECK(choice.reason == "no real GPU opened");
    REQUIRE(choice.skipped.size() == 3);
    CHECK(choice.skipped[0].name == "am:0000:03:00.0");
    CHECK(choice.skipped[1].name == "nv:0000:01:00.0");
    CHECK(choice.skipped[2].name == "qcom:");
    CHECK(choice.skipped[2].why == "cannot list its devices: libpci: cannot read the bus");
}

TEST_CASE("default device: $BAREGPU_DEVICE wins; real backends are not even asked") {
    FakeMachine m;
    m.add("am", true, {"am:0000:03:00.0"}, {"am:0000:03:00.0"});
    setenv("BAREGPU_DEVICE", "cpu:9", 1);
    DefaultChoice choice;
    CHECK(m.registry.open_default(&choice)->name() == "cpu:9");
    CHECK(choice.reason == "$BAREGPU_DEVICE");
    CHECK(m.log.empty());
    // Its errors are the answer, not a fallback.
    setenv("BAREGPU_DEVICE", "nosuch:0", 1);
    CHECK_THROWS_WITH(m.registry.open_default(), Catch::Contains("no backend for 'nosuch'"));
    unsetenv("BAREGPU_DEVICE");
}

TEST_CASE("registry: an option given twice is refused, and counts are range-checked before they are narrowed") {
    CHECK_THROWS_WITH(DeviceUri::parse("cpu?threads=100000&threads=2"), Catch::Contains("'threads' is given twice"));
    auto u = DeviceUri::parse("cpu?threads=4294967297&slots=4294967295&k=3");
    CHECK_THROWS_WITH(u.option_u32("threads", 0), Catch::Contains("threads=4294967297") && Catch::Contains("larger than 4294967295"));
    CHECK(u.option_u32("slots", 0) == 4294967295u);
    CHECK_THROWS_WITH(u.option_u32("k", 0, 2), Catch::Contains("k=3 is larger than 2"));
    for (const char* name : {"cpu?threads=4294967297", "cpu?staging_slots=4294967296", "cpu?clock_skew_ppm=5x"}) {
        INFO(name);
        CHECK_THROWS_AS(test::open_device(name), Error);
    }
}

TEST_CASE("registry: BAREGPU_TIMEOUT_MS is a whole number of milliseconds in range, or refused naming it") {
    CHECK(parse_timeout_ms("300") == std::chrono::milliseconds(300));
    CHECK(parse_timeout_ms("86400000") == std::chrono::hours(24));
    for (const char* bad : {"-5", "0", "abc", "5ms", "", "86400001", "9223372036855", "18446744073709551616"}) {
        INFO(bad);
        CHECK_THROWS_WITH(parse_timeout_ms(bad), Catch::Contains(std::string("BAREGPU_TIMEOUT_MS=") + bad));
    }
}
