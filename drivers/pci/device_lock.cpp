#include "drivers/pci/device_lock.hpp"

#include "base/error.hpp"
#include "base/safe_files.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <grp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace baregpu::pci {

namespace {

constexpr const char* kSharedDir = "/run/lock/baregpu";
constexpr const char* kFallbackDir = "/tmp/baregpu-locks";
constexpr const char* kGroup = "baregpu";

// The `baregpu` group of udev/README.md, kNoGroup when this machine has none.
gid_t lock_group() {
    std::vector<char> buf(4096);
    group g{};
    group* found = nullptr;
    while (::getgrnam_r(kGroup, &g, buf.data(), buf.size(), &found) == ERANGE && buf.size() < (1u << 20)) buf.resize(buf.size() * 2);
    return found ? found->gr_gid : files::kNoGroup;
}

// Where a key's lock file is: its directory (held open) and its name in it.
struct LockPlace {
    files::Directory dir;
    std::string name;
    std::string device;  // what BusyError names
    mode_t file_mode;
};

bool in_group(gid_t group) {
    if (group == files::kNoGroup) return false;
    if (::getegid() == group) return true;
    std::vector<gid_t> groups(static_cast<size_t>(std::max(::getgroups(0, nullptr), 0)));
    int n = ::getgroups(static_cast<int>(groups.size()), groups.data());
    for (int i = 0; i < n; ++i) {
        if (groups[static_cast<size_t>(i)] == group) return true;
    }
    return false;
}

files::DirectoryPolicy shared_policy(bool named_by_user) {
    files::DirectoryPolicy p;
    p.group = lock_group();
    // With the group: members create and lock (setgid: files get the group; sticky: nobody
    // removes another's file). Without it: root's alone.
    p.mode = p.group == files::kNoGroup ? 0755 : (S_ISGID | S_ISVTX | 0770);
    p.group_member_may_own = true;
    p.repair = !named_by_user;
    if (named_by_user) {
        p.remedy = "set BAREGPU_LOCK_DIR to a directory of your own";
    } else {
        // Made by anyone else, it would lock root and the group out: only they make it.
        p.create = ::geteuid() == 0 || in_group(p.group);
        p.remedy = "set BAREGPU_LOCK_DIR to a directory of your own (udev/README.md, \"Device locks\")";
    }
    return p;
}

files::Directory shared_directory() {
    if (const char* dir = std::getenv("BAREGPU_LOCK_DIR"); dir != nullptr && *dir != '\0') {
        return files::Directory::open(dir, shared_policy(true));
    }
    // /tmp/baregpu-locks only where /run/lock cannot hold the directory (no /run/lock, or one
    // this user cannot write), and never once /run/lock/baregpu exists.
    struct stat st {};
    const char* dir = ::lstat(kSharedDir, &st) == 0 || ::access("/run/lock", W_OK | X_OK) == 0 ? kSharedDir : kFallbackDir;
    files::DirectoryPolicy policy = shared_policy(false);
    if (!policy.create && ::lstat(dir, &st) != 0) {
        throw Error("", fmt::format("{} does not exist, and only root or a member of the {} group may make it (udev/README.md, "
                                    "\"Device locks\"); or set BAREGPU_LOCK_DIR to a directory of your own",
                                    dir, kGroup));
    }
    return files::Directory::open(dir, policy);
}

LockPlace place_of(const std::string& key) {
    if (!key.empty() && key.front() == '/') {
        const size_t slash = key.find_last_of('/');
        files::DirectoryPolicy p;
        p.mode = 0700;
        p.remedy = "use a directory of your own";
        std::string name = key.substr(slash + 1);
        std::string device = name.ends_with(".lock") ? name.substr(0, name.size() - 5) : name;
        return {files::Directory::open(slash == 0 ? "/" : key.substr(0, slash), p), std::move(name), std::move(device), 0600};
    }
    std::string safe = key;
    for (char& c : safe) {
        if (c == '/') c = '_';
    }
    files::Directory dir = shared_directory();
    gid_t group = lock_group();
    return {std::move(dir), safe + ".lock", key, static_cast<mode_t>(group == files::kNoGroup ? 0644 : 0660)};
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

std::string DeviceLock::directory() { return shared_directory().path(); }

DeviceLock DeviceLock::acquire(const std::string& key) {
    LockPlace place = place_of(key);
    const std::string path = place.dir.path_of(place.name);
    files::Directory::File file;
    try {
        file = place.dir.open_file(place.name, O_RDWR, /*create=*/true, place.file_mode);
    } catch (const SystemError& e) {
        if (e.code() != EACCES) throw;
        struct stat st {};
        ::fstat(place.dir.fd(), &st);
        throw SystemError(key, fmt::format("cannot create or open the lock file {}: the directory is uid {}'s, group {}, mode {:04o}; "
                                           "join the group that may lock devices (udev/README.md, \"Device locks\") or set "
                                           "BAREGPU_LOCK_DIR to a directory of your own",
                                           path, st.st_uid, st.st_gid, st.st_mode & 07777),
                          EACCES);
    }
    if (::flock(file.fd.get(), LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) throw SystemError(key, fmt::format("flock on {}", path), errno);
        std::optional<pid_t> owner = read_pid(file.fd.get());
        if (!owner) {
            throw BusyError(place.device, 0,
                            fmt::format("in use by another process (lock {}; it has not written its pid yet)", path));
        }
        std::string name = process_name(*owner);
        throw BusyError(place.device, *owner,
                        fmt::format("in use by process {}{} (lock {}); stop it or wait for it to exit", *owner,
                                    name.empty() ? "" : " (" + name + ")", path));
    }
    std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(file.fd.get(), 0) != 0 ||
        ::pwrite(file.fd.get(), pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
        throw SystemError(key, fmt::format("cannot write our pid into lock file {}", path), errno);
    }
    return DeviceLock(path, std::move(file.fd));
}

std::optional<pid_t> DeviceLock::owner_of(const std::string& key) {
    try {
        LockPlace place = place_of(key);
        files::Directory::File file = place.dir.open_file(place.name, O_RDONLY, /*create=*/false);
        if (::flock(file.fd.get(), LOCK_SH | LOCK_NB) == 0) {
            ::flock(file.fd.get(), LOCK_UN);
            return std::nullopt;
        }
        return read_pid(file.fd.get()).value_or(0);
    } catch (const Error&) {
        return std::nullopt;  // no lock file, or one not to be trusted (acquire says why)
    }
}

DeviceLock::~DeviceLock() {
    // Keep the file: unlinking it would race with a process that opened it and waits to lock.
    // Clearing the pid tells `owner_of` readers nothing stale. The descriptor is the file
    // acquire() checked, whatever has been renamed or planted at its path since.
    if (fd_) {
        if (::ftruncate(fd_.get(), 0) != 0) {
            // Nothing to do: the lock itself is released by close() below.
        }
    }
}

}  // namespace baregpu::pci
