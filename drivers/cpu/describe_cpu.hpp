// The host CPU in one line, for `baregpu devices`: "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz, 2 cores".
#pragma once

#include <string>
#include <string_view>

namespace baregpu::cpu {

// From /proc/cpuinfo's text and the number of online CPUs. Reads "model name" (x86), else
// "Model"/"Hardware"/"CPU part" (Arm); "unknown CPU model" when none is there. Pure, for tests.
std::string describe_cpu(std::string_view proc_cpuinfo, unsigned online_cpus);

// describe_cpu of this machine's /proc/cpuinfo and online CPUs.
std::string describe_host_cpu();

}  // namespace baregpu::cpu
