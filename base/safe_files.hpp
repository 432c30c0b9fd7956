// Files the tools keep in directories other users can reach (/run/lock, /tmp, a directory named
// by an environment variable), opened so that nobody else's file is ever created, changed or
// deleted through them, and nothing but a bounded regular file is ever read:
//
// - A directory is used only when it is owned by the caller (or root) and no other user can
//   write it, the rule ssh applies to ~/.ssh under StrictModes (sshd_config(5)); a group may
//   write it only when it is the group the directory is meant for. Its last component may be a
//   symbolic link only when the link is the caller's or root's (as fs.protected_symlinks asks of
//   links in sticky directories, proc_sys_fs(5)). The directory is then held open, and every
//   file is reached relative to that descriptor (openat(2)), so a directory renamed or replaced
//   after the check changes nothing.
// - A file is opened with O_NOFOLLOW (a symbolic link fails with ELOOP, open(2)), O_NONBLOCK
//   (opening a FIFO does not wait for a writer) and O_NOCTTY, created only with O_EXCL, and an
//   existing one is used only when fstat(2) says it is a regular file with one link, owned by
//   the caller, root or the directory's group. Only a file this call created has its mode set.
//
// Header-only like the rest of base/: POSIX and the standard library, no other dependency.
#pragma once

#include "base/error.hpp"
#include "base/unique_fd.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <optional>
#include <span>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace baregpu::files {

inline constexpr gid_t kNoGroup = static_cast<gid_t>(-1);

inline std::string octal_mode(mode_t mode) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
    return buf;
}

// "a directory", "a FIFO", ... for a message.
inline const char* kind_of(mode_t mode) {
    return S_ISREG(mode)    ? "a regular file"
           : S_ISDIR(mode)  ? "a directory"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
           : S_ISLNK(mode)  ? "a symbolic link"
                            : "not a regular file";
}

// What a directory must be, and what to tell the user when it is not.
struct DirectoryPolicy {
    // Mode of a directory this call creates (the umask does not narrow it), and what a directory
    // of the caller's with a looser mode is set to when `repair` is set.
    mode_t mode = 0700;
    // The group that may write the directory (its group-write bit), kNoGroup when none may.
    gid_t group = kNoGroup;
    // Whether a directory of root's is accepted from another user (/run/lock/baregpu is root's).
    bool root_may_own = true;
    // Whether a directory whose group is `group` and that has the sticky bit may be any user's
    // (the first member of the group to need it made it; members are trusted with each other's
    // devices, and the sticky bit keeps their files apart).
    bool group_member_may_own = false;
    // Whether this call may create the directory when it is missing.
    bool create = true;
    // A directory of the caller's whose mode or group differ from the above is set to them
    // (a default directory an earlier version created more open); otherwise it is refused.
    bool repair = false;
    // What the user can do instead, for the message: "set BAREGPU_CACHE_DIR to a directory of your own".
    std::string remedy;
};

// Why `st` (a directory at `path`) is not to be trusted under `policy`; empty when it is.
inline std::string directory_refusal(const std::string& path, const struct stat& st, const DirectoryPolicy& policy) {
    const uid_t me = ::geteuid();
    const std::string remedy = policy.remedy.empty() ? "" : "; remove it or " + policy.remedy;
    if (!S_ISDIR(st.st_mode)) return "refusing " + path + ": not a directory" + remedy;
    const bool group_dir = policy.group_member_may_own && policy.group != kNoGroup && st.st_gid == policy.group &&
                           (st.st_mode & S_ISVTX) != 0;
    if (st.st_uid != me && !(policy.root_may_own && st.st_uid == 0) && !group_dir) {
        return "refusing " + path + ": owned by uid " + std::to_string(st.st_uid) + ", not you (uid " + std::to_string(me) + ")" +
               (policy.root_may_own ? " or root" : "") + remedy;
    }
    if (st.st_mode & S_IWOTH) {
        return "refusing " + path + ": every user can write it (mode " + octal_mode(st.st_mode) + ")" + remedy;
    }
    if ((st.st_mode & S_IWGRP) && (policy.group == kNoGroup || st.st_gid != policy.group)) {
        return "refusing " + path + ": group " + std::to_string(st.st_gid) + " can write it (mode " + octal_mode(st.st_mode) + ")" +
               remedy;
    }
    return {};
}

// A directory checked as above and held open.
class Directory {
public:
    // Opens `path`, creating it (and missing parents, with policy.mode) when it does not exist.
    // Throws baregpu::Error naming the directory, what is wrong and what to do.
    static Directory open(const std::string& path, const DirectoryPolicy& policy) {
        if (path.empty()) throw Error("", "an empty directory name");
        bool created = policy.create && make_directories(path, policy.mode);
        struct stat link {};
        if (::lstat(path.c_str(), &link) != 0) throw SystemError("", "cannot use the directory " + path, errno);
        if (S_ISLNK(link.st_mode) && link.st_uid != ::geteuid() && link.st_uid != 0) {
            throw Error("", "refusing " + path + ": a symbolic link owned by uid " + std::to_string(link.st_uid) +
                                ", not you or root" + (policy.remedy.empty() ? "" : "; remove it or " + policy.remedy));
        }
        UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!fd) throw SystemError("", "cannot open the directory " + path, errno);
        struct stat st {};
        if (::fstat(fd.get(), &st) != 0) throw SystemError("", "fstat " + path, errno);
        if (created || policy.repair) {
            // Ours: give it the mode and group it is meant to have (mkdir's mode went through the umask).
            if (st.st_uid == ::geteuid() && S_ISDIR(st.st_mode)) {
                if (policy.group != kNoGroup && st.st_gid != policy.group && ::fchown(fd.get(), static_cast<uid_t>(-1), policy.group) == 0) {
                    st.st_gid = policy.group;
                }
                const bool group_ok = policy.group == kNoGroup || st.st_gid == policy.group;
                const mode_t want = group_ok ? policy.mode : (policy.mode & ~mode_t{S_ISGID | S_IRWXG});
                if ((st.st_mode & 07777) != want && ::fchmod(fd.get(), want) == 0) st.st_mode = (st.st_mode & ~mode_t{07777}) | want;
            }
        }
        if (std::string why = directory_refusal(path, st, policy); !why.empty()) throw Error("", why);
        return Directory(path, std::move(fd), policy.group);
    }

    int fd() const { return fd_.get(); }
    const std::string& path() const { return path_; }
    std::string path_of(const std::string& name) const { return path_ + "/" + name; }

    // The result of open_file: the descriptor, and whether this call created the file.
    struct File {
        UniqueFd fd;
        bool created = false;
    };

    // Opens `name` (one component) with `access` (O_RDONLY, O_RDWR, O_WRONLY), creating it with
    // O_EXCL and `mode` when it is missing and `create` is set. An existing file must be a
    // regular file with one link, owned by the caller, root or the directory's group, and no
    // other user may write it; a file of the caller's with a looser mode gets `mode`. Throws
    // baregpu::Error naming the file; SystemError with ENOENT when it is missing and `create` is not set.
    File open_file(const std::string& name, int access, bool create, mode_t mode = 0600) const {
        const int flags = access | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
        for (int attempt = 0; attempt < 8; ++attempt) {
            if (create) {
                UniqueFd fd(::openat(fd_.get(), name.c_str(), flags | O_CREAT | O_EXCL, mode));
                if (fd) {
                    ::fchmod(fd.get(), mode);  // the umask must not narrow it; this file is ours
                    clear_nonblock(fd.get());
                    return {std::move(fd), true};
                }
                if (errno != EEXIST) throw SystemError("", "cannot create " + path_of(name), errno);
            }
            UniqueFd fd(::openat(fd_.get(), name.c_str(), flags));
            if (!fd) {
                if (errno == ENOENT && create) continue;  // removed between the two opens
                if (errno == ELOOP) throw Error("", "refusing " + path_of(name) + ": a symbolic link; remove it");
                throw SystemError("", "cannot open " + path_of(name), errno);
            }
            struct stat st {};
            if (::fstat(fd.get(), &st) != 0) throw SystemError("", "fstat " + path_of(name), errno);
            if (std::string why = file_refusal(st); !why.empty()) throw Error("", "refusing " + path_of(name) + ": " + why + "; remove it");
            if (st.st_uid == ::geteuid() && (st.st_mode & ~mode & (S_IWGRP | S_IWOTH)) != 0) {
                ::fchmod(fd.get(), mode);  // ours, from a version that made it writable by more users
            }
            clear_nonblock(fd.get());
            return {std::move(fd), false};
        }
        throw Error("", "cannot create " + path_of(name) + ": it keeps appearing and disappearing");
    }

    // Writes `bytes` to a new file under a temporary name (O_EXCL, `mode`), then renames it to
    // `name`, so that readers see the old file or the whole new one (rename(2)), and a link
    // planted at `name` is replaced, not followed. Throws baregpu::Error / SystemError.
    void replace_file(const std::string& name, std::span<const std::byte> bytes, mode_t mode = 0600) const {
        static std::atomic<unsigned> counter{0};
        std::string tmp;
        UniqueFd fd;
        for (int attempt = 0; attempt < 16 && !fd; ++attempt) {
            tmp = name + ".tmp" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
            fd.reset(::openat(fd_.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, mode));
            if (!fd && errno != EEXIST) throw SystemError("", "cannot create " + path_of(tmp), errno);
        }
        if (!fd) throw Error("", "cannot create a temporary file for " + path_of(name));
        size_t done = 0;
        while (done < bytes.size()) {
            ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                int e = n < 0 ? errno : EIO;
                ::unlinkat(fd_.get(), tmp.c_str(), 0);
                throw SystemError("", "cannot write " + path_of(tmp), e);
            }
            done += static_cast<size_t>(n);
        }
        if (::renameat(fd_.get(), tmp.c_str(), fd_.get(), name.c_str()) != 0) {
            int e = errno;
            ::unlinkat(fd_.get(), tmp.c_str(), 0);
            throw SystemError("", "cannot rename " + path_of(tmp) + " to " + name, e);
        }
    }

    // fstatat without following a link; nullopt when `name` does not exist.
    std::optional<struct stat> stat_of(const std::string& name) const {
        struct stat st {};
        if (::fstatat(fd_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
        return st;
    }

    // Removes `name` when it is a regular file of the caller's; false otherwise.
    bool remove_own_file(const std::string& name) const {
        std::optional<struct stat> st = stat_of(name);
        if (!st || !S_ISREG(st->st_mode) || st->st_uid != ::geteuid()) return false;
        return ::unlinkat(fd_.get(), name.c_str(), 0) == 0;
    }

private:
    Directory(std::string path, UniqueFd fd, gid_t group) : path_(std::move(path)), fd_(std::move(fd)), group_(group) {}

    // mkdir -p with `mode` for what it creates; true when it created the last component.
    static bool make_directories(const std::string& path, mode_t mode) {
        if (::mkdir(path.c_str(), mode) == 0) return true;
        if (errno != ENOENT) return false;  // exists (checked by the caller) or cannot be made (the open says why)
        const size_t slash = path.find_last_of('/');
        if (slash == std::string::npos || slash == 0) return false;
        make_directories(path.substr(0, slash), mode);
        return ::mkdir(path.c_str(), mode) == 0;
    }

    static void clear_nonblock(int fd) {
        int fl = ::fcntl(fd, F_GETFL);
        if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    }

    std::string file_refusal(const struct stat& st) const {
        if (!S_ISREG(st.st_mode)) return std::string(kind_of(st.st_mode)) + ", not a regular file";
        if (st.st_nlink != 1) return std::to_string(st.st_nlink) + " hard links to it, expected 1";
        const uid_t me = ::geteuid();
        const bool group_file = group_ != kNoGroup && st.st_gid == group_;
        if (st.st_uid != me && st.st_uid != 0 && !group_file) {
            return "owned by uid " + std::to_string(st.st_uid) + ", not you (uid " + std::to_string(me) + ") or root";
        }
        if ((st.st_mode & S_IWOTH) && st.st_uid != me) return "every user can write it (mode " + octal_mode(st.st_mode) + ")";
        return {};
    }

    std::string path_;
    UniqueFd fd_;
    gid_t group_;
};

// Opens `path` for reading only when it is a regular file: O_NONBLOCK so that opening a FIFO
// does not wait for a writer, then fstat(2) into `st`. Follows symbolic links (firmware
// directories are full of them). Throws baregpu::Error naming the file and what it is instead
// (`st` then says what it is).
inline UniqueFd open_regular_file(const std::string& path, struct stat& st) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!fd) throw SystemError("", "cannot open " + path, errno);
    if (::fstat(fd.get(), &st) != 0) throw SystemError("", "fstat " + path, errno);
    if (!S_ISREG(st.st_mode)) throw Error("", path + " is " + kind_of(st.st_mode) + ", not a regular file");
    int fl = ::fcntl(fd.get(), F_GETFL);
    if (fl >= 0) ::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

// Reads an open regular file whole. Throws baregpu::Error when it holds more than max_bytes
// (or grows past it while read), SystemError when a read fails.
inline std::vector<std::byte> read_whole_file(int fd, const std::string& path, uint64_t max_bytes) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw SystemError("", "fstat " + path, errno);
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
        throw Error("", path + " is " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(max_bytes) +
                            " expected at most");
    }
    std::vector<std::byte> out(static_cast<size_t>(st.st_size));
    size_t done = 0;
    for (;;) {
        if (done == out.size()) {
            // The file may have grown since fstat: read on, within the bound.
            if (out.size() >= max_bytes) {
                std::byte probe;
                ssize_t n = ::read(fd, &probe, 1);
                if (n == 0) break;
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) throw SystemError("", "read " + path, errno);
                throw Error("", path + " grew past the " + std::to_string(max_bytes) + " bytes expected at most while it was read");
            }
            out.resize(std::min<uint64_t>(max_bytes, out.size() + 65536));
        }
        ssize_t n = ::read(fd, out.data() + done, out.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw SystemError("", "read " + path, errno);
        if (n == 0) break;
        done += static_cast<size_t>(n);
    }
    out.resize(done);
    return out;
}

}  // namespace baregpu::files
