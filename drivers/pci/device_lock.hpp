// One process owns a device. The lock is an flock() on a file named after the device, so it
// is released by the kernel when the owner exits or crashes; the owner's pid is written into
// the file so a second opener can say who holds it.
#pragma once

#include "base/unique_fd.hpp"

#include <optional>
#include <string>
#include <sys/types.h>

namespace baregpu::pci {

class DeviceLock {
public:
    // Takes the lock for `key` (a PCI address "0000:03:00.0", "usb-3-2"), without waiting.
    // Throws BusyError with the owner's pid when another process holds it, SystemError when
    // the lock directory cannot be used.
    static DeviceLock acquire(const std::string& key);

    // The pid holding `key`'s lock, nullopt when nobody does. 0 when held by a process that
    // has not written its pid yet.
    static std::optional<pid_t> owner_of(const std::string& key);

    // $BAREGPU_LOCK_DIR, else /run/lock/baregpu, else /tmp/baregpu-locks (created 1777 like
    // /tmp so that every user of the `baregpu` group can lock).
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
