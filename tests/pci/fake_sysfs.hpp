// A fake sysfs tree in a temp directory, shaped like Linux's: bus/pci/devices/<address>/ with the
// attribute files libpci reads (vendor, device, class, revision, subsystem_*, config), `driver`
// and `iommu_group` symlinks, kernel/iommu_groups/<n>/devices/, and drm/renderD* entries.
// Removed again when the object goes away.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <stdexcept>
#include <string>
#include <unistd.h>

namespace baregpu::test {

class TempDir {
public:
    TempDir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "baregpu-test-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

struct FakeFunction {
    FakeFunction(std::string addr, uint16_t vendor_id, uint16_t device_id, uint32_t class_24)
        : address(std::move(addr)), vendor(vendor_id), device(device_id), class_code(class_24) {}
    FakeFunction& rev(uint8_t r) { revision = r; return *this; }
    FakeFunction& subsystem(uint16_t v, uint16_t d) { subsystem_vendor = v; subsystem_device = d; return *this; }
    FakeFunction& bound_to(std::string d) { driver = std::move(d); return *this; }
    FakeFunction& group(unsigned g) { iommu_group = g; return *this; }
    FakeFunction& render(std::string node) { render_node = std::move(node); return *this; }

    std::string address;  // "0000:03:00.0"
    uint16_t vendor = 0;
    uint16_t device = 0;
    uint32_t class_code = 0;  // 24 bits
    uint8_t revision = 0;
    uint16_t subsystem_vendor = 0;
    uint16_t subsystem_device = 0;
    std::string driver;  // "" for none
    std::optional<unsigned> iommu_group;
    std::string render_node;  // "renderD128" or ""
};

class FakeSysfs {
public:
    const std::filesystem::path& root() const { return dir_.path(); }

    void add(const FakeFunction& f) {
        namespace fs = std::filesystem;
        fs::path dir = root() / "bus" / "pci" / "devices" / f.address;
        fs::create_directories(dir);
        write(dir / "vendor", hex(f.vendor, 4));
        write(dir / "device", hex(f.device, 4));
        write(dir / "class", hex(f.class_code, 6));
        write(dir / "revision", hex(f.revision, 2));
        write(dir / "subsystem_vendor", hex(f.subsystem_vendor, 4));
        write(dir / "subsystem_device", hex(f.subsystem_device, 4));
        write(dir / "irq", "0");
        // 64 bytes of config header, little-endian, as the sysfs "config" file holds it.
        std::string config(64, '\0');
        auto put16 = [&](size_t at, uint16_t v) {
            config[at] = static_cast<char>(v & 0xff);
            config[at + 1] = static_cast<char>(v >> 8);
        };
        put16(0x00, f.vendor);
        put16(0x02, f.device);
        config[0x08] = static_cast<char>(f.revision);
        config[0x09] = static_cast<char>(f.class_code & 0xff);
        put16(0x0a, static_cast<uint16_t>(f.class_code >> 8));
        put16(0x2c, f.subsystem_vendor);
        put16(0x2e, f.subsystem_device);
        write(dir / "config", config);
        if (!f.driver.empty()) {
            fs::create_directories(root() / "bus" / "pci" / "drivers" / f.driver);
            fs::create_directory_symlink("../../../../bus/pci/drivers/" + f.driver, dir / "driver");
        }
        if (f.iommu_group) {
            fs::path group = root() / "kernel" / "iommu_groups" / std::to_string(*f.iommu_group);
            fs::create_directories(group / "devices");
            fs::create_directory_symlink("../../../../kernel/iommu_groups/" + std::to_string(*f.iommu_group),
                                         dir / "iommu_group");
            fs::create_directory_symlink("../../../../bus/pci/devices/" + f.address, group / "devices" / f.address);
        }
        if (!f.render_node.empty()) fs::create_directories(dir / "drm" / f.render_node);
    }

    // An empty PCI bus (the devices directory exists, nothing in it).
    void make_empty_bus() { std::filesystem::create_directories(root() / "bus" / "pci" / "devices"); }

    static void write(const std::filesystem::path& path, const std::string& text) {
        std::ofstream out(path, std::ios::binary);
        out << text;
        if (!out) throw std::runtime_error("cannot write " + path.string());
    }

private:
    static std::string hex(uint32_t v, int digits) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "0x%0*x\n", digits, v);
        return buf;
    }

    TempDir dir_;
};

}  // namespace baregpu::test
