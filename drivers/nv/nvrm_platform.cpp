#include "drivers/nv/nvrm_platform.hpp"

#include "base/error.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>

namespace baregpu::nv {

namespace {

// clc361.h: the usermode region (NVC361_NV_USERMODE__SIZE) and NOTIFY_CHANNEL_PENDING in it.
constexpr uint64_t kUsermodeBytes = 0x10000, kNotifyChannelPending = 0x90;
// NVOS33_FLAGS_CACHING_TYPE (nvos.h): UNCACHED for the doorbell and uncached buffers, else WRITECOMBINED.
constexpr uint32_t kCachingUncached = 1, kCachingWriteCombined = 2;
// nvgputypes.h NvNotification: info32 at 8, info16 at 12, status at 14 (written last by RM).
constexpr size_t kInfo32 = 8, kInfo16 = 12, kStatus = 14;

uint64_t page_round(uint64_t size) { return (size + kSmallPage - 1) & ~(kSmallPage - 1); }

// nverror.h ROBUST_CHANNEL_* for the Xids drivers meet most.
const char* xid_name(uint32_t xid) {
    switch (xid) {
        case 13: return "ROBUST_CHANNEL_GR_EXCEPTION";
        case 31: return "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT: an MMU page fault";
        case 32: return "ROBUST_CHANNEL_PBDMA_ERROR";
        case 43: return "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR";
        default: return "a robust-channel error";
    }
}

}  // namespace

NvrmPlatform::NvrmPlatform(pci::DeviceFiles& files, std::unique_ptr<NvrmTransport> nvrm, size_t gpu_index,
                           uint64_t memory_bytes)
    : files_(files), nvrm_(std::move(nvrm)), gpu_index_(gpu_index), memory_bytes_(memory_bytes) {}

std::unique_ptr<NvrmPlatform> NvrmPlatform::open(pci::DeviceFiles& files, size_t gpu_index, uint64_t memory_bytes) {
    std::unique_ptr<NvrmTransport> nvrm = NvrmTransport::open(files);
    nvrm->attach_gpu(gpu_index);
    return std::unique_ptr<NvrmPlatform>(new NvrmPlatform(files, std::move(nvrm), gpu_index, memory_bytes));
}

std::unique_ptr<NvrmPlatform> NvrmPlatform::open(pci::DeviceFiles& files, std::string_view pci_address, uint64_t memory_bytes) {
    std::unique_ptr<NvrmTransport> nvrm = NvrmTransport::open(files);
    std::string listed;
    for (size_t i = 0; i < nvrm->gpus().size(); ++i) {
        if (nvrm->gpus()[i].pci_address == pci_address) {
            nvrm->attach_gpu(i);
            return std::unique_ptr<NvrmPlatform>(new NvrmPlatform(files, std::move(nvrm), i, memory_bytes));
        }
        listed += (listed.empty() ? "" : ", ") + nvrm->gpus()[i].pci_address;
    }
    throw Error(nvrm->device(), fmt::format("nvidia.ko drives no GPU at {} (it drives: {})", pci_address,
                                            listed.empty() ? "none" : listed));
}

NvrmPlatform::~NvrmPlatform() {
    detach();
    // The client goes with the transport (every RM object, so every mapping RM made); then our pages.
    nvrm_.reset();
    for (auto& [va, m] : mappings_) {
        if (m.host) ::munmap(m.cpu, m.bytes);
    }
    for (Notifier& n : notifiers_) ::munmap(n.page, kSmallPage);
    if (kmsg_fd_ >= 0) files_.close(kmsg_fd_);
}

void NvrmPlatform::attach(RmDevice& rm) {
    rm_ = &rm;
    usermode_ = nvrm_->map_memory(rm.device(), rm.usermode(), 0, kUsermodeBytes, nullptr, kCachingUncached);
    doorbell_ = reinterpret_cast<volatile uint32_t*>(static_cast<std::byte*>(usermode_) + kNotifyChannelPending);
    // The kernel log, from its end: only Xids of our channels matter.
    kmsg_fd_ = files_.open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
    if (kmsg_fd_ < 0) {
        kmsg_error_ = fmt::format("the kernel log (/dev/kmsg) cannot be read: {}", std::strerror(-kmsg_fd_));
    } else {
        read_kernel_log();
        xid_lines_.clear();
    }
}

void NvrmPlatform::detach() noexcept {
    if (usermode_ != nullptr) nvrm_->unmap_memory(usermode_, kUsermodeBytes);
    usermode_ = nullptr;
    doorbell_ = nullptr;
    std::lock_guard lock(mutex_);
    for (auto& [va, m] : mappings_) {
        if (!m.host && m.cpu != nullptr) nvrm_->unmap_memory(m.cpu, m.bytes);
        if (!m.host) m.cpu = nullptr;
    }
    rm_ = nullptr;
}

std::byte* NvrmPlatform::map(GpuVirtualAddress va, uint64_t size, const hcq::BufferOptions& options) {
    if (rm_ == nullptr) throw Error(name(), "memory mapped before the RM device is open");
    const uint64_t bytes = page_round(size);
    Mapping m;
    m.bytes = bytes;
    m.host = options.host;
    try {
        if (options.host) {
            // Host memory nvidia.ko pins and maps for the GPU (system memory, coherent).
            void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) throw Error(name(), fmt::format("mmap of {:#x} bytes of host memory failed: {}", bytes, std::strerror(errno)));
            m.cpu = static_cast<std::byte*>(p);
            m.memory = nvrm_->alloc_os_descriptor(rm_->device(), p, bytes);
        } else {
            m.memory = rm_->alloc_vram(bytes, kSmallPage);
        }
        nvrm_->map_memory_dma(rm_->device(), rm_->virtual_memory(), m.memory, 0, bytes, va.value(), false);
        if (!options.host && options.cpu_access) {
            m.cpu = static_cast<std::byte*>(nvrm_->map_memory(rm_->device(), m.memory, 0, bytes, nullptr,
                                                             options.uncached ? kCachingUncached : kCachingWriteCombined));
        }
    } catch (...) {
        try {
            if (m.memory != 0) rm_->free_object(rm_->device(), m.memory);
        } catch (...) {
        }
        if (m.host && m.cpu != nullptr) ::munmap(m.cpu, bytes);
        throw;
    }
    std::lock_guard lock(mutex_);
    mappings_[va.value()] = m;
    return m.cpu;
}

void NvrmPlatform::unmap(GpuVirtualAddress va, uint64_t) noexcept {
    Mapping m;
    {
        std::lock_guard lock(mutex_);
        auto it = mappings_.find(va.value());
        if (it == mappings_.end()) return;
        m = it->second;
        mappings_.erase(it);
    }
    // VRAM: our CPU mapping of the object goes first, so no user mapping outlives the RM object it maps;
    // then NV_ESC_RM_FREE (RM unmaps the GPU VA). Host memory: RM releases its pin of the pages, then they go.
    if (m.cpu != nullptr && !m.host) nvrm_->unmap_memory(m.cpu, m.bytes);
    try {
        if (rm_ != nullptr) rm_->free_object(rm_->device(), m.memory);
    } catch (...) {
    }
    if (m.cpu != nullptr && m.host) ::munmap(m.cpu, m.bytes);
}

NvHandle NvrmPlatform::memory_object(GpuVirtualAddress va) const {
    std::lock_guard lock(mutex_);
    auto it = mappings_.find(va.value());
    return it == mappings_.end() ? 0 : it->second.memory;
}

void NvrmPlatform::ring_doorbell(uint32_t token) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *doorbell_ = token;
}

NvHandle NvrmPlatform::new_error_notifier() {
    void* p = ::mmap(nullptr, kSmallPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw Error(name(), fmt::format("mmap of an error notifier page failed: {}", std::strerror(errno)));
    Notifier n;
    n.page = static_cast<std::byte*>(p);
    try {
        n.memory = nvrm_->alloc_os_descriptor(rm_->device(), p, kSmallPage);
    } catch (...) {
        ::munmap(p, kSmallPage);
        throw;
    }
    notifiers_.push_back(n);
    return n.memory;
}

void NvrmPlatform::channel_opened(uint32_t token, NvHandle error_notifier) {
    for (Notifier& n : notifiers_) {
        if (n.memory == error_notifier) {
            n.token = token;
            n.open = true;
        }
    }
}

void NvrmPlatform::channel_closed(uint32_t token) noexcept {
    for (Notifier& n : notifiers_) {
        if (n.open && n.token == token) n.open = false;
    }
}

void NvrmPlatform::read_kernel_log() {
    if (kmsg_fd_ < 0) return;
    char record[2048];
    for (;;) {
        const ssize_t n = files_.read(kmsg_fd_, record, sizeof record - 1);
        if (n == -EPIPE) continue;  // records were overwritten before we read them: go on from the oldest kept
        if (n <= 0) return;         // -EAGAIN: the end
        // "<prio>,<seq>,<usec>,<flags>;<text>\n" (Documentation/ABI/testing/dev-kmsg)
        std::string_view r(record, static_cast<size_t>(n));
        const size_t text = r.find(';');
        if (text == std::string_view::npos) continue;
        r = r.substr(text + 1);
        if (const size_t end = r.find('\n'); end != std::string_view::npos) r = r.substr(0, end);
        if (r.find("NVRM: Xid") != std::string_view::npos) xid_lines_.emplace_back(r);
    }
}

std::optional<NvChannelError> NvrmPlatform::poll_errors() {
    std::optional<NvChannelError> error;
    for (Notifier& n : notifiers_) {
        if (!n.open || n.reported) continue;
        const uint16_t status = std::atomic_ref<uint16_t>(*reinterpret_cast<uint16_t*>(n.page + kStatus)).load(std::memory_order_acquire);
        if (status == 0) continue;
        n.reported = true;
        if (error) {
            ++error->more;
            continue;
        }
        uint32_t xid = 0;
        uint16_t engine = 0;
        std::memcpy(&xid, n.page + kInfo32, 4);
        std::memcpy(&engine, n.page + kInfo16, 2);
        error = NvChannelError{n.token, fmt::format("error notifier: Xid {} ({}), engine type {}, status {:#06x}", xid, xid_name(xid),
                                                    engine, status),
                               0};
    }
    if (!error) return error;
    read_kernel_log();
    // nvidia.ko's Xid line names the channel ("Ch %08x": the channel id, the token's low 16 bits; the token is
    // chid | runlistId << 16, kernel_fifo_ga100.c kfifoGenerateWorkSubmitToken) and, for an MMU fault, the address.
    const std::string channel = fmt::format("Ch {:08x}", error->token & 0xffff);
    std::string lines;
    for (const std::string& l : xid_lines_) {
        if (l.find(channel) != std::string::npos) lines += (lines.empty() ? "" : " | ") + l;
    }
    if (!lines.empty())
        error->text += "; kernel log: " + lines;
    else
        error->text += kmsg_error_.empty() ? "; the kernel log has no Xid line for this channel" : "; " + kmsg_error_;
    return error;
}

void NvrmPlatform::forget_errors() {
    for (Notifier& n : notifiers_) n.reported = true;
    read_kernel_log();
    xid_lines_.clear();
}

}  // namespace baregpu::nv
