#include "fake_kernel.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace baregpu::pci::testing {

FakeKernel::FakeKernel() {
    char tmpl[] = "/tmp/baregpu-fake-kernel-XXXXXX";
    char* dir = ::mkdtemp(tmpl);
    REQUIRE(dir != nullptr);
    root_ = dir;
    ::chmod(root_.c_str(), 0755);  // a child that dropped root must still see the tree
    fs::create_directories(sysfs() + "/bus/pci/devices");
    fs::create_directories(sysfs() + "/bus/pci/drivers");
    fs::create_directories(sysfs() + "/kernel/iommu_groups");
    fs::create_directories(dev() + "/vfio");
    write_file(sysfs() + "/bus/pci/drivers_probe", "");
    fs::create_directories(root_ + "/locks");  // ours alone: a child that drops root locks in its own (run_as_nobody)
    ::setenv("BAREGPU_LOCK_DIR", (root_ + "/locks").c_str(), 1);
}

FakeKernel::~FakeKernel() {
    ::unsetenv("BAREGPU_LOCK_DIR");
    std::error_code ec;
    fs::remove_all(root_, ec);
}

std::string FakeKernel::device_dir(PciAddress a) const { return sysfs() + "/bus/pci/devices/" + a.to_string(); }

OpenOptions FakeKernel::options(Backend backend) const {
    OpenOptions o;
    o.backend = backend;
    o.sysfs_root = sysfs();
    o.dev_root = dev();
    return o;
}

void FakeKernel::write_file(const std::string& path, const std::string& text) const {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    REQUIRE(out.good());
    out << text;
}

std::string FakeKernel::read_file(const std::string& path) const {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<uint8_t> FakeKernel::read_bytes(const std::string& path, uint64_t offset, size_t n) const {
    std::vector<uint8_t> out(n);
    int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    REQUIRE(::pread(fd, out.data(), n, static_cast<off_t>(offset)) == static_cast<ssize_t>(n));
    ::close(fd);
    return out;
}

void FakeKernel::add_function(PciAddress a, const FakeFunction& f) {
    std::string dir = device_dir(a);
    fs::create_directories(dir);
    write_file(dir + "/config", std::string(f.config.begin(), f.config.end()));
    if (!f.resource.empty()) write_file(dir + "/resource", f.resource);
    for (auto [index, size] : f.resource_files) {
        std::string path = fmt::format("{}/resource{}", dir, index);
        int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
        REQUIRE(fd >= 0);
        REQUIRE(::ftruncate(fd, static_cast<off_t>(size)) == 0);  // sparse: costs no disk
        ::close(fd);
    }
    write_file(dir + "/enable", "0\n");
    write_file(dir + "/class", fmt::format("0x{:06x}\n", f.class_code));
    write_file(dir + "/driver_override", "(null)\n");
    if (f.reset_file) write_file(dir + "/reset", "");
}

void FakeKernel::add_driver(const std::string& driver) {
    std::string dir = sysfs() + "/bus/pci/drivers/" + driver;
    if (fs::exists(dir)) return;
    fs::create_directories(dir);
    write_file(dir + "/bind", "");
    write_file(dir + "/unbind", "");
}

void FakeKernel::bind(PciAddress a, const std::string& driver) {
    add_driver(driver);
    unbind(a);
    fs::create_directory_symlink(sysfs() + "/bus/pci/drivers/" + driver, device_dir(a) + "/driver");
}

void FakeKernel::unbind(PciAddress a) {
    std::error_code ec;
    fs::remove(device_dir(a) + "/driver", ec);
}

void FakeKernel::add_to_group(PciAddress a, unsigned group, const std::string& name) {
    std::string gdir = fmt::format("{}/kernel/iommu_groups/{}", sysfs(), group);
    fs::create_directories(gdir + "/devices");
    if (!name.empty()) write_file(gdir + "/name", name + "\n");
    std::error_code ec;
    fs::remove(gdir + "/devices/" + a.to_string(), ec);
    fs::create_directory_symlink(device_dir(a), gdir + "/devices/" + a.to_string());
    fs::remove(device_dir(a) + "/iommu_group", ec);
    fs::create_directory_symlink(gdir, device_dir(a) + "/iommu_group");
}

void FakeKernel::add_dev_file(const std::string& relative) {
    std::string path = dev() + "/" + relative;
    fs::create_directories(fs::path(path).parent_path());
    write_file(path, "");
}

FakePciCore::FakePciCore(FakeKernel& kernel) : kernel_(kernel) {
    thread_ = std::thread([this] {
        std::string probe_path = kernel_.sysfs() + "/bus/pci/drivers_probe";
        while (!stop_) {
            std::string probed = kernel_.read_file(probe_path);
            if (auto a = PciAddress::parse(probed)) {
                // Cleared before binding: the next probe can only be written after this bind shows.
                kernel_.write_file(probe_path, "");
                if (kernel_.read_file(kernel_.device_dir(*a) + "/driver_override") == "vfio-pci") {
                    kernel_.bind(*a, "vfio-pci");
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    });
}

FakePciCore::~FakePciCore() {
    stop_ = true;
    thread_.join();
}

namespace {

void put16(std::vector<uint8_t>& c, size_t at, uint16_t v) {
    c[at] = static_cast<uint8_t>(v);
    c[at + 1] = static_cast<uint8_t>(v >> 8);
}

void put32(std::vector<uint8_t>& c, size_t at, uint32_t v) {
    put16(c, at, static_cast<uint16_t>(v));
    put16(c, at + 2, static_cast<uint16_t>(v >> 16));
}

}  // namespace

FakeFunction navi31_like() {
    FakeFunction f;
    std::vector<uint8_t>& c = f.config;
    c.assign(4096, 0);
    put16(c, 0x00, 0x1002);  // AMD
    put16(c, 0x02, 0x744c);  // Navi 31
    put16(c, 0x04, 0x0000);  // command: decode off until enabled
    put16(c, 0x06, 0x0010);  // status: capability list
    put32(c, 0x08, 0x030000c8);  // class 03/00/00, revision c8
    c[0x0e] = 0x80;  // multi-function type-0 header (the HDMI audio is function 1)
    put32(c, 0x10, 0x0000000c);  // BAR0: 64-bit prefetchable
    put32(c, 0x14, 0x0000007c);
    put32(c, 0x18, 0x1000000c);  // BAR2: 64-bit prefetchable
    put32(c, 0x1c, 0x0000007c);
    put32(c, 0x20, 0x0000e001);  // BAR4: I/O
    put32(c, 0x24, 0xfcc00000);  // BAR5: 32-bit memory (registers)
    put16(c, 0x2c, 0x1002);
    put16(c, 0x2e, 0x0e3b);
    c[0x34] = 0x48;
    c[0x3d] = 0x01;  // INTA
    // Capabilities, in the order an RDNA3 part lists them.
    put16(c, 0x48, 0x5009);  // vendor -> 0x50
    c[0x4a] = 0x08;
    put16(c, 0x50, 0x6401);  // power management -> 0x64
    put16(c, 0x52, 0x0003);
    put16(c, 0x64, 0xa010);  // PCI Express -> 0xa0
    put16(c, 0x66, 0x0002);  // v2 endpoint
    put32(c, 0x68, 0x10008fe1);  // DevCap with FLR
    put16(c, 0xa0, 0xc005);  // MSI -> 0xc0
    put16(c, 0xa2, 0x0080);  // 64-bit address, 1 vector
    put16(c, 0xc0, 0x0011);  // MSI-X, end
    put16(c, 0xc2, 0x0002);  // 3 entries
    put32(c, 0xc4, 0x00000005);  // table in BAR5 at 0
    put32(c, 0xc8, 0x00001005);  // PBA in BAR5 at 0x1000
    put32(c, 0x100, 0x15020001);  // AER v2 -> 0x150
    put32(c, 0x150, 0x00010015);  // Resizable BAR v1, end

    f.resource =
        "0x0000007c00000000 0x0000007c0fffffff 0x000000000014220c\n"
        "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
        "0x0000007c10000000 0x0000007c101fffff 0x000000000014220c\n"
        "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
        "0x000000000000e000 0x000000000000e0ff 0x0000000000040101\n"
        "0x00000000fcc00000 0x00000000fccfffff 0x0000000000040200\n"
        "0x00000000fcd00000 0x00000000fcd1ffff 0x0000000000046200\n"
        "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
        "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
        "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
        "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
        "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
        "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
    f.resource_files = {{0, 256u << 20}, {2, 2u << 20}, {4, 256}, {5, 1u << 20}};
    return f;
}

std::string run_as_nobody(const std::function<std::string()>& body) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(fds[0]);
        std::string out;
        if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) {
            out = "cannot drop root";
        } else {
            // Changing credentials made us non-dumpable, which hides /proc/self from ourselves.
            ::prctl(PR_SET_DUMPABLE, 1);
            // Device locks are refused in a directory another user owns: nobody gets one of its own.
            char locks[] = "/tmp/baregpu-nobody-locks-XXXXXX";
            if (::mkdtemp(locks) != nullptr) ::setenv("BAREGPU_LOCK_DIR", locks, 1);
            try {
                out = body();
            } catch (const std::exception& e) {
                out = std::string("exception: ") + e.what();
            }
            std::error_code ec;
            fs::remove_all(locks, ec);
        }
        (void)!::write(fds[1], out.data(), out.size());
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string out;
    char buf[1024];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return out;
}

}  // namespace baregpu::pci::testing
