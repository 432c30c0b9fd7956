// The GPU boards a device's machine code runs on, with the vendors' published fp32 and memory
// bandwidth peaks: on a GPU device the tensor suite's of_peak is a kernel's time against this
// roofline, not against the host CPU's.
#pragma once

#include <optional>
#include <string>

namespace baregpu::bench {

struct Board {
    std::string name;
    double fp32_gflops = 0;  // peak fp32 (an FMA is two flops), the vendor's figure
    double mem_gbps = 0;     // peak DRAM bandwidth
    std::string source;      // where the figures are published
    // The roofline time of `flops` of fp32 work moving `bytes` to and from memory, in seconds.
    double seconds(double flops, double bytes) const;
};

// The board for a device's code architecture ("gfx1100", "sm_90", ...), nullopt for CPU code
// (a host-code stand-in on a simulated GPU included) and for architectures with no entry.
std::optional<Board> board_for(const std::string& arch);

}  // namespace baregpu::bench
