// The PciDevice of the vfio backend, on an opened VfioHandle. What vfio-pci does for us (enable
// the device, program MSI/MSI-X, save and restore state around reset) the sim backend does by
// hand; here it is one ioctl each.
#include "drivers/pci/vfio_device.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"
#include "drivers/pci/host_memory.hpp"
#include "drivers/pci/iova_allocator.hpp"
#include "drivers/pci/kernel_files.hpp"
#include "drivers/pci/physical_dma.hpp"
#include "drivers/pci/sysfs_resource.hpp"
#include "drivers/pci/vfio_region.hpp"
#include "drivers/pci/vfio_uapi.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <mutex>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

namespace baregpu::pci {

namespace {

// The IOMMU context and the IOVA space, shared by the device and every DMA buffer (a buffer may
// outlive its device; the container or iommufd stays open until the last one goes).
struct VfioDmaState {
    explicit VfioDmaState(std::shared_ptr<VfioIommu> i)
        : iommu(std::move(i)), iova(usable_iova_ranges(iommu->valid_iova(), iommu->iova_page_size())) {}
    std::shared_ptr<VfioIommu> iommu;
    std::mutex mutex;
    IovaAllocator iova;
};

class VfioPciDevice final : public PciDevice {
public:
    VfioPciDevice(PciAddress address, VfioHandle handle, const OpenOptions& options, DeviceLock lock)
        : PciDevice(address.to_string(), address), lock_(std::move(lock)),
          dma_(std::make_shared<VfioDmaState>(std::move(handle.iommu))), device_(std::move(handle.device)),
          proc_root_(options.proc_root), sysfs_root_(options.sysfs_root) {
        vfio_device_info info{};
        info.argsz = sizeof info;
        if (vfio_ioctl(device_.get(), VFIO_DEVICE_GET_INFO, &info) != 0) {
            throw SystemError(name(), "VFIO_DEVICE_GET_INFO", errno);
        }
        if ((info.flags & VFIO_DEVICE_FLAGS_PCI) == 0) {
            throw ProtocolError(name(), fmt::format("VFIO_DEVICE_GET_INFO flags 0x{:x} lack VFIO_DEVICE_FLAGS_PCI: not "
                                                    "a vfio-pci device",
                                                    info.flags));
        }
        if (info.num_regions <= VFIO_PCI_CONFIG_REGION_INDEX) {
            throw ProtocolError(name(), fmt::format("VFIO_DEVICE_GET_INFO reports {} regions; a PCI device has at least "
                                                    "{} (BAR0-5, ROM, config)",
                                                    info.num_regions, VFIO_PCI_CONFIG_REGION_INDEX + 1));
        }
        device_flags_ = info.flags;
        num_irqs_ = info.num_irqs;

        VfioRegion config = query_vfio_region(name(), device_.get(), VFIO_PCI_CONFIG_REGION_INDEX);
        if (config.size < cfg::kConfigSizeLegacy || !config.readable() || !config.writable()) {
            throw ProtocolError(name(), fmt::format("the VFIO config region is 0x{:x} bytes with flags 0x{:x}; expected "
                                                    "a readable, writable region of at least 256 bytes",
                                                    config.size, config.flags));
        }
        config_offset_ = config.offset;
        config_size_ = config.size >= cfg::kConfigSizeExtended ? cfg::kConfigSizeExtended : cfg::kConfigSizeLegacy;
        check_alive();
        read_bars(kfile::pci_device_dir(options.sysfs_root, address) + "/resource");

        if (dma_->iommu->noiommu()) {
            set_warning(fmt::format("vfio no-IOMMU mode: there is no IOMMU protection. {} can DMA anywhere in RAM; "
                                    "DMA buffers use physical addresses. You asked for this with --allow-noiommu.",
                                    name()));
            std::fprintf(stderr, "baregpu: WARNING: %s\n", warning().c_str());
        }
    }

    ~VfioPciDevice() override {
        if (irq_index_) {
            try {
                disable_interrupts();
            } catch (const Error& e) {
                std::fprintf(stderr, "baregpu: %s\n", e.what());
            }
        }
        for (std::span<std::byte> m : mappings_) ::munmap(m.data(), m.size());
    }

    std::string_view backend() const override { return "vfio"; }

    uint16_t config_size() const override { return config_size_; }

    uint32_t config_read(uint16_t offset, unsigned width) override {
        check_config_access(offset, width);
        uint32_t value = 0;
        ssize_t n;
        do {
            n = ::pread(device_.get(), &value, width, static_cast<off_t>(config_offset_ + offset));
        } while (n < 0 && errno == EINTR);
        if (n != static_cast<ssize_t>(width)) {
            throw SystemError(name(), fmt::format("{}-byte config read at 0x{:03x} through the VFIO config region", width,
                                                  offset),
                              n < 0 ? errno : EIO);
        }
        return value;
    }

    void config_write(uint16_t offset, unsigned width, uint32_t value) override {
        check_config_access(offset, width);
        ssize_t n;
        do {
            n = ::pwrite(device_.get(), &value, width, static_cast<off_t>(config_offset_ + offset));
        } while (n < 0 && errno == EINTR);
        if (n != static_cast<ssize_t>(width)) {
            throw SystemError(name(), fmt::format("{}-byte config write of 0x{:x} at 0x{:03x} through the VFIO config "
                                                  "region",
                                                  width, value, offset),
                              n < 0 ? errno : EIO);
        }
    }

    std::unique_ptr<DmaBuffer> alloc_dma(uint64_t size, PageSize page_size) override {
        if (dma_->iommu->noiommu()) return alloc_physical_dma(name(), proc_root_, size, page_size, dma_address_limit());

        HostMemory memory = HostMemory::allocate(name(), size, page_size, /*lock=*/false);  // VFIO pins
        uint64_t bytes = memory.bytes().size();
        uint64_t alignment = std::max<uint64_t>(static_cast<uint64_t>(page_size), dma_->iommu->iova_page_size());
        std::shared_ptr<VfioDmaState> dma = dma_;
        uint64_t iova;
        {
            std::lock_guard guard(dma->mutex);
            auto got = dma->iova.allocate(bytes, alignment, dma_address_limit());
            if (!got) {
                throw Error(name(), fmt::format("no free IOVA range of {} below the device's {}-bit DMA limit (valid "
                                                "IOVA windows: {}; {} free in {} fragments)",
                                                format_size(bytes), dma_address_bits(),
                                                describe_iova_windows(dma->iommu->valid_iova()),
                                                format_size(dma->iova.bytes_free()), dma->iova.fragments()));
            }
            iova = *got;
        }
        try {
            dma->iommu->map_dma(memory.bytes(), iova);
        } catch (...) {
            std::lock_guard guard(dma->mutex);
            dma->iova.free(iova, bytes);
            throw;
        }
        std::span<std::byte> cpu = memory.release();
        return std::make_unique<DmaBuffer>(name(), cpu, page_size, std::vector<BusAddress>{BusAddress(iova)},
                                           [dma, iova, cpu] {
                                               // An IOVA whose unmap failed stays out of circulation.
                                               if (dma->iommu->unmap_dma(iova, cpu.size())) {
                                                   std::lock_guard guard(dma->mutex);
                                                   dma->iova.free(iova, cpu.size());
                                               }
                                               HostMemory::release_mapping(cpu);
                                           });
    }

    // Peer-to-peer through the IOMMU: VFIO_IOMMU_MAP_DMA (type1, include/uapi/linux/vfio.h) of the
    // peer's BAR mmap at an IOVA of ours. The type1 driver resolves a VM_PFNMAP vaddr to the BAR's
    // physical pages (vfio_iommu_type1.c, vaddr_get_pfns: follow_fault_pfn), which is how QEMU gives
    // one assigned device another's BAR. iommufd's IOMMU_IOAS_MAP wants struct pages and refuses a
    // BAR mmap on kernels without dma-buf import (EFAULT), and the error says so. tests/qemu runs it on
    // a real kernel (edu reading NVMe's BAR0); two GPUs behind VFIO are a check for the silicon kit
    // (docs/TESTING.md).
    std::optional<std::string> peer_refusal(PciDevice& owner) override {
        if (auto why = PciDevice::peer_refusal(owner)) return why;
        return sysfs_peer_refusal(sysfs_root_, address(), owner.address());
    }

    std::unique_ptr<BusMapping> map_peer_bar_impl(PciDevice& owner, unsigned bar, uint64_t offset, uint64_t size) override {
        const BarInfo& info = owner.bar_info(bar);
        const std::string what = fmt::format("BAR{}+{:#x} of {} (bus address {:#x})", bar, offset, owner.name(), info.bus_base + offset);
        if (dma_->iommu->noiommu()) {
            // Nothing translates: the device puts the BAR's bus address on the wire.
            return std::make_unique<BusMapping>(BusAddress(info.bus_base + offset), size, what, nullptr);
        }
        volatile std::byte* mapped = owner.bar(bar).direct();
        if (mapped == nullptr) {
            throw UnsupportedError(name(), fmt::format("cannot reach {}: the BAR cannot be mmapped (no VFIO_REGION_INFO_FLAG_MMAP), "
                                                       "so there is nothing to hand VFIO_IOMMU_MAP_DMA", what));
        }
        std::span<std::byte> memory(const_cast<std::byte*>(mapped) + offset, size);
        return map_into_iommu(memory, what);
    }

    std::unique_ptr<BusMapping> map_foreign_host(std::span<std::byte> memory) override {
        if (dma_->iommu->noiommu()) return PciDevice::map_foreign_host(memory);
        return map_into_iommu(memory, fmt::format("{} of host memory at {}", format_size(memory.size()), static_cast<void*>(memory.data())));
    }

    void enable_interrupts(InterruptKind kind, unsigned vectors) override {
        if (irq_index_) disable_interrupts();  // VFIO enables one index at a time
        if (vectors == 0) throw Error(name(), "asked to enable 0 interrupt vectors");
        uint32_t index = kind == InterruptKind::Msi ? VFIO_PCI_MSI_IRQ_INDEX : VFIO_PCI_MSIX_IRQ_INDEX;
        const char* kind_name = kind == InterruptKind::Msi ? "MSI" : "MSI-X";
        if (index >= num_irqs_) {
            throw UnsupportedError(name(), fmt::format("VFIO reports {} interrupt indexes; {} (index {}) is not among them",
                                                       num_irqs_, kind_name, index));
        }
        vfio_irq_info irq{};
        irq.argsz = sizeof irq;
        irq.index = index;
        if (vfio_ioctl(device_.get(), VFIO_DEVICE_GET_IRQ_INFO, &irq) != 0) {
            throw SystemError(name(), fmt::format("VFIO_DEVICE_GET_IRQ_INFO for {}", kind_name), errno);
        }
        if (irq.count == 0) {
            throw UnsupportedError(name(), fmt::format("the device has no {} capability (VFIO reports 0 vectors)",
                                                       kind_name));
        }
        if (vectors > irq.count) {
            throw UnsupportedError(name(), fmt::format("{} supports {} vector(s), {} asked for", kind_name, irq.count,
                                                       vectors));
        }
        if ((irq.flags & VFIO_IRQ_INFO_EVENTFD) == 0) {
            throw UnsupportedError(name(), fmt::format("VFIO cannot signal {} through an eventfd (flags 0x{:x})",
                                                       kind_name, irq.flags));
        }
        std::vector<UniqueFd> fds;
        std::vector<int32_t> raw;
        for (unsigned v = 0; v < vectors; ++v) {
            fds.push_back(make_eventfd(name()));
            raw.push_back(fds.back().get());
        }
        set_irqs(index, VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER, raw,
                 fmt::format("routing {} {} vector(s) to eventfds", vectors, kind_name));
        irq_fds() = std::move(fds);
        irq_index_ = index;
    }

    void disable_interrupts() override {
        if (irq_index_) {
            uint32_t index = *irq_index_;
            irq_index_.reset();
            set_irqs(index, VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER, {}, "disabling interrupts");
        }
        irq_fds().clear();
    }

    void reset_function() override {
        if ((device_flags_ & VFIO_DEVICE_FLAGS_RESET) == 0) {
            throw UnsupportedError(name(), "VFIO offers no reset for this device (no VFIO_DEVICE_FLAGS_RESET: no FLR, "
                                           "PM or bus reset the kernel could use without touching other devices)");
        }
        // vfio-pci saves and restores config state (interrupt setup included) around the reset. It
        // answers EAGAIN when it cannot take the device lock right now.
        for (int attempt = 0;; ++attempt) {
            if (vfio_ioctl(device_.get(), VFIO_DEVICE_RESET, 0ul) == 0) return;
            if (errno != EAGAIN || attempt == 50) throw SystemError(name(), "VFIO_DEVICE_RESET", errno);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }

protected:
    MmioRegion map_bar(unsigned index) override {
        const BarInfo& info = bar_info(index);
        const VfioRegion& region = regions_[index];
        std::string region_name = fmt::format("{} BAR{}", name(), index);
        if (!region.mappable()) {
            if (!region.readable() || !region.writable()) {
                throw UnsupportedError(name(), fmt::format("VFIO offers {} neither for mmap nor for read and write "
                                                           "(flags 0x{:x})",
                                                           info.describe(), region.flags));
            }
            handlers_[index] = std::make_unique<VfioRegionAccess>(region_name, device_.get(), region.offset);
            return MmioRegion(region_name, handlers_[index].get(), info.size);
        }
        if (!region.sparse) {
            void* p = ::mmap(nullptr, info.size, PROT_READ | PROT_WRITE, MAP_SHARED, device_.get(),
                             static_cast<off_t>(region.offset));
            if (p == MAP_FAILED) throw SystemError(name(), fmt::format("mmap of {}", info.describe()), errno);
            mappings_.emplace_back(static_cast<std::byte*>(p), info.size);
            return MmioRegion(region_name, static_cast<std::byte*>(p), info.size);
        }
        // Sparse: reserve the whole BAR's span, then map the allowed areas over it. The rest (the
        // MSI-X table the kernel keeps to itself) stays inaccessible; drivers never touch it.
        void* base = ::mmap(nullptr, info.size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (base == MAP_FAILED) throw SystemError(name(), fmt::format("reserving address space for {}", info.describe()), errno);
        auto* bytes = static_cast<std::byte*>(base);
        mappings_.emplace_back(bytes, info.size);
        for (const SparseArea& area : *region.sparse) {
            void* p = ::mmap(bytes + area.offset, area.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                             device_.get(), static_cast<off_t>(region.offset + area.offset));
            if (p == MAP_FAILED) {
                throw SystemError(name(), fmt::format("mmap of {} area 0x{:x}+0x{:x}", info.describe(), area.offset,
                                                      area.size),
                                  errno);
            }
        }
        return MmioRegion(region_name, bytes, info.size);
    }

private:
    std::unique_ptr<BusMapping> map_into_iommu(std::span<std::byte> memory, const std::string& what) {
        const uint64_t page = dma_->iommu->iova_page_size();
        if (reinterpret_cast<uintptr_t>(memory.data()) % page != 0 || memory.size() % page != 0) {
            throw Error(name(), fmt::format("cannot map {} into the IOMMU: not aligned to its {} pages", what, format_size(page)));
        }
        std::shared_ptr<VfioDmaState> dma = dma_;
        uint64_t iova;
        {
            std::lock_guard guard(dma->mutex);
            auto got = dma->iova.allocate(memory.size(), std::max<uint64_t>(page, 2ull << 20), dma_address_limit());
            if (!got) throw Error(name(), fmt::format("no free IOVA range of {} for {}", format_size(memory.size()), what));
            iova = *got;
        }
        try {
            dma->iommu->map_dma(memory, iova);
        } catch (const Error& e) {
            std::lock_guard guard(dma->mutex);
            dma->iova.free(iova, memory.size());
            throw UnsupportedError(name(), fmt::format("no peer access to {}: {} refused the mapping: {}", what, dma->iommu->describe(),
                                                       e.what()));
        }
        const uint64_t bytes = memory.size();
        return std::make_unique<BusMapping>(BusAddress(iova), bytes, what, [dma, iova, bytes] {
            if (dma->iommu->unmap_dma(iova, bytes)) {
                std::lock_guard guard(dma->mutex);
                dma->iova.free(iova, bytes);
            }
        });
    }

    // BAR type bits from the (VFIO-virtualized) BAR registers, size and mappability from the
    // region info, the assigned bus address from sysfs `resource` (vfio's BAR registers read back
    // what the guest-facing view holds, not necessarily what the bus decodes).
    void read_bars(const std::string& resource_path) {
        std::vector<ResourceLine> resources;
        if (auto text = kfile::read(name(), resource_path)) resources = parse_resource_file(name(), resource_path, *text);

        std::array<BarInfo, kBarCount> bars{};
        for (unsigned i = 0; i < kBarCount; ++i) {
            bars[i].index = i;
            regions_[i] = query_vfio_region(name(), device_.get(), VFIO_PCI_BAR0_REGION_INDEX + i);
        }
        for (unsigned i = 0; i < kBarCount; ++i) {
            const VfioRegion& region = regions_[i];
            if (region.size == 0) continue;
            BarInfo& bar = bars[i];
            if (!is_power_of_two(region.size)) {
                throw ProtocolError(name(), fmt::format("VFIO reports BAR{} as 0x{:x} bytes: a BAR's size is a power of "
                                                        "two",
                                                        i, region.size));
            }
            bar.size = region.size;
            uint32_t reg = config_read32(static_cast<uint16_t>(cfg::kBar0 + 4 * i));
            uint64_t address = 0;
            if (reg & cfg::kBarSpaceIo) {
                bar.type = BarType::Io;
                address = reg & cfg::kBarIoAddressMask;
            } else {
                bar.prefetchable = (reg & cfg::kBarMemPrefetch) != 0;
                uint32_t type = reg & cfg::kBarMemTypeMask;
                if (type == cfg::kBarMemType64) {
                    if (i + 1 >= kBarCount) {
                        throw ProtocolError(name(), fmt::format("BAR{} claims to be 64-bit but has no upper half", i));
                    }
                    bar.type = BarType::Memory64;
                    uint32_t hi = config_read32(static_cast<uint16_t>(cfg::kBar0 + 4 * (i + 1)));
                    address = (uint64_t{hi} << 32) | (reg & cfg::kBarMemAddressMask);
                } else if (type == cfg::kBarMemType32) {
                    bar.type = BarType::Memory32;
                    address = reg & cfg::kBarMemAddressMask;
                } else {
                    throw ProtocolError(name(), fmt::format("BAR{} register 0x{:08x} has the reserved memory type {}", i,
                                                            reg, type >> 1));
                }
            }
            bar.bus_base = i < resources.size() && resources[i].used() &&
                                   (resources[i].flags & ioresource::kUnset) == 0
                               ? resources[i].start
                               : address;
            if (bar.is_64bit()) ++i;
        }
        set_bar_infos(bars);
    }

    void set_irqs(uint32_t index, uint32_t flags, const std::vector<int32_t>& fds, const std::string& what) {
        std::vector<uint64_t> storage((sizeof(vfio_irq_set) + fds.size() * sizeof(int32_t)) / 8 + 1, 0);
        auto* set = reinterpret_cast<vfio_irq_set*>(storage.data());
        set->argsz = static_cast<uint32_t>(sizeof(vfio_irq_set) + fds.size() * sizeof(int32_t));
        set->flags = flags;
        set->index = index;
        set->start = 0;
        set->count = static_cast<uint32_t>(fds.size());
        if (!fds.empty()) std::memcpy(set->data, fds.data(), fds.size() * sizeof(int32_t));
        if (vfio_ioctl(device_.get(), VFIO_DEVICE_SET_IRQS, set) != 0) {
            throw SystemError(name(), fmt::format("VFIO_DEVICE_SET_IRQS ({})", what), errno);
        }
    }

    DeviceLock lock_;  // first member: released last
    std::shared_ptr<VfioDmaState> dma_;
    UniqueFd device_;  // after dma_: the device closes before its container or iommufd
    std::string proc_root_;
    std::string sysfs_root_;
    uint32_t device_flags_ = 0;
    uint32_t num_irqs_ = 0;
    uint64_t config_offset_ = 0;
    uint16_t config_size_ = 0;
    std::array<VfioRegion, kBarCount> regions_{};
    std::array<std::unique_ptr<VfioRegionAccess>, kBarCount> handlers_{};
    std::vector<std::span<std::byte>> mappings_;
    std::optional<uint32_t> irq_index_;
};

}  // namespace

std::unique_ptr<PciDevice> make_vfio_device(PciAddress address, VfioHandle handle, const OpenOptions& options,
                                            DeviceLock lock) {
    return std::make_unique<VfioPciDevice>(address, std::move(handle), options, std::move(lock));
}

}  // namespace baregpu::pci
