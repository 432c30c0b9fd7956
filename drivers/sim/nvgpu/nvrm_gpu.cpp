#include "nvrm_gpu.hpp"

#include "base/error.hpp"
#include "rm_layouts.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

namespace baregpu::sim::nvgpu {

namespace {

constexpr uint64_t kNvrmPage = 4096;
// clc361.h NVC361_NOTIFY_CHANNEL_PENDING: the doorbell word of the usermode region.
constexpr uint64_t kNotifyChannelPending = 0x90;
// nverror.h ROBUST_CHANNEL_* (the Xid numbers nvidia.ko logs).
constexpr uint32_t kXidGrException = 13, kXidMmuFault = 31, kXidPbdmaError = 32;

int memfd_of(const char* name, uint64_t bytes) {
    int fd = ::memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) throw Error(name, fmt::format("memfd_create failed: {}", std::strerror(errno)));
    if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
        const int e = errno;
        ::close(fd);
        throw Error(name, fmt::format("ftruncate to {:#x} bytes failed: {}", bytes, std::strerror(e)));
    }
    return fd;
}

std::byte* map_shared(int fd, uint64_t bytes, const char* what) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) throw Error(what, fmt::format("mmap of {:#x} bytes failed: {}", bytes, std::strerror(errno)));
    return static_cast<std::byte*>(p);
}

}  // namespace

// System memory as the engines reach it: the OS descriptors RM has mapped, at bus address = host
// address. An access outside them fails like an IOMMU / bus error (counted).
class NvrmGpu::HostPort final : public pci::sim::SimPort {
public:
    explicit HostPort(NvrmGpu& gpu) : gpu_(gpu), start_(std::chrono::steady_clock::now()) {}

    std::byte* find(uint64_t address, uint64_t bytes) {
        std::lock_guard lock(gpu_.mutex_);
        auto it = gpu_.host_ranges_.upper_bound(address);
        if (it == gpu_.host_ranges_.begin()) return nullptr;
        --it;
        if (address - it->first > it->second.first || it->second.first - (address - it->first) < bytes) return nullptr;
        return reinterpret_cast<std::byte*>(static_cast<uintptr_t>(address));
    }
    bool dma_read(BusAddress a, std::span<std::byte> out) override {
        std::byte* p = find(a.value(), out.size());
        if (!p) return ++gpu_.dma_faults_, false;
        std::memcpy(out.data(), p, out.size());
        return true;
    }
    bool dma_write(BusAddress a, std::span<const std::byte> in) override {
        std::byte* p = find(a.value(), in.size());
        if (!p) return ++gpu_.dma_faults_, false;
        std::memcpy(p, in.data(), in.size());
        return true;
    }
    std::byte* dma_host_memory(BusAddress a, uint64_t bytes) override { return find(a.value(), bytes); }
    void raise_interrupt(unsigned) override {}
    bool bus_master_enabled() override { return true; }
    std::span<std::byte> bar_memory(unsigned bar) override { return bar == 1 ? gpu_.vram_ : std::span<std::byte>{}; }
    void violation(const std::string& what, const std::string& where, const std::string& source) override {
        std::lock_guard lock(gpu_.mutex_);
        gpu_.log_.push_back(fmt::format("NVRM: {}: {} ({})", where, what, source));
    }
    uint64_t now_ns() const override {
        return static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count());
    }
    void spend_ns(uint64_t) override {}
    const std::string& device_name() const override { return gpu_.options_.name; }

private:
    NvrmGpu& gpu_;
    std::chrono::steady_clock::time_point start_;
};

NvrmGpu::NvrmGpu(std::shared_ptr<RmModel> rm, NvrmGpuOptions options) : options_(std::move(options)), rm_(std::move(rm)) {
    const uint64_t bytes = options_.vram_bytes;
    if (bytes < (64ull << 20) || bytes % (2ull << 20) != 0)
        throw Error(options_.name, fmt::format("VRAM of {:#x} bytes: a multiple of 2 MiB of at least 64 MiB is needed", bytes));
    vram_fd_ = memfd_of("sim-nvidia-vram", bytes);
    vram_ = std::span<std::byte>(map_shared(vram_fd_, bytes, "sim-nvidia-vram"), bytes);
    usermode_fd_ = memfd_of("sim-nvidia-usermode", rm::kUsermodeBytes);
    usermode_ = map_shared(usermode_fd_, rm::kUsermodeBytes, "sim-nvidia-usermode");
    free_[0] = bytes;
    tables_ = std::make_unique<RmPageTables>(vram_, [this]() -> std::optional<uint64_t> {
        std::optional<uint64_t> at = alloc_vram(kNvrmPage, kNvrmPage);
        if (at) std::memset(vram_.data() + *at, 0, kNvrmPage);
        return at;
    });
    port_ = std::make_unique<HostPort>(*this);
    engines_ = std::make_unique<GpuEngines>(options_.name, vram_, port_.get());
    engines_->set_hooks({}, [this](const EngineFault& f) { on_fault(f); });

    RmMemoryHooks m;
    m.alloc_vram = [this](uint64_t size, uint64_t alignment) {
        std::lock_guard lock(mutex_);
        return alloc_vram(size, alignment);
    };
    m.free_vram = [this](uint64_t offset, uint64_t size) {
        std::lock_guard lock(mutex_);
        free_vram(offset, size);
    };
    m.new_page_directory = [this] {
        std::lock_guard lock(mutex_);
        return tables_->new_root();
    };
    m.map = [this](uint64_t pdb, uint64_t va, uint64_t length, RmBacking target) {
        std::lock_guard lock(mutex_);
        if (!target.vram) {
            // The engines may now reach these host pages (nvidia.ko pinned them at NV_ESC_RM_ALLOC_MEMORY).
            auto& r = host_ranges_[target.address];
            r.first = std::max(r.first, length);
            ++r.second;
            host_maps_[{pdb, va}] = {target.address, length};
        }
        return tables_->map(pdb, va, length, target.vram, target.address);
    };
    m.unmap = [this](uint64_t pdb, uint64_t va, uint64_t length) {
        std::lock_guard lock(mutex_);
        tables_->unmap(pdb, va, length);
        if (auto h = host_maps_.find({pdb, va}); h != host_maps_.end()) {
            auto r = host_ranges_.find(h->second.first);
            if (r != host_ranges_.end() && --r->second.second == 0) host_ranges_.erase(r);
            host_maps_.erase(h);
        }
    };
    m.write = [this](RmBacking target, std::span<const std::byte> data) {
        std::lock_guard lock(mutex_);
        if (target.vram) {
            if (target.address <= vram_.size() && vram_.size() - target.address >= data.size())
                std::memcpy(vram_.data() + target.address, data.data(), data.size());
        } else {
            // The kernel writes pinned user pages (the OS descriptor's own).
            std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(target.address)), data.data(), data.size());
        }
    };
    rm_->set_memory_hooks(std::move(m));

    RmEngineHooks e;
    e.channel_allocated = [this](const RmChannelInfo& c) {
        engines_->register_channel(c.token, {c.gpfifo_va, c.gpfifo_entries, c.userd_va, c.userd_vram, c.page_directory_base,
                                             MmuFormat::v2, c.name, c.gpfifo_class});
        std::lock_guard lock(mutex_);
        tokens_.insert(c.token);
    };
    e.channel_freed = [this](uint32_t token) {
        engines_->unregister_channel(token);
        std::lock_guard lock(mutex_);
        tokens_.erase(token);
    };
    rm_->set_engine_hooks(std::move(e));
    bell_thread_ = std::thread([this] { doorbell_thread(); });
}

NvrmGpu::~NvrmGpu() {
    {
        std::lock_guard lock(bell_mutex_);
        stop_ = true;
    }
    bell_cv_.notify_all();
    bell_thread_.join();
    rm_->set_engine_hooks({});
    rm_->set_memory_hooks({});
    engines_.reset();
    ::munmap(usermode_, rm::kUsermodeBytes);
    ::munmap(vram_.data(), vram_.size());
    ::close(usermode_fd_);
    ::close(vram_fd_);
}

std::optional<uint64_t> NvrmGpu::alloc_vram(uint64_t size, uint64_t alignment) {
    size = (size + kNvrmPage - 1) & ~(kNvrmPage - 1);
    if (alignment < kNvrmPage || (alignment & (alignment - 1)) != 0) alignment = kNvrmPage;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        const uint64_t begin = it->first, bytes = it->second;
        const uint64_t at = (begin + alignment - 1) & ~(alignment - 1);
        if (at - begin > bytes || bytes - (at - begin) < size) continue;
        free_.erase(it);
        if (at > begin) free_[begin] = at - begin;
        if (begin + bytes > at + size) free_[at + size] = begin + bytes - (at + size);
        return at;
    }
    return std::nullopt;
}

void NvrmGpu::free_vram(uint64_t offset, uint64_t size) {
    size = (size + kNvrmPage - 1) & ~(kNvrmPage - 1);
    auto [it, inserted] = free_.emplace(offset, size);
    if (!inserted) return;  // freed twice: RM frees an object once
    if (auto next = std::next(it); next != free_.end() && it->first + it->second == next->first) {
        it->second += next->second;
        free_.erase(next);
    }
    if (it != free_.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second == it->first) {
            prev->second += it->second;
            free_.erase(it);
        }
    }
}

std::vector<std::string> NvrmGpu::kernel_log() const {
    std::lock_guard lock(mutex_);
    return log_;
}

void NvrmGpu::on_fault(const EngineFault& f) {
    using Kind = EngineFault::Kind;
    const uint32_t xid = f.kind == Kind::mmu ? kXidMmuFault : f.kind == Kind::bad_gp_entry ? kXidPbdmaError : kXidGrException;
    // nvidia.ko's Xid line (nv.c / the RC path: "NVRM: Xid (PCI:<bdf>): <xid>, pid=.., Ch <chid>, ...").
    const std::string what = f.kind == Kind::mmu ? fmt::format("MMU Fault: faulted @ {:#x}: {}", f.address, f.what)
                                                 : fmt::format("{} at {:#x}: {}", f.kind == Kind::bad_gp_entry ? "PBDMA error" : "Graphics Exception",
                                                               f.address, f.what);
    // It prints the channel id: the work-submit token's low 16 bits (kernel_fifo_ga100.c kfifoGenerateWorkSubmitToken:
    // chid | runlistId << 16).
    std::string line = fmt::format("NVRM: Xid (PCI:0000:01:00): {}, pid={}, Ch {:08x}, {}", xid, ::getpid(), f.token & 0xffff, what);
    {
        // Logged before the notifier is written: a driver that sees the notifier finds the line.
        std::lock_guard lock(mutex_);
        log_.push_back(std::move(line));
    }
    rm_->robust_channel_error(f.token, xid, port_->now_ns());
}

void NvrmGpu::doorbell_thread() {
    auto* bell = reinterpret_cast<uint32_t*>(usermode_ + kNotifyChannelPending);
    auto last = std::chrono::steady_clock::now() - std::chrono::seconds(1);
    std::vector<uint32_t> tokens;
    for (;;) {
        const uint32_t token = std::atomic_ref<uint32_t>(*bell).exchange(0, std::memory_order_acq_rel);
        const auto now = std::chrono::steady_clock::now();
        if (token != 0) {
            last = now;
            {
                std::lock_guard lock(mutex_);
                tokens.assign(tokens_.begin(), tokens_.end());
                if (!tokens_.count(token))
                    log_.push_back(fmt::format("NVRM: doorbell rung with work submit token {:#x}, which names no channel (ignored)", token));
            }
            // Two stores between polls read as one: every channel is looked at (a doorbell on an idle
            // channel finds GPGet == GPPut and does nothing).
            for (uint32_t t : tokens) engines_->doorbell(t);
        }
        std::unique_lock lock(bell_mutex_);
        // Busy: 20 µs; idle for a while: 200 µs; idle for a second: 1 ms (an idle device costs ~1000 wakeups/s).
        const auto idle = now - last;
        const auto period = idle < std::chrono::milliseconds(20) ? std::chrono::microseconds(20)
                            : idle < std::chrono::seconds(1)     ? std::chrono::microseconds(200)
                                                                 : std::chrono::microseconds(1000);
        if (bell_cv_.wait_for(lock, period, [&] { return stop_; })) return;
    }
}

}  // namespace baregpu::sim::nvgpu
