// Test programs whose tests need a tool this machine may lack (llvm-objdump, ptxas) say so with a
// check that the one Catch2 main (tests/catch_main.cpp) runs before any test: when a check names
// what is missing, the program prints "SKIPPED: <why>" and exits 77, which meson counts as skipped.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace baregpu::test {

// Why this program cannot run here, or "" when it can; argv is the program's (a check may apply
// only to some tests, picked by their tags).
using SkipCheck = std::function<std::string(int argc, char** argv)>;

std::vector<SkipCheck>& skip_checks();

// BAREGPU_LONG=full: the long suites at full length (./bootstrap.sh test --long).
bool long_run();

// Registers a check at static initialisation: `const test::SkipUnless needs_tools{[](int, char**) { ... }};`
struct SkipUnless {
    explicit SkipUnless(SkipCheck check) { skip_checks().push_back(std::move(check)); }
};

}  // namespace baregpu::test
