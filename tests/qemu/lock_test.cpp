// The ownership lock across processes on a real kernel: while one process has edu open, a
// second one is refused with BusyError naming the first one's pid; once the owner closes it,
// the second one gets it.
#include "base/error.hpp"
#include "tests/qemu/guest_devices.hpp"
#include "tests/qemu/guest_runner.hpp"
#include "tests/qemu/guest_tests.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace baregpu::qemu {

namespace {

constexpr int kOpened = 10;
constexpr int kBusyAsExpected = 11;
constexpr int kWrongOwner = 12;

// Forks a process that waits for a byte on a pipe, then tries to open edu; returns its exit code.
int second_process_open(int go_fd, pid_t expected_owner) {
    pollfd pfd{go_fd, POLLIN, 0};
    if (::poll(&pfd, 1, 10000) != 1) return 2;
    char byte;
    if (::read(go_fd, &byte, 1) != 1) return 3;
    try {
        auto dev = open_vfio(kEdu);
        return kOpened;
    } catch (const BusyError& e) {
        std::printf("second process: %s\n", e.what());
        return e.owner_pid() == expected_owner ? kBusyAsExpected : kWrongOwner;
    } catch (const std::exception& e) {
        std::printf("second process: unexpected error: %s\n", e.what());
        return 4;
    }
}

int run_second(pid_t expected_owner, const std::function<void()>& while_waiting) {
    int pipe_fds[2];
    check(::pipe(pipe_fds) == 0, fmt::format("pipe: {}", std::strerror(errno)));
    std::fflush(stdout);
    pid_t child = ::fork();
    check(child >= 0, fmt::format("fork: {}", std::strerror(errno)));
    if (child == 0) {
        ::close(pipe_fds[1]);
        ::_exit(second_process_open(pipe_fds[0], expected_owner));
    }
    ::close(pipe_fds[0]);
    while_waiting();
    check(::write(pipe_fds[1], "g", 1) == 1, "write to the second process's pipe");
    ::close(pipe_fds[1]);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

void device_lock_two_processes() {
    std::unique_ptr<pci::PciDevice> dev;
    // The second process is forked before we open, so it inherits no lock fd of ours.
    int code = run_second(::getpid(), [&] { dev = open_vfio(kEdu); });
    check(code == kBusyAsExpected, fmt::format("{}: a second process opening it while we (pid {}) hold it: exit {}, "
                                               "expected {} (BusyError naming our pid)",
                                               kEdu, ::getpid(), code, kBusyAsExpected));
    // Closed before the next fork: a child forked while we hold it would inherit the lock's
    // open file description and with it the flock.
    dev.reset();
    code = run_second(::getpid(), [] {});
    check(code == kOpened, fmt::format("{}: a second process opening it after we closed it: exit {}, expected {} "
                                       "(opened)",
                                       kEdu, code, kOpened));
    std::printf("BusyError while held, open after release\n");
}

}  // namespace baregpu::qemu
