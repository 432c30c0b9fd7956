#include "tests/qemu/guest_runner.hpp"

#include "base/error.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sys/wait.h>
#include <unistd.h>

namespace baregpu::qemu {

namespace {

constexpr int kExitPass = 0;
constexpr int kExitFail = 1;
constexpr int kExitSkip = 77;

// In the child: run the test, turn its outcome into an exit status.
[[noreturn]] void run_child(const GuestTest& test, std::chrono::seconds timeout) {
    // The deadline: SIGALRM's default action kills the child; the parent reports the timeout.
    ::alarm(static_cast<unsigned>(timeout.count()));
    int status = kExitFail;
    try {
        test.run();
        status = kExitPass;
    } catch (const SkipTest& s) {
        std::printf("skipped: %s\n", s.why.c_str());
        status = kExitSkip;
    } catch (const TestFailure& f) {
        std::printf("FAILED: %s\n", f.what.c_str());
    } catch (const std::exception& e) {
        std::printf("FAILED with an exception: %s\n", e.what());
    }
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(status);
}

}  // namespace

int run_batch(std::span<const GuestTest> tests, std::span<const std::string> only, std::chrono::seconds per_test_timeout) {
    int passed = 0, failed = 0, skipped = 0;
    for (const GuestTest& test : tests) {
        if (!only.empty() && std::find(only.begin(), only.end(), test.name) == only.end()) continue;
        std::printf("@@BAREGPU-TEST BEGIN %.*s\n", static_cast<int>(test.name.size()), test.name.data());
        std::fflush(stdout);
        auto start = std::chrono::steady_clock::now();
        pid_t pid = ::fork();
        if (pid < 0) {
            std::printf("fork failed: %s\n", std::strerror(errno));
            ++failed;
            continue;
        }
        if (pid == 0) run_child(test, per_test_timeout);
        int wstatus = 0;
        while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
        }
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const char* verdict = "FAIL";
        if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == kExitPass) {
            verdict = "PASS";
            ++passed;
        } else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == kExitSkip) {
            verdict = "SKIP";
            ++skipped;
        } else {
            if (WIFSIGNALED(wstatus)) {
                int sig = WTERMSIG(wstatus);
                std::printf("FAILED: %s\n", sig == SIGALRM ? "timed out (no result within the per-test deadline)"
                                                           : strsignal(sig));
            }
            ++failed;
        }
        std::printf("@@BAREGPU-TEST END %.*s %s %.2f\n", static_cast<int>(test.name.size()), test.name.data(), verdict,
                    seconds);
        std::fflush(stdout);
    }
    std::printf("@@BAREGPU-BATCH DONE pass=%d fail=%d skip=%d\n", passed, failed, skipped);
    std::fflush(stdout);
    return failed;
}

}  // namespace baregpu::qemu
