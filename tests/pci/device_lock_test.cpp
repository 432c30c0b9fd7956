// Exclusive ownership between processes: a second opener is told the owner's pid, and a
// crashed owner's lock is released by the kernel.
#include "base/error.hpp"
#include "drivers/pci/device_lock.hpp"

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <sys/wait.h>
#include <unistd.h>

using namespace baregpu;
using namespace baregpu::pci;

namespace {

struct TempLockDir {
    std::string path;
    TempLockDir() {
        char tmpl[] = "/tmp/baregpu-lock-test-XXXXXX";
        path = ::mkdtemp(tmpl);
        ::setenv("BAREGPU_LOCK_DIR", path.c_str(), 1);
    }
    ~TempLockDir() {
        ::unsetenv("BAREGPU_LOCK_DIR");
        std::filesystem::remove_all(path);
    }
};

// Forks a child that takes the lock, reports through a pipe, then waits to be killed.
pid_t spawn_owner(const std::string& key) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(fds[0]);
        char ok = 'n';
        try {
            DeviceLock lock = DeviceLock::acquire(key);
            ok = 'y';
            (void)!::write(fds[1], &ok, 1);
            for (;;) ::pause();
        } catch (...) {
            (void)!::write(fds[1], &ok, 1);
        }
        ::_exit(1);
    }
    ::close(fds[1]);
    char ok = 0;
    REQUIRE(::read(fds[0], &ok, 1) == 1);
    ::close(fds[0]);
    REQUIRE(ok == 'y');
    return pid;
}

}  // namespace

TEST_CASE("a second process gets BusyError naming the owner's pid; a crash releases the lock") {
    TempLockDir dir;
    const std::string key = "0000:03:00.0";
    pid_t owner = spawn_owner(key);

    CHECK(DeviceLock::owner_of(key) == owner);
    try {
        DeviceLock::acquire(key);
        FAIL("acquire succeeded while another process holds the lock");
    } catch (const BusyError& e) {
        CHECK(e.owner_pid() == owner);
        CHECK(e.device() == key);
        CHECK_THAT(e.what(), Catch::Contains("in use by process " + std::to_string(owner)));
    }

    // The owner crashes: no cleanup code runs, the kernel drops the flock.
    ::kill(owner, SIGKILL);
    int status = 0;
    ::waitpid(owner, &status, 0);
    CHECK_FALSE(DeviceLock::owner_of(key).has_value());
    DeviceLock mine = DeviceLock::acquire(key);
    CHECK(DeviceLock::owner_of(key).has_value());
}

TEST_CASE("locks are per device") {
    TempLockDir dir;
    DeviceLock a = DeviceLock::acquire("0000:03:00.0");
    DeviceLock b = DeviceLock::acquire("0000:04:00.0");
    CHECK(a.path() != b.path());
    CHECK_FALSE(DeviceLock::owner_of("0000:05:00.0").has_value());
}
