// Unit: device names, options and the registry.
#include "base/error.hpp"
#include "hcq/registry.hpp"
#include "tests/hcq/support.hpp"

#include <cstdlib>

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
    CHECK(hcq::registry().default_name() == "cpu");  // no real GPU backend in this build
    CHECK(hcq::open_device()->name() == "cpu");
    CHECK(hcq::registry().has("cpu"));
}
