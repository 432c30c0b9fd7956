// One process owns a device. The lock is an flock() on a file named after the device, so it
// is released by the kernel when the owner exits or crashes; the owner's pid is written into
// the file so a second opener can say who holds it.
//
// Where the files live (udev/README.md, "Device locks"): real devices lock in one directory
// every user of the device shares, /run/lock/baregpu, which belongs to root and the `baregpu`
// group (mode 3770, lock files 0660) when that group exists, else to root alone (0755, lock
// files 0644: only root can lock a real device). Nobody outside the group can create, hold or
// rewrite a lock. A simulated chip locks next to its state file, in a directory of the user's
// own. Files are opened with base/safe_files.hpp's rules: no symbolic link is followed and no
// file of another user's is touched.
#pragma once

#include "base/unique_fd.hpp"

#include <optional>
#include <string>
#include <sys/types.h>

namespace baregpu::pci {

class DeviceLock {
public:
    // Takes the lock for `key` without waiting. A key is a device name (a PCI address
    // "0000:03:00.0", "usb-3-2", "am-0000:03:00.0"), locked in directory(); or an absolute path,
    // which is the lock file itself, in a directory that must be the caller's own (a simulated
    // chip's "<state dir>/sim-am-navi31.lock"). Throws BusyError with the owner's pid when
    // another process holds it, baregpu::Error naming the file or directory when it cannot be
    // used safely (another user's, a symbolic link, not a regular file) and what to do.
    static DeviceLock acquire(const std::string& key);

    // The pid holding `key`'s lock, nullopt when nobody does (or the lock cannot be read). 0
    // when held by a process that has not written its pid yet.
    static std::optional<pid_t> owner_of(const std::string& key);

    // The shared lock directory: $BAREGPU_LOCK_DIR (which must be the caller's or root's and
    // writable by no other user outside the `baregpu` group), else /run/lock/baregpu, else
    // /tmp/baregpu-locks when /run/lock cannot hold it; created as described above.
    static std::string directory();

    DeviceLock(DeviceLock&&) = default;
    DeviceLock& operator=(DeviceLock&&) = default;
    ~DeviceLock();

    const std::string& path() const { return path_; }

private:
    DeviceLock(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
    std::string path_;
    UniqueFd fd_;
};

}  // namespace baregpu::pci
