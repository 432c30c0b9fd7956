#include "drivers/pci/device_lock.hpp"

#include "base/error.hpp"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace baregpu::pci {

namespace {

bool usable_directory(const std::string& dir) {
    if (::mkdir(dir.c_str(), 01777) == 0) {
        ::chmod(dir.c_str(), 01777);  // umask must not narrow it
        return true;
    }
    return errno == EEXIST && ::access(dir.c_str(), W_OK | X_OK) == 0;
}

std::string lock_path(const std::string& key) {
    std::string safe = key;
    for (char& c : safe) {
        if (c == '/') c = '_';
    }
    return DeviceLock::directory() + "/" + safe + ".lock";
}

std::optional<pid_t> read_pid(int fd) {
    char buf[32] = {};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return std::nullopt;
    char* end = nullptr;
    long pid = std::strtol(buf, &end, 10);
    if (end == buf || pid <= 0) return std::nullopt;
    return static_cast<pid_t>(pid);
}

std::string process_name(pid_t pid) {
    std::ifstream comm(fmt::format("/proc/{}/comm", pid));
    std::string name;
    std::getline(comm, name);
    return name;
}

}  // namespace

std::string DeviceLock::directory() {
    if (const char* dir = std::getenv("BAREGPU_LOCK_DIR"); dir != nullptr && *dir != '\0') {
        if (!usable_directory(dir)) {
            throw SystemError("", fmt::format("BAREGPU_LOCK_DIR={} is not a writable directory", dir), errno);
        }
        return dir;
    }
    if (usable_directory("/run/lock/baregpu")) return "/run/lock/baregpu";
    if (usable_directory("/tmp/baregpu-locks")) return "/tmp/baregpu-locks";
    throw SystemError("", "neither /run/lock/baregpu nor /tmp/baregpu-locks can hold device locks", errno);
}

DeviceLock DeviceLock::acquire(const std::string& key) {
    std::string path = lock_path(key);
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
    if (!fd) throw SystemError(key, fmt::format("cannot open lock file {}", path), errno);
    ::fchmod(fd.get(), 0666);  // another user in the baregpu group must be able to lock it later
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) throw SystemError(key, fmt::format("flock on {}", path), errno);
        std::optional<pid_t> owner = read_pid(fd.get());
        if (!owner) {
            throw BusyError(key, 0, fmt::format("in use by another process (lock {}; it has not written its pid yet)",
                                                path));
        }
        std::string name = process_name(*owner);
        throw BusyError(key, *owner,
                        fmt::format("in use by process {}{} (lock {}); stop it or wait for it to exit", *owner,
                                    name.empty() ? "" : " (" + name + ")", path));
    }
    std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd.get(), 0) != 0 || ::pwrite(fd.get(), pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
        throw SystemError(key, fmt::format("cannot write our pid into lock file {}", path), errno);
    }
    return DeviceLock(std::move(path), std::move(fd));
}

std::optional<pid_t> DeviceLock::owner_of(const std::string& key) {
    std::string path = lock_path(key);
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return std::nullopt;
    if (::flock(fd.get(), LOCK_SH | LOCK_NB) == 0) {
        ::flock(fd.get(), LOCK_UN);
        return std::nullopt;
    }
    return read_pid(fd.get()).value_or(0);
}

DeviceLock::~DeviceLock() {
    // Keep the file: unlinking it would race with a process that opened it and waits to lock.
    // Clearing the pid tells `owner_of` readers nothing stale.
    if (fd_) {
        if (::ftruncate(fd_.get(), 0) != 0) {
            // Nothing to do: the lock itself is released by close() below.
        }
    }
}

}  // namespace baregpu::pci
