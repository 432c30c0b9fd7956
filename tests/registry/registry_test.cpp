// drivers/registry: the built-in devices.
#include "drivers/registry.hpp"

#include <catch2/catch.hpp>
#include <unistd.h>

using namespace baregpu::registry;

TEST_CASE("the built-in devices: cpu first, then the simulated edu device described from its model") {
    std::vector<BuiltinDevice> devices = builtin_devices();
    REQUIRE(devices.size() >= 2);

    const BuiltinDevice& cpu = devices[0];
    CHECK(cpu.name == "cpu");
    CHECK(cpu.kind == "cpu");
    CHECK(cpu.hcq_device);
    long online = ::sysconf(_SC_NPROCESSORS_ONLN);
    CHECK_THAT(cpu.summary, Catch::Contains(", " + std::to_string(online) + (online == 1 ? " core" : " cores")));

    const BuiltinDevice* edu = nullptr;
    for (const BuiltinDevice& d : devices) {
        if (d.name == "sim-edu") edu = &d;
    }
    REQUIRE(edu != nullptr);
    CHECK(edu->kind == "simulated");
    CHECK_FALSE(edu->hcq_device);
    // What the model presented on the simulated bus: QEMU's IDs and its 1 MiB register BAR.
    CHECK_THAT(edu->summary, Catch::Contains("(1234:11e8, BAR0 1 MiB)"));
    CHECK_THAT(edu->summary, Catch::Contains("not an HCQ GPU"));

    for (const BuiltinDevice& d : devices) {
        INFO(d.name);
        CHECK_FALSE(d.summary.empty());
        if (d.kind == "simulated") CHECK(d.name.rfind("sim-", 0) == 0);
    }
}
