#include "drivers/pci/sysfs_device.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"
#include "drivers/pci/kernel_files.hpp"
#include "drivers/pci/physical_dma.hpp"
#include "drivers/pci/sysfs_resource.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace baregpu::pci {

namespace {

std::string no_iommu_warning(const std::string& device) {
    return fmt::format("sysfs backend: there is no IOMMU protection. {} can DMA anywhere in RAM, and a wrong bus "
                       "address corrupts memory silently. Use the vfio backend unless this machine has no IOMMU.",
                       device);
}

class SysfsPciDevice final : public PciDevice {
public:
    SysfsPciDevice(PciAddress address, const OpenOptions& options, DeviceLock lock)
        : PciDevice(address.to_string(), address), lock_(std::move(lock)),
          dir_(kfile::pci_device_dir(options.sysfs_root, address)), proc_root_(options.proc_root), sysfs_root_(options.sysfs_root) {
        if (::geteuid() != 0) {
            throw UnsupportedError(name(), "the sysfs backend needs root: it maps BARs through resourceN, writes config "
                                           "space beyond 64 bytes and reads physical addresses from /proc/self/pagemap "
                                           "(CAP_SYS_ADMIN). Run as root, or use the vfio backend (see udev/README.md)");
        }
        if (!kfile::exists(dir_)) {
            throw Error(name(), fmt::format("there is no such PCI function ({} does not exist); `lspci -D` lists them",
                                            dir_));
        }
        if (auto driver = kfile::link_name(name(), dir_ + "/driver")) {
            throw Error(name(), fmt::format("bound to {}: the sysfs backend drives an unbound function, so that no "
                                            "kernel driver touches it at the same time. Unbind it: echo {} | sudo tee "
                                            "{}/driver/unbind",
                                            *driver, name(), dir_));
        }
        open_config();
        std::string resource_path = dir_ + "/resource";
        auto text = kfile::read(name(), resource_path);
        if (!text) {
            throw Error(name(), fmt::format("{} does not exist: without it the BARs' addresses and sizes are unknown "
                                            "(is {} a PCI function directory?)",
                                            resource_path, dir_));
        }
        set_bar_infos(bars_from_resources(name(), resource_path, parse_resource_file(name(), resource_path, *text)));
        check_alive();

        // `enable` counts enables (pci_enable_device: memory decode on). Enable it if nobody has
        // and give that back at close.
        std::string enable_path = dir_ + "/enable";
        auto enabled = kfile::read(name(), enable_path);
        if (!enabled) throw Error(name(), fmt::format("{} does not exist: cannot enable the function", enable_path));
        if (*enabled == "0") {
            kfile::write(name(), enable_path, "1");
            enabled_by_us_ = true;
        }

        set_warning(no_iommu_warning(name()));
        static std::atomic<bool> told{false};
        if (!told.exchange(true)) std::fprintf(stderr, "baregpu: WARNING: %s\n", warning().c_str());
    }

    ~SysfsPciDevice() override {
        for (std::span<std::byte> m : mappings_) ::munmap(m.data(), m.size());
        if (enabled_by_us_) {
            try {
                kfile::write(name(), dir_ + "/enable", "0");
            } catch (const Error& e) {
                std::fprintf(stderr, "baregpu: %s\n", e.what());
            }
        }
    }

    std::string_view backend() const override { return "sysfs"; }

    uint16_t config_size() const override { return config_size_; }

    uint32_t config_read(uint16_t offset, unsigned width) override {
        check_config_access(offset, width);
        uint32_t value = 0;
        ssize_t n;
        do {
            n = ::pread(config_.get(), &value, width, offset);
        } while (n < 0 && errno == EINTR);
        if (n != static_cast<ssize_t>(width)) {
            throw SystemError(name(), fmt::format("{}-byte read of config space at 0x{:03x} through {}/config", width,
                                                  offset, dir_),
                              n < 0 ? errno : EIO);
        }
        return value;  // little-endian host: the low `width` bytes are the register
    }

    void config_write(uint16_t offset, unsigned width, uint32_t value) override {
        check_config_access(offset, width);
        ssize_t n;
        do {
            n = ::pwrite(config_.get(), &value, width, offset);
        } while (n < 0 && errno == EINTR);
        if (n != static_cast<ssize_t>(width)) {
            throw SystemError(name(), fmt::format("{}-byte write of 0x{:x} to config space at 0x{:03x} through {}/config",
                                                  width, value, offset, dir_),
                              n < 0 ? errno : EIO);
        }
    }

    // Without an IOMMU a peer's BAR is reached at its bus address (the `resource` file's start).
    std::optional<std::string> peer_refusal(PciDevice& owner) override {
        if (auto why = PciDevice::peer_refusal(owner)) return why;
        return sysfs_peer_refusal(sysfs_root_, address(), owner.address());
    }

    std::unique_ptr<BusMapping> map_peer_bar_impl(PciDevice& owner, unsigned bar, uint64_t offset, uint64_t size) override {
        const uint64_t bus = owner.bar_info(bar).bus_base + offset;
        return std::make_unique<BusMapping>(BusAddress(bus), size,
                                            fmt::format("BAR{}+{:#x} of {} (bus address {:#x})", bar, offset, owner.name(), bus), nullptr);
    }

    std::unique_ptr<DmaBuffer> alloc_dma(uint64_t size, PageSize page_size) override {
        return alloc_physical_dma(name(), proc_root_, size, page_size, dma_address_limit());
    }

    void enable_interrupts(InterruptKind, unsigned) override {
        throw UnsupportedError(name(), "the sysfs backend has no interrupt path; drivers poll (the vfio backend "
                                       "delivers MSI/MSI-X to eventfds)");
    }

    void disable_interrupts() override {}  // nothing can have been enabled

    void reset_function() override {
        std::string path = dir_ + "/reset";
        if (!kfile::exists(path)) {
            throw UnsupportedError(name(), fmt::format("{} does not exist: the kernel knows no reset method for this "
                                                       "function",
                                                       path));
        }
        // The kernel's pci_reset_function(): saves config state, resets (FLR where DevCap says so),
        // waits for the function to come back, restores.
        kfile::write(name(), path, "1");
    }

protected:
    MmioRegion map_bar(unsigned index) override {
        const BarInfo& info = bar_info(index);
        std::string path = fmt::format("{}/resource{}", dir_, index);
        UniqueFd fd(::open(path.c_str(), O_RDWR | O_SYNC | O_CLOEXEC));
        if (!fd) throw SystemError(name(), fmt::format("cannot open {} to map {}", path, info.describe()), errno);
        struct stat st {};
        if (::fstat(fd.get(), &st) != 0) throw SystemError(name(), fmt::format("fstat {}", path), errno);
        if (static_cast<uint64_t>(st.st_size) < info.size) {
            throw ProtocolError(name(), fmt::format("{} is 0x{:x} bytes but `resource` says BAR{} is 0x{:x}: mapping "
                                                    "past its end would fault",
                                                    path, st.st_size, index, info.size));
        }
        void* p = ::mmap(nullptr, info.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
        if (p == MAP_FAILED) {
            throw SystemError(name(), fmt::format("mmap of {} ({})", path, info.describe()), errno);
        }
        auto* base = static_cast<std::byte*>(p);
        mappings_.emplace_back(base, info.size);
        return MmioRegion(fmt::format("{} BAR{}", name(), index), base, info.size);
    }

private:
    void open_config() {
        std::string path = dir_ + "/config";
        config_ = UniqueFd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
        if (!config_) throw SystemError(name(), fmt::format("cannot open {} for reading and writing", path), errno);
        struct stat st {};
        if (::fstat(config_.get(), &st) != 0) throw SystemError(name(), fmt::format("fstat {}", path), errno);
        if (st.st_size >= cfg::kConfigSizeExtended) {
            config_size_ = cfg::kConfigSizeExtended;
        } else if (st.st_size >= cfg::kConfigSizeLegacy) {
            config_size_ = cfg::kConfigSizeLegacy;
        } else {
            throw UnsupportedError(name(), fmt::format("{} is {} bytes, not 256 or 4096: only root sees config space "
                                                       "past 64 bytes. Run as root",
                                                       path, st.st_size));
        }
    }

    DeviceLock lock_;  // first member: released last
    std::string dir_;
    std::string proc_root_;
    std::string sysfs_root_;
    UniqueFd config_;
    uint16_t config_size_ = 0;
    bool enabled_by_us_ = false;
    std::vector<std::span<std::byte>> mappings_;
};

}  // namespace

std::unique_ptr<PciDevice> open_sysfs(PciAddress address, const OpenOptions& options, DeviceLock lock) {
    return std::make_unique<SysfsPciDevice>(address, options, std::move(lock));
}

}  // namespace baregpu::pci
