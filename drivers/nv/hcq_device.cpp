#include "drivers/nv/hcq_device.hpp"

#include "base/error.hpp"
#include "drivers/hostcode/elf_loader.hpp"
#include "drivers/hostcode/host_program.h"
#include "drivers/nv/channel_queue.hpp"
#include "drivers/nv/fwsec.hpp"
#include "drivers/nv/mmu_format.hpp"
#include "drivers/nv/program.hpp"
#include "drivers/nv/wpr_meta.hpp"
#include "hcq/clock.hpp"
#include "hcq/program.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <thread>

namespace baregpu::nv {

namespace {

constexpr uint64_t kPage = 4096, k2M = 2ull << 20;
// VRAM the driver hands out: above the 2 MiB boot arena GSP's boot used (gsp_boot.cpp), below GSP-RM's
// reserved top (non-WPR heap, WPR: GSP-RM heap, ELF, bootloader; FRTS; VGA workspace — wpr_meta.cpp),
// with 32 MiB to spare for the ELF and bootloader sizes.
constexpr uint64_t kHeapBegin = 4ull << 20;
uint64_t heap_end(uint64_t vram) {
    const uint64_t reserved = kVgaWorkspaceSize + kFrtsSize + kGspFwHeapSizeAda + kNonWprHeapSize + (32ull << 20);
    if (vram < reserved + kHeapBegin + (64ull << 20)) return kHeapBegin;
    return (vram - reserved) & ~(k2M - 1);
}
// What a CTA may use on AD102 (sm_89): 1024 threads, 99 KiB of shared memory.
constexpr uint32_t kMaxThreads = 1024, kMaxShared = 99 * 1024;

hcq::DeviceLimits limits_for(uint64_t vram, uint64_t memory_bytes) {
    hcq::DeviceLimits l;
    l.max_threads_per_group = kMaxThreads;
    l.max_shared_bytes = kMaxShared;
    l.max_kernarg_bytes = static_cast<uint32_t>(hcq::KernelArgs::kMaxBytes);
    l.max_grid = {0x7fffffffu, 0xffffu, 0xffffu};
    l.memory_bytes = heap_end(vram) - kHeapBegin;
    if (memory_bytes != 0) l.memory_bytes = std::min(l.memory_bytes, memory_bytes);
    return l;
}

std::string device_name(const NvHcqOptions& o, const pci::PciDevice& pci) { return o.name.empty() ? pci.name() : o.name; }

}  // namespace

std::shared_ptr<NvHcqDevice> NvHcqDevice::create(std::unique_ptr<pci::PciDevice> pci, std::unique_ptr<GspDevice> gsp,
                                                 NvHcqOptions options) {
    const pci::LinkCapabilities link = pci->link_capabilities();
    if (!link.bar_mmap || !link.host_dma) {
        throw UnsupportedError(device_name(options, *pci), "HCQ queues need a CPU-mapped BAR1 and host memory the GPU can DMA into");
    }
    if (options.va_bytes == 0 || kVaBase + options.va_bytes > (1ull << 40))
        throw Error(device_name(options, *pci), fmt::format("a VA window of {:#x} bytes at {:#x} passes 2^40 (GP entries and QMDs "
                                                            "address 40 bits)", options.va_bytes, kVaBase));
    return std::make_shared<NvHcqDevice>(Token{}, std::move(pci), std::move(gsp), std::move(options));
}

NvHcqDevice::NvHcqDevice(Token, std::unique_ptr<pci::PciDevice> pci, std::unique_ptr<GspDevice> gsp, NvHcqOptions options)
    : Device(device_name(options, *pci), "x86_64", limits_for(gsp->vram_bytes(), options.memory_bytes), device_name(options, *pci)),
      options_(std::move(options)), pci_(std::move(pci)), gsp_(std::move(gsp)) {
    const uint64_t vram = gsp_->vram_bytes();
    pci::MmioRegion& bar1 = pci_->bar(1);
    bar1_ = bar1.direct();
    bar1_size_ = bar1.size();
    if (bar1_ == nullptr || bar1_size_ < vram)
        throw UnsupportedError(name(), fmt::format("BAR1 of {:#x} bytes does not show all {:#x} bytes of VRAM", bar1_size_, vram));
    vram_ = std::make_unique<VramAllocator>(name(), kHeapBegin, heap_end(vram) - kHeapBegin);
    pci::MmioRegion& bar0 = pci_->bar(0);
    pt_ = std::make_unique<PageTable>(
        name(), MmuVersion::v2, *vram_, [&bar1](uint64_t at, uint64_t value) { bar1.write64(BarOffset(at), value); },
        [&bar0](uint32_t at, uint32_t value) { bar0.write32(BarOffset(at), value); });

    // RM: a client, the device objects, and our page directory for the VA space (research A.3 step 10).
    transport_ = std::make_unique<NvpciTransport>(gsp_->rpc(), name());
    client_rm_ = std::make_unique<Rm>(*transport_);
    client_ = client_rm_->alloc_client();
    rm_ = RmDevice::open(*transport_, client_, RmBranch::r570);
    const MmuGeometry& g = mmu_geometry(MmuVersion::v2);
    const unsigned root_shift = g.levels[0].shift;
    rm_->copy_server_reserved_pdes(pt_->root(), kPage, static_cast<uint8_t>(root_shift), 0, (uint64_t{1} << root_shift) - 1);

    compute_ = std::make_unique<ChannelQueue>(*this, ChannelQueue::Config{hcq::QueueKind::compute, "compute", options_.gpfifo_entries,
                                                                           options_.compute_ring_bytes});
    copy_ = std::make_unique<ChannelQueue>(*this, ChannelQueue::Config{hcq::QueueKind::copy, "copy:0", options_.gpfifo_entries,
                                                                        options_.copy_ring_bytes});
    peers_ = make_peer_window();
    Parts parts;
    parts.memory = this;
    parts.va_base = GpuVirtualAddress(kVaBase);
    parts.va_size = options_.va_bytes;
    parts.compute = {compute_.get()};
    parts.copy = {copy_.get()};
    parts.timestamp_hz = 1'000'000'000;  // the PTIMER nanosecond clock semaphores stamp
    parts.staging_slot_bytes = options_.staging_bytes;
    parts.staging_slots = options_.staging_slots;
    attach(parts);
    compute_->start();
    copy_->start();
    opened();
}

NvHcqDevice::~NvHcqDevice() {
    begin_shutdown();
    compute_->stop();
    copy_->stop();
    compute_->release();
    copy_->release();
    detach();
    try {
        std::lock_guard lock(rm_mutex_);
        rm_.reset();
        client_rm_->free(client_, client_, client_);
    } catch (...) {
    }
    gsp_.reset();  // UNLOADING_GUEST_DRIVER
}

void NvHcqDevice::channel_opened(uint32_t token, std::string queue) {
    std::lock_guard lock(fault_mutex_);
    channels_[token] = std::move(queue);
}

void NvHcqDevice::channel_closed(uint32_t token) noexcept {
    std::lock_guard lock(fault_mutex_);
    channels_.erase(token);
}

// ---- memory ----

std::byte* NvHcqDevice::map_host(GpuVirtualAddress va, uint64_t size) {
    std::unique_ptr<pci::DmaBuffer> dma = pci_->alloc_dma(size);
    const uint64_t page = dma->contiguous() ? size : dma->page_bytes();
    PteAttributes attrs{.aperture = Aperture::sys_coherent, .volatile_ = true};
    for (uint64_t at = 0; at < size;) {
        const uint64_t bus = dma->bus_address(at).value();
        uint64_t end = std::min(size, at + page);
        while (end < size && dma->bus_address(end).value() == bus + (end - at)) end = std::min(size, end + page);
        pt_->map(va + at, bus, end - at, attrs);
        at = end;
    }
    std::byte* cpu = dma->cpu().data();
    mappings_[va.value()] = Mapping{{}, std::move(dma)};
    return cpu;
}

std::byte* NvHcqDevice::map_memory(GpuVirtualAddress va, uint64_t size, uint64_t, const hcq::BufferOptions& options) {
    std::lock_guard lock(memory_mutex_);
    if (options.host) return map_host(va, size);
    // Contiguous: the simulated compute class translates only a kernel buffer's first address
    // (drivers/sim/nvgpu/README.md); VramAllocator hands out 2 MiB chunks where the size allows.
    VramAllocation a = vram_->allocate(size, /*contiguous=*/true);
    uint64_t at = va.value();
    for (const VramBlock& b : a.blocks) {
        pt_->map(GpuVirtualAddress(at), b.offset, b.size, PteAttributes{.aperture = Aperture::vram, .volatile_ = options.uncached});
        at += b.size;
    }
    std::byte* cpu = options.cpu_access ? const_cast<std::byte*>(bar1_ + a.blocks.front().offset) : nullptr;
    mappings_[va.value()] = Mapping{std::move(a), nullptr};
    return cpu;
}

void NvHcqDevice::unmap_memory(GpuVirtualAddress va, uint64_t size, std::byte*) noexcept {
    std::lock_guard lock(memory_mutex_);
    auto it = mappings_.find(va.value());
    if (it == mappings_.end()) return;
    try {
        pt_->unmap(va, size);
    } catch (const std::exception&) {
        // A chip that is gone cannot be unmapped; the memory is still ours to reuse.
    }
    try {
        if (!it->second.vram.blocks.empty()) vram_->free(it->second.vram);
    } catch (const std::exception&) {
    }
    mappings_.erase(it);
}

NvHcqDevice::MemoryStats NvHcqDevice::memory_stats() {
    std::lock_guard lock(memory_mutex_);
    return {vram_->stats(), pt_->stats()};
}

// ---- programs ----

std::shared_ptr<hcq::Program> NvHcqDevice::load_program_impl(std::span<const std::byte> code_object, std::string_view kernel) {
    hostcode::ElfObject object = hostcode::ElfObject::parse(code_object, name(), "code object");
    const hostcode::KernelEntry& k = object.kernel(kernel);
    if (k.shared_bytes > kMaxShared)
        throw Error(name(), fmt::format("kernel '{}' needs {} bytes of shared memory; the device has {}", k.name, k.shared_bytes, kMaxShared));
    if (k.kernarg_size > limits().max_kernarg_bytes)
        throw Error(name(), fmt::format("kernel '{}' takes {} bytes of arguments; the device takes at most {}", k.name, k.kernarg_size,
                                        limits().max_kernarg_bytes));
    // The descriptor the simulated compute class finds at the QMD's PROGRAM_ADDRESS, then the image.
    constexpr uint64_t kImageOffset = 256;
    hcq::Buffer code = memory().allocate(kImageOffset + code_object.size(), {.cpu_access = true}, nullptr);
    baregpu_host_program d{};
    d.magic = BAREGPU_HOST_PROGRAM_MAGIC;
    d.version = BAREGPU_HOST_PROGRAM_VERSION;
    d.image_va = code.address().value() + kImageOffset;
    d.image_size = code_object.size();
    d.image_hash = baregpu_host_program_hash(code_object.data(), code_object.size());
    std::memcpy(d.kernel, k.name.data(), std::min(k.name.size(), sizeof(d.kernel) - 1));
    d.kernarg_size = k.kernarg_size;
    std::memcpy(code.cpu(), &d, sizeof d);
    std::memcpy(code.cpu() + kImageOffset, code_object.data(), code_object.size());
    hcq::KernelInfo info;
    info.name = k.name;
    info.kernarg_size = k.kernarg_size;
    info.num_buffers = k.num_buffers;
    info.num_values = k.num_values;
    info.static_shared_bytes = k.shared_bytes;
    info.private_bytes = k.private_bytes;
    info.max_threads_per_group = std::min(k.max_threads, kMaxThreads);
    return std::make_shared<NvProgram>(*this, std::move(info), std::move(code));
}

NvProgram::~NvProgram() {
    static_cast<NvHcqDevice&>(device()).program_unloaded(code_.address(), code_.size(), name());
}

void NvHcqDevice::program_unloaded(GpuVirtualAddress code, uint64_t size, const std::string& kernel) noexcept {
    try {
        std::lock_guard lock(fault_mutex_);
        if (unloaded_.size() >= 64) unloaded_.erase(unloaded_.begin());
        unloaded_.push_back({code.value(), code.value() + size, kernel});
    } catch (...) {
    }
}

// ---- faults ----

bool NvHcqDevice::check_faults() noexcept {
    std::unique_lock lock(rm_mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    try {
        if (check_iommu_faults()) return true;
        GspRpc& rpc = gsp_->rpc();
        rpc.poll_events();
        const GspEventLog& log = rpc.events();
        if (log.os_errors.size() == errors_seen_) return false;
        const size_t first = errors_seen_;
        errors_seen_ = log.os_errors.size();
        const uint32_t chid = first < log.os_error_chids.size() ? log.os_error_chids[first] : 0;
        const std::string& text = log.os_errors[first];
        std::string queue, unloaded;
        {
            std::lock_guard f(fault_mutex_);
            auto it = channels_.find(chid);
            queue = it != channels_.end() ? it->second : "no queue of this device";
            // GSP's text names the faulting VA ("... VA 0x..."): a launch of a program unloaded since.
            const size_t at = text.find("VA 0x");
            if (at != std::string::npos) {
                const uint64_t va = std::strtoull(text.c_str() + at + 3, nullptr, 16);
                for (auto u = unloaded_.rbegin(); u != unloaded_.rend(); ++u) {
                    if (va >= (u->begin & ~(kPage - 1)) && va < u->end) {
                        unloaded = fmt::format("a kernel launch found no program is loaded at {:#x}: kernel '{}' was unloaded and its "
                                               "code unmapped; ",
                                               va, u->kernel);
                        break;
                    }
                }
            }
        }
        fail(fmt::format("{}GSP-RM reported an error on channel {} ({}): {}{}; queues: {}; {}", unloaded, chid, queue, text,
                         errors_seen_ - first > 1 ? fmt::format(" (and {} more)", errors_seen_ - first - 1) : "",
                         compute_->describe(), copy_->describe()));
        return true;
    } catch (const std::exception& e) {
        fail(fmt::format("reading GSP's status queue failed: {}", e.what()));
        return true;
    }
}

void NvHcqDevice::recover() {
    std::lock_guard lock(submission_mutex());
    {
        std::lock_guard rm(rm_mutex_);
        gsp_->rpc().poll_events();
        errors_seen_ = gsp_->rpc().events().os_errors.size();
    }
    compute_->restart();
    copy_->restart();
    clear_failure();
}

void NvHcqDevice::sleep_for_signal(const hcq::SignalSlot&, uint64_t, uint64_t deadline_ns) {
    if (check_faults()) return;
    const uint64_t now = hcq::host_now_ns();
    if (deadline_ns <= now) return;
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(deadline_ns - now, 50'000)));
}

}  // namespace baregpu::nv
