#include "tests/qemu/usb_gadget.hpp"

#include "tests/qemu/guest_runner.hpp"

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <endian.h>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <linux/usb/ch9.h>
#include <linux/usb/functionfs.h>
#include <poll.h>
#include <string>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace baregpu::qemu {

namespace {

constexpr const char* kGadget = "/sys/kernel/config/usb_gadget/g1";
constexpr const char* kFfs = "/dev/ffs";
constexpr size_t kPacket = 512;  // high-speed bulk max packet

void write_file(const std::string& path, const std::string& text) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) throw TestFailure{fmt::format("open {}: {}", path, std::strerror(errno))};
    ssize_t n = ::write(fd, text.data(), text.size());
    int err = errno;
    ::close(fd);
    if (n != static_cast<ssize_t>(text.size())) {
        throw TestFailure{fmt::format("write '{}' to {}: {}", text, path, std::strerror(err))};
    }
}

void make_dir(const std::string& path) {
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
        throw TestFailure{fmt::format("mkdir {}: {}", path, std::strerror(errno))};
    }
}

// FunctionFS v2 descriptors (Documentation/usb/functionfs.rst): one vendor-class interface with
// bulk OUT then bulk IN, at full and high speed. Endpoint files ep1, ep2 follow this order.
struct __attribute__((packed)) Descriptors {
    usb_functionfs_descs_head_v2 header;
    __le32 fs_count;
    __le32 hs_count;
    struct __attribute__((packed)) Speed {
        usb_interface_descriptor interface;
        usb_endpoint_descriptor_no_audio out;
        usb_endpoint_descriptor_no_audio in;
    } fs, hs;
};

Descriptors::Speed speed_descriptors(uint16_t max_packet) {
    Descriptors::Speed s{};
    s.interface = {USB_DT_INTERFACE_SIZE, USB_DT_INTERFACE, 0, 0, 2, USB_CLASS_VENDOR_SPEC, 0, 0, 1};
    s.out = {USB_DT_ENDPOINT_SIZE, USB_DT_ENDPOINT, 2 | USB_DIR_OUT, USB_ENDPOINT_XFER_BULK, htole16(max_packet), 0};
    s.in = {USB_DT_ENDPOINT_SIZE, USB_DT_ENDPOINT, 1 | USB_DIR_IN, USB_ENDPOINT_XFER_BULK, htole16(max_packet), 0};
    return s;
}

// Strings: exactly one language with exactly one string; extra NULs would count as more strings
// and the kernel refuses the block (EINVAL).
struct __attribute__((packed)) Strings {
    usb_functionfs_strings_head header;
    __le16 language;
    char interface_name[8];  // "baregpu" + NUL
};

void write_descriptors(int ep0) {
    Descriptors d{};
    d.header.magic = htole32(FUNCTIONFS_DESCRIPTORS_MAGIC_V2);
    d.header.length = htole32(sizeof d);
    d.header.flags = htole32(FUNCTIONFS_HAS_FS_DESC | FUNCTIONFS_HAS_HS_DESC | FUNCTIONFS_ALL_CTRL_RECIP);
    d.fs_count = htole32(3);
    d.hs_count = htole32(3);
    d.fs = speed_descriptors(64);
    d.hs = speed_descriptors(kPacket);
    if (::write(ep0, &d, sizeof d) != static_cast<ssize_t>(sizeof d)) {
        throw TestFailure{fmt::format("write descriptors to {}/ep0: {}", kFfs, std::strerror(errno))};
    }
    Strings s{};
    s.header.magic = htole32(FUNCTIONFS_STRINGS_MAGIC);
    s.header.length = htole32(sizeof s);
    s.header.str_count = htole32(1);
    s.header.lang_count = htole32(1);
    s.language = htole16(0x0409);
    std::memcpy(s.interface_name, "baregpu", 8);
    if (::write(ep0, &s, sizeof s) != static_cast<ssize_t>(sizeof s)) {
        throw TestFailure{fmt::format("write strings to {}/ep0: {}", kFfs, std::strerror(errno))};
    }
}

// Bulk: read what the host sends, one packet at a time (a read longer than the host's transfer
// would wait for a short packet), and answer with the bytes inverted.
void bulk_echo_loop() {
    int out = ::open(fmt::format("{}/ep1", kFfs).c_str(), O_RDONLY | O_CLOEXEC);
    int in = ::open(fmt::format("{}/ep2", kFfs).c_str(), O_WRONLY | O_CLOEXEC);
    if (out < 0 || in < 0) {
        std::printf("gadget: open %s/ep1, ep2: %s\n", kFfs, std::strerror(errno));
        std::fflush(stdout);
        return;
    }
    std::array<uint8_t, kPacket> packet;
    for (;;) {
        ssize_t n = ::read(out, packet.data(), packet.size());
        if (n < 0) {
            // ESHUTDOWN: the host re-selected the configuration (libusb does while claiming) and
            // the endpoints were reset; they come back with the next ENABLE. The process ends
            // when the test kills it.
            if (errno == EINTR || errno == ESHUTDOWN) {
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
                continue;
            }
            std::printf("gadget: read %s/ep1: %s\n", kFfs, std::strerror(errno));
            std::fflush(stdout);
            return;
        }
        for (ssize_t i = 0; i < n; ++i) packet[static_cast<size_t>(i)] = static_cast<uint8_t>(~packet[static_cast<size_t>(i)]);
        while (::write(in, packet.data(), static_cast<size_t>(n)) != n) {
            if (errno != EINTR && errno != ESHUTDOWN) {
                std::printf("gadget: write %s/ep2: %s\n", kFfs, std::strerror(errno));
                std::fflush(stdout);
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
}

// ep0: the events FunctionFS delivers; SETUP carries the vendor control requests.
[[noreturn]] void serve(int ep0) {
    std::vector<uint8_t> stored;
    bool bulk_started = false;
    for (;;) {
        usb_functionfs_event event{};
        ssize_t n = ::read(ep0, &event, sizeof event);
        if (n < 0 && errno == EINTR) continue;
        if (n != static_cast<ssize_t>(sizeof event)) ::_exit(0);
        if (event.type == FUNCTIONFS_ENABLE && !bulk_started) {
            bulk_started = true;
            std::thread(bulk_echo_loop).detach();
        }
        if (event.type != FUNCTIONFS_SETUP) continue;
        const usb_ctrlrequest& setup = event.u.setup;
        uint16_t length = le16toh(setup.wLength);
        if ((setup.bRequestType & USB_TYPE_MASK) != USB_TYPE_VENDOR) {
            // Not ours: stall (a zero-length transfer in the wrong direction).
            if ((setup.bRequestType & USB_DIR_IN) != 0) {
                (void)!::read(ep0, nullptr, 0);
            } else {
                (void)!::write(ep0, nullptr, 0);
            }
            continue;
        }
        if ((setup.bRequestType & USB_DIR_IN) != 0) {
            std::vector<uint8_t> answer(length, 0);
            std::memcpy(answer.data(), stored.data(), std::min<size_t>(length, stored.size()));
            (void)!::write(ep0, answer.data(), answer.size());
        } else {
            stored.assign(length, 0);
            ssize_t got = ::read(ep0, stored.data(), stored.size());
            stored.resize(got > 0 ? static_cast<size_t>(got) : 0);
        }
    }
}

}  // namespace

void stop_gadget(pid_t pid) {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
    std::string g = kGadget;
    int fd = ::open((g + "/UDC").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)!::write(fd, "\n", 1);
        ::close(fd);
    }
    ::umount(kFfs);
    ::unlink((g + "/configs/c.1/ffs.usb0").c_str());
    for (const char* dir : {"/configs/c.1", "/functions/ffs.usb0", "/strings/0x409", ""}) ::rmdir((g + dir).c_str());
}

std::string gadget_bulk_out_path() { return fmt::format("{}/ep1", kFfs); }
std::string gadget_bulk_in_path() { return fmt::format("{}/ep2", kFfs); }

pid_t start_echo_gadget() {
    return start_gadget({0x174c, 0x2464, "ASM24xx echo gadget"}, [](int ep0) { serve(ep0); });
}

pid_t start_gadget(const GadgetSpec& spec, const std::function<void(int ep0)>& serve_ep0) {
    if (!std::filesystem::exists("/sys/class/udc/dummy_udc.0")) {
        throw SkipTest{"no /sys/class/udc/dummy_udc.0: dummy_hcd is not loaded (the harness loads it when the kernel "
                       "has it)"};
    }
    if (!std::filesystem::exists("/sys/kernel/config/usb_gadget")) {
        if (::mount("none", "/sys/kernel/config", "configfs", 0, nullptr) != 0 && errno != EBUSY) {
            throw TestFailure{fmt::format("mount configfs on /sys/kernel/config: {}", std::strerror(errno))};
        }
    }
    std::string g = kGadget;
    make_dir(g);
    write_file(g + "/idVendor", fmt::format("0x{:04x}", spec.vendor_id));
    write_file(g + "/idProduct", fmt::format("0x{:04x}", spec.product_id));
    make_dir(g + "/strings/0x409");
    write_file(g + "/strings/0x409/manufacturer", "baregpu tests/qemu");
    write_file(g + "/strings/0x409/product", spec.product);
    write_file(g + "/strings/0x409/serialnumber", "0001");
    make_dir(g + "/configs/c.1");
    make_dir(g + "/functions/ffs.usb0");
    std::string link = g + "/configs/c.1/ffs.usb0";
    if (::symlink((g + "/functions/ffs.usb0").c_str(), link.c_str()) != 0 && errno != EEXIST) {
        throw TestFailure{fmt::format("symlink {}: {}", link, std::strerror(errno))};
    }
    make_dir(kFfs);
    if (::mount("usb0", kFfs, "functionfs", 0, nullptr) != 0 && errno != EBUSY) {
        throw TestFailure{fmt::format("mount functionfs usb0 on {}: {}", kFfs, std::strerror(errno))};
    }
    int ep0 = ::open(fmt::format("{}/ep0", kFfs).c_str(), O_RDWR | O_CLOEXEC);
    if (ep0 < 0) throw TestFailure{fmt::format("open {}/ep0: {}", kFfs, std::strerror(errno))};
    write_descriptors(ep0);
    std::fflush(stdout);
    pid_t pid = ::fork();
    if (pid < 0) throw TestFailure{fmt::format("fork: {}", std::strerror(errno))};
    if (pid == 0) {
        serve_ep0(ep0);
        ::_exit(0);
    }
    ::close(ep0);
    // The function is ready (descriptors written): bind the gadget to the dummy controller.
    write_file(g + "/UDC", "dummy_udc.0");
    return pid;
}

}  // namespace baregpu::qemu
