// What code is generated for: an LLVM target triple, a CPU and its features.
#pragma once

#include <string>

namespace baregpu::compiler {

struct Target {
    std::string triple;    // "x86_64-unknown-linux-gnu"
    std::string cpu;       // "znver4"
    std::string features;  // "+avx2,+avx512f,..." (LLVM's syntax)

    // The machine this process runs on: what the CPU device executes.
    static Target host();
    std::string key() const { return triple + "|" + cpu + "|" + features; }
};

}  // namespace baregpu::compiler
