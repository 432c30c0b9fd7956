// Exclusive ownership between processes: a second opener is told the owner's pid, and a
// crashed owner's lock is released by the kernel.
#include "base/error.hpp"
#include "drivers/pci/device_lock.hpp"

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace device_lock_test {  // each file's cases in a namespace of their own: the directory builds as one program (meson.build)

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

namespace {

bool lock_test_as_root() { return ::geteuid() == 0; }

std::string lock_test_read(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// A file of someone else's the lock must never touch: mode 0600, known contents.
struct Victim {
    std::string path;
    explicit Victim(const std::string& dir) : path(dir + "/victim") {
        std::ofstream(path) << "TOP SECRET\n";
        ::chmod(path.c_str(), 0600);
    }
    bool untouched() const {
        struct stat st {};
        return ::stat(path.c_str(), &st) == 0 && (st.st_mode & 07777) == 0600 && lock_test_read(path) == "TOP SECRET\n";
    }
};

}  // namespace

TEST_CASE("a symbolic link planted at a lock's path is refused; the file it names is not changed") {
    TempLockDir dir;
    char elsewhere_tmpl[] = "/tmp/baregpu-lock-victim-XXXXXX";
    const std::string elsewhere = ::mkdtemp(elsewhere_tmpl);
    Victim victim(elsewhere);
    const std::string key = "0000:00:00.0";
    REQUIRE(::symlink(victim.path.c_str(), (dir.path + "/" + key + ".lock").c_str()) == 0);
    CHECK_THROWS_WITH(DeviceLock::acquire(key), Catch::Contains("symbolic link") && Catch::Contains(key + ".lock"));
    CHECK_FALSE(DeviceLock::owner_of(key).has_value());
    CHECK(victim.untouched());
    // A hard link to it (where fs.protected_hardlinks allows one) is refused too.
    if (::link(victim.path.c_str(), (dir.path + "/0000:00:01.0.lock").c_str()) == 0) {
        CHECK_THROWS_WITH(DeviceLock::acquire("0000:00:01.0"), Catch::Contains("2 hard links"));
        CHECK(victim.untouched());
    }
    std::filesystem::remove_all(elsewhere);
}

TEST_CASE("releasing a lock changes only the file it took, whatever was put at its path since") {
    TempLockDir dir;
    char elsewhere_tmpl[] = "/tmp/baregpu-lock-victim-XXXXXX";
    const std::string elsewhere = ::mkdtemp(elsewhere_tmpl);
    Victim victim(elsewhere);
    {
        DeviceLock lock = DeviceLock::acquire("0000:00:02.0");
        REQUIRE(::rename(lock.path().c_str(), (dir.path + "/moved").c_str()) == 0);
        REQUIRE(::symlink(victim.path.c_str(), lock.path().c_str()) == 0);
    }
    CHECK(victim.untouched());
    std::filesystem::remove_all(elsewhere);
}

TEST_CASE("lock files and the lock directory are writable by nobody but their owner (and the baregpu group)") {
    TempLockDir dir;
    ::chmod(dir.path.c_str(), 0700);
    DeviceLock lock = DeviceLock::acquire("0000:00:03.0");
    struct stat st {};
    REQUIRE(::stat(lock.path().c_str(), &st) == 0);
    CHECK((st.st_mode & S_IWOTH) == 0);
    CHECK(st.st_uid == ::geteuid());
    // A world-writable lock directory is refused: anyone could hold, plant or rewrite locks in it.
    ::chmod(dir.path.c_str(), 01777);
    CHECK_THROWS_WITH(DeviceLock::acquire("0000:00:04.0"), Catch::Contains("every user can write it") &&
                                                               Catch::Contains("BAREGPU_LOCK_DIR"));
    ::chmod(dir.path.c_str(), 0700);
}

TEST_CASE("a lock directory or lock file another user owns is refused, naming the owner") {
    if (!lock_test_as_root()) {
        WARN("skipped: making a directory of another user's needs root");
        return;
    }
    TempLockDir dir;
    REQUIRE(::chown(dir.path.c_str(), 4242, 4242) == 0);
    CHECK_THROWS_WITH(DeviceLock::acquire("0000:00:05.0"), Catch::Contains("owned by uid 4242") && Catch::Contains(dir.path));
    REQUIRE(::chown(dir.path.c_str(), 0, 0) == 0);
    // Another user's file in our directory: its pid could be anything; refused, not rewritten.
    const std::string planted = dir.path + "/0000:00:06.0.lock";
    std::ofstream(planted) << "1\n";
    REQUIRE(::chown(planted.c_str(), 4242, 4242) == 0);
    CHECK_THROWS_WITH(DeviceLock::acquire("0000:00:06.0"), Catch::Contains("owned by uid 4242"));
    CHECK(lock_test_read(planted) == "1\n");
}

TEST_CASE("a key that is a path locks that file, in a directory of the caller's own") {
    TempLockDir dir;
    const std::string own = dir.path + "/state";
    const std::string key = own + "/sim-am-navi31.lock";
    {
        DeviceLock lock = DeviceLock::acquire(key);
        CHECK(lock.path() == key);
        CHECK(DeviceLock::owner_of(key) == ::getpid());
        struct stat st {};
        REQUIRE(::stat(own.c_str(), &st) == 0);
        CHECK((st.st_mode & 0077) == 0);  // made 0700
    }
    if (lock_test_as_root()) {
        REQUIRE(::chown(own.c_str(), 4242, 4242) == 0);
        CHECK_THROWS_WITH(DeviceLock::acquire(key), Catch::Contains("owned by uid 4242"));
    }
}

}  // namespace device_lock_test
