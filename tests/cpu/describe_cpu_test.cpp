// drivers/cpu: how the host CPU is described (`baregpu devices`).
#include "drivers/cpu/describe_cpu.hpp"

#include <catch2/catch.hpp>
#include <unistd.h>

using namespace baregpu::cpu;

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

TEST_CASE("describe_host_cpu counts this machine's online CPUs") {
    long online = ::sysconf(_SC_NPROCESSORS_ONLN);
    CHECK_THAT(describe_host_cpu(), Catch::EndsWith(", " + std::to_string(online) + (online == 1 ? " core" : " cores")));
}
