// Reading and writing the kernel's attribute files (sysfs, procfs) and links. Every path is
// built by the caller from OpenOptions' roots, so tests can aim all of it at a fake tree.
#pragma once

#include "drivers/pci/pci_address.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::pci::kfile {

// <sysfs_root>/bus/pci/devices/<address>
std::string pci_device_dir(const std::string& sysfs_root, PciAddress address);

bool exists(const std::string& path);

// The whole (small) file with trailing newlines and spaces removed; nullopt when it does not exist.
// Throws SystemError naming `device` and the path on any other failure.
std::optional<std::string> read(const std::string& device, const std::string& path);

// Writes `value` to an attribute file that must exist (O_WRONLY|O_TRUNC, no O_CREAT: a missing
// attribute is an error, not a new file). Throws SystemError naming the path and the value.
void write(const std::string& device, const std::string& path, std::string_view value);

// The last component of a symlink's target ("amdgpu" for .../driver -> ../../bus/pci/drivers/amdgpu);
// nullopt when the link does not exist.
std::optional<std::string> link_name(const std::string& device, const std::string& path);

// Entry names in a directory, sorted, without "." and ".."; empty when it does not exist.
std::vector<std::string> list(const std::string& path);

// A hexadecimal attribute such as `class` ("0x030000"); nullopt when absent or not a number.
std::optional<uint64_t> read_hex(const std::string& device, const std::string& path);

}  // namespace baregpu::pci::kfile
