// The one Catch2 main every test program links (Catch2's runner is the costliest code in the tests
// to compile: once, here). Before any test it runs the program's skip checks (tests/skip.hpp).
#define CATCH_CONFIG_RUNNER
#include "tests/skip.hpp"

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace baregpu::test {

std::vector<SkipCheck>& skip_checks() {
    static std::vector<SkipCheck> checks;
    return checks;
}

bool long_run() {
    const char* env = std::getenv("BAREGPU_LONG");
    return env && std::string(env) == "full";
}

}  // namespace baregpu::test

int main(int argc, char** argv) {
    // A run that only the long suites afford (meson.build sets the reason): skipped unless
    // BAREGPU_LONG=full (./bootstrap.sh test --long).
    if (const char* why = std::getenv("BAREGPU_TEST_ONLY_LONG"); why && !baregpu::test::long_run()) {
        std::printf("SKIPPED: %s; ./bootstrap.sh test --long runs it\n", why);
        return 77;
    }
    for (const auto& check : baregpu::test::skip_checks()) {
        const std::string why = check(argc, argv);
        if (!why.empty()) {
            std::printf("SKIPPED: %s\n", why.c_str());
            return 77;
        }
    }
    return Catch::Session().run(argc, argv);
}
