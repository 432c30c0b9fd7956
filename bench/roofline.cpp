#include "bench/roofline.hpp"

#include <algorithm>

namespace baregpu::bench {

double Board::seconds(double flops, double bytes) const { return std::max(flops / (fp32_gflops * 1e9), bytes / (mem_gbps * 1e9)); }

std::optional<Board> board_for(const std::string& arch) {
    // The board each architecture's reference part is sold as (the figures of other boards with
    // the same chip differ: a 7900 XT has 84 of Navi31's 96 CUs, an H100 PCIe 51 TFLOPS and 2 TB/s).
    if (arch == "gfx1100")
        return Board{"AMD Radeon RX 7900 XTX (Navi31)", 61400, 960,
                     "AMD product specifications: peak single precision 61.4 TFLOPs, 960 GB/s (20 Gbps GDDR6, 384-bit)"};
    if (arch == "gfx1201")
        return Board{"AMD Radeon RX 9070 XT (Navi48)", 48700, 640,
                     "AMD product specifications: peak single precision 48.7 TFLOPs, 640 GB/s (20 Gbps GDDR6, 256-bit)"};
    if (arch == "sm_89")
        return Board{"NVIDIA GeForce RTX 4090 (AD102)", 82600, 1008,
                     "NVIDIA Ada GPU architecture whitepaper: peak FP32 82.6 TFLOPS (non-tensor), 1008 GB/s"};
    if (arch == "sm_90")
        return Board{"NVIDIA H100 SXM5 (GH100)", 66900, 3350, "NVIDIA H100 Tensor Core GPU datasheet: FP32 67 TFLOPS, 3.35 TB/s HBM3"};
    return std::nullopt;
}

}  // namespace baregpu::bench
