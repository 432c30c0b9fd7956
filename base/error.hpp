// The error hierarchy of baregpu. Every exception we throw derives from baregpu::Error
// and carries the name of the device it concerns (empty when none does), so a message
// read in a log always says which GPU, file or bridge it is about.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <utility>

namespace baregpu {

class Error : public std::runtime_error {
public:
    // device: "0000:03:00.0", "sim:0000:00:01.0", "cpu", or empty. message: what happened and,
    // where we know it, what to do about it.
    Error(std::string device, const std::string& message)
        : std::runtime_error(device.empty() ? message : device + ": " + message),
          device_(std::move(device)) {}

    const std::string& device() const noexcept { return device_; }

private:
    std::string device_;
};

// An operation did not complete in time. The message names what was awaited, the last value
// seen and, for queues, the read/write pointers.
class TimeoutError : public Error {
public:
    using Error::Error;
};

// The device is gone: config or MMIO reads return all-ones, the USB bridge disconnected, or
// the device was hot-removed. Nothing more can be done with it.
class DeviceLostError : public Error {
public:
    using Error::Error;
};

// The device (or its firmware) answered something the protocol does not allow.
class ProtocolError : public Error {
public:
    using Error::Error;
};

// The device is owned by another process.
class BusyError : public Error {
public:
    BusyError(std::string device, pid_t owner_pid, const std::string& message)
        : Error(std::move(device), message), owner_pid_(owner_pid) {}

    // 0 when the owner could not be determined.
    pid_t owner_pid() const noexcept { return owner_pid_; }

private:
    pid_t owner_pid_;
};

// The platform cannot do what was asked (no IOMMU, no huge pages, no permission, a backend that
// has no interrupts). The message says what is missing and how to get it.
class UnsupportedError : public Error {
public:
    using Error::Error;
};

// A firmware file is not what it claims to be. Names the file, the field, the byte offset of
// the field in the file, what was expected and what was found, so a bad or truncated blob is
// reported before any byte of it reaches a device.
class FirmwareError : public Error {
public:
    FirmwareError(std::string file, std::string field, uint64_t offset, std::string expected, std::string found)
        : Error("", file + ": " + field + " at offset " + std::to_string(offset) + ": expected " + expected +
                        ", found " + found),
          file_(std::move(file)), field_(std::move(field)), offset_(offset), expected_(std::move(expected)),
          found_(std::move(found)) {}

    const std::string& file() const noexcept { return file_; }
    const std::string& field() const noexcept { return field_; }
    uint64_t offset() const noexcept { return offset_; }
    const std::string& expected() const noexcept { return expected_; }
    const std::string& found() const noexcept { return found_; }

private:
    std::string file_;
    std::string field_;
    uint64_t offset_;
    std::string expected_;
    std::string found_;
};

// A system call failed. The message names the call, the object and errno's text.
class SystemError : public Error {
public:
    SystemError(std::string device, const std::string& what, int err)
        : Error(std::move(device), what + ": " + errno_text(err)), errno_(err) {}

    int code() const noexcept { return errno_; }

    static std::string errno_text(int err) {
        char buf[128];
        // GNU strerror_r may return a static string instead of filling buf.
        const char* text = strerror_r(err, buf, sizeof buf);
        return std::string(text) + " (errno " + std::to_string(err) + ")";
    }

private:
    int errno_;
};

}  // namespace baregpu
