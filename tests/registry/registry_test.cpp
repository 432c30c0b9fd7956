// drivers/registry: the built-in devices and how the CPU is described.
#include "drivers/registry.hpp"

#include <catch2/catch.hpp>
#include <unistd.h>

using namespace baregpu::registry;

TEST_CASE("describe_cpu reads x86 and Arm /proc/cpuinfo") {
    const char* x86 =
        "processor\t: 0\n"
        "vendor_id\t: GenuineIntel\n"
        "model name\t: Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz\n"
        "processor\t: 1\n"
        "model name\t: Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz\n";
    CHECK(describe_cpu(x86, 2) == "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz, 2 cores");
    CHECK(describe_cpu(x86, 1) == "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz, 1 core");

    // Raspberry Pi style: a "Model" line at the end; plain Arm servers only have "CPU part".
    const char* pi = "processor\t: 0\nBogoMIPS\t: 108.00\nCPU part\t: 0xd0b\n\nModel\t\t: Raspberry Pi 5 Model B Rev 1.0\n";
    CHECK(describe_cpu(pi, 4) == "Raspberry Pi 5 Model B Rev 1.0, 4 cores");
    const char* arm = "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n";
    CHECK(describe_cpu(arm, 80) == "Arm CPU part 0xd0c, 80 cores");

    CHECK(describe_cpu("", 3) == "unknown CPU model, 3 cores");
    CHECK(describe_cpu("model name\t:   \n", 1) == "unknown CPU model, 1 core");  // empty value
}

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
