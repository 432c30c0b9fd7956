// The one Catch2 main every test program links (Catch2's runner is the costliest code in the tests
// to compile: once, here). Before any test it runs the program's skip checks (tests/skip.hpp).
#define CATCH_CONFIG_RUNNER
#include "tests/skip.hpp"

#include <catch2/catch.hpp>
#include <cstdio>

namespace baregpu::test {

std::vector<SkipCheck>& skip_checks() {
    static std::vector<SkipCheck> checks;
    return checks;
}

}  // namespace baregpu::test

int main(int argc, char** argv) {
    for (const auto& check : baregpu::test::skip_checks()) {
        const std::string why = check(argc, argv);
        if (!why.empty()) {
            std::printf("SKIPPED: %s\n", why.c_str());
            return 77;
        }
    }
    return Catch::Session().run(argc, argv);
}
