#include "drivers/pci/kernel_files.hpp"

#include "base/error.hpp"
#include "base/unique_fd.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

namespace baregpu::pci::kfile {

std::string pci_device_dir(const std::string& sysfs_root, PciAddress address) {
    return sysfs_root + "/bus/pci/devices/" + address.to_string();
}

bool exists(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
}

std::optional<std::string> read(const std::string& device, const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
        if (errno == ENOENT) return std::nullopt;
        throw SystemError(device, fmt::format("cannot open {}", path), errno);
    }
    std::string text;
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw SystemError(device, fmt::format("read of {}", path), errno);
        }
        if (n == 0) break;
        text.append(buf, static_cast<size_t>(n));
        if (text.size() > (1u << 20)) throw Error(device, fmt::format("{} is larger than 1 MiB: not an attribute", path));
    }
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0')) text.pop_back();
    return text;
}

void write(const std::string& device, const std::string& path, std::string_view value) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
    if (!fd) throw SystemError(device, fmt::format("cannot open {} to write \"{}\"", path, value), errno);
    ssize_t n;
    do {
        n = ::write(fd.get(), value.data(), value.size());
    } while (n < 0 && errno == EINTR);
    if (n < 0) throw SystemError(device, fmt::format("writing \"{}\" to {}", value, path), errno);
    if (static_cast<size_t>(n) != value.size()) {
        throw Error(device, fmt::format("short write of \"{}\" to {}: {} of {} bytes", value, path, n, value.size()));
    }
}

std::optional<std::string> link_name(const std::string& device, const std::string& path) {
    char buf[4096];
    ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
    if (n < 0) {
        if (errno == ENOENT) return std::nullopt;
        throw SystemError(device, fmt::format("readlink {}", path), errno);
    }
    std::string_view target(buf, static_cast<size_t>(n));
    while (!target.empty() && target.back() == '/') target.remove_suffix(1);
    auto slash = target.rfind('/');
    return std::string(slash == std::string_view::npos ? target : target.substr(slash + 1));
}

std::vector<std::string> list(const std::string& path) {
    std::vector<std::string> names;
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) return names;
    while (dirent* e = ::readdir(dir)) {
        std::string_view name = e->d_name;
        if (name != "." && name != "..") names.emplace_back(name);
    }
    ::closedir(dir);
    std::sort(names.begin(), names.end());
    return names;
}

std::optional<uint64_t> read_hex(const std::string& device, const std::string& path) {
    auto text = read(device, path);
    if (!text) return std::nullopt;
    std::string_view s = *text;
    if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2);
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, 16);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
    return value;
}

}  // namespace baregpu::pci::kfile
