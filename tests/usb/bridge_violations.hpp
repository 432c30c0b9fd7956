// What the simulated bridge recorded, for the tests of this directory.
#pragma once

#include "drivers/sim/asm24/sim_asm24.hpp"

#include <string>

namespace usb_test {

inline bool has_violation(const baregpu::sim::asm24::SimAsm24Bridge& b, const std::string& text) {
    for (const auto& v : b.violations()) {
        if (v.describe().find(text) != std::string::npos) return true;
    }
    return false;
}

inline std::string violations(const baregpu::sim::asm24::SimAsm24Bridge& b) {
    std::string out;
    for (const auto& v : b.violations()) out += v.describe() + "\n";
    return out;
}

}  // namespace usb_test
