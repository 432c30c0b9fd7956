// The guest side of tests/qemu: runs a batch of named tests inside the QEMU guest and reports
// each one on the serial console between markers the host harness (run_qemu_tests.py) parses.
// Every test runs in its own forked process with a deadline, so a crash, a hang or a device left
// in a bad state ends that test only, and the device fds it opened are closed before the next.
#pragma once

#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace baregpu::qemu {

// A test that cannot run here (a device the harness did not attach): reported as SKIP.
struct SkipTest {
    std::string why;
};

// A failed expectation. The message says what was checked, on which device, expected vs found.
struct TestFailure {
    std::string what;
};

inline void check(bool ok, const std::string& what) {
    if (!ok) throw TestFailure{what};
}

struct GuestTest {
    std::string_view name;
    std::function<void()> run;
};

// Runs `tests` in order (or only those named in `only`, when non-empty). Prints per test:
//   @@BAREGPU-TEST BEGIN <name>
//   ...the test's own output...
//   @@BAREGPU-TEST END <name> PASS|FAIL|SKIP <seconds>
// and at the end `@@BAREGPU-BATCH DONE pass=N fail=N skip=N`. Returns the number of failures.
int run_batch(std::span<const GuestTest> tests, std::span<const std::string> only, std::chrono::seconds per_test_timeout);

}  // namespace baregpu::qemu
