#include "drivers/am/hcq_device.hpp"

#include "base/error.hpp"
#include "drivers/am/code_object.hpp"
#include "drivers/am/compute_queue.hpp"
#include "drivers/am/copy_queue.hpp"
#include "drivers/am/program.hpp"
#include "drivers/hostcode/elf_loader.hpp"
#include "drivers/hostcode/host_program.h"
#include "hcq/clock.hpp"
#include "hcq/program.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <thread>

namespace baregpu::am {

namespace {

constexpr uint64_t kPage = 4096, k2M = 2ull << 20, k1G = 1ull << 30;
// The IP discovery table sits in the last 64 KiB of VRAM (tinygrad amdev.py AMDev._run_discovery); keep the top MiB.
constexpr uint64_t kVramTopReserved = 1ull << 20;
// What a workgroup may use (RDNA3/RDNA4: 1024 work-items, 64 KiB of LDS).
constexpr uint32_t kMaxThreads = 1024, kMaxLds = 64 * 1024;

hcq::DeviceLimits limits_for(AmDevice& chip, uint64_t memory_bytes) {
    hcq::DeviceLimits l;
    l.max_threads_per_group = kMaxThreads;
    l.max_shared_bytes = kMaxLds;
    l.max_kernarg_bytes = static_cast<uint32_t>(hcq::KernelArgs::kMaxBytes);
    l.max_grid = {0x7fffffffu, 0xffffu, 0xffffu};
    l.memory_bytes = chip.vram_size() - AmDevice::heap_begin() - kVramTopReserved;
    if (memory_bytes != 0) l.memory_bytes = std::min(l.memory_bytes, memory_bytes);
    l.host_dma = chip.pci().link_capabilities().host_dma;
    return l;
}

std::string arch_for(const AmDevice& chip, KernelIsa isa) {
    if (isa == KernelIsa::host) return "x86_64";
    return chip.asic().gc_generation >= 12 ? "gfx1201" : "gfx1100";
}

// Set on a thread inside AmHcqDevice::wait_signal_only.
thread_local bool signals_only_wait = false;
// Set while allocate_ring allocates: map_shadowed then adds the range as a marked one.
thread_local bool allocating_ring = false;

}  // namespace

std::shared_ptr<AmHcqDevice> AmHcqDevice::create(std::unique_ptr<AmDevice> chip, AmHcqOptions options) {
    const RegisterTable& t = chip->regs().table();
    if (!t.cp_hqd_active.valid() || !t.sdma0_queue0_rb_cntl.valid()) {
        // Both supported generations have them (registers.cpp); a future ASIC whose table lacks
        // them is refused here rather than programmed through invalid register definitions.
        throw UnsupportedError(options.name.empty() ? chip->name() : options.name,
                               fmt::format("{} (GC {}.{}.{}): queues need the GC {} queue registers, which drivers/am's register "
                                           "table for this chip does not have",
                                           chip->asic().name, chip->asic().gc.major, chip->asic().gc.minor, chip->asic().gc.revision,
                                           chip->asic().gc_generation));
    }
    return std::make_shared<AmHcqDevice>(Token{}, std::move(chip), std::move(options));
}

AmHcqDevice::AmHcqDevice(Token, std::unique_ptr<AmDevice> chip, AmHcqOptions options)
    : Device(options.name.empty() ? chip->name() : options.name, arch_for(*chip, options.isa), limits_for(*chip, options.memory_bytes),
             options.name.empty() ? chip->name() : options.name),
      options_(std::move(options)), chip_(std::move(chip)),
      vram_(AmDevice::heap_begin(), (chip_->vram_size() - kVramTopReserved) & ~(kPage - 1)) {
    pci::MmioRegion& bar0 = chip_->pci().bar(0);
    bar0_ = bar0.direct();
    bar0_size_ = bar0.size();
    // Queues, signals and kernel arguments live in memory the CPU writes through a pointer: a
    // mapped BAR0 or host memory the GPU can DMA into. A link that offers neither (the USB bridge:
    // every access is a transfer, DMA only into 512 KB of bridge SRAM) gets host copies of VRAM
    // synchronized at doorbells and host waits (shadow_memory.hpp).
    const pci::LinkCapabilities link = chip_->pci().link_capabilities();
    if (!link.bar_mmap && !link.host_dma) shadow_ = std::make_unique<ShadowMemory>(chip_->vram());

    // The MEC was configured and un-halted by the boot (gfx.cpp); a warm chip keeps it so.
    // Whatever a previous owner left in the interrupt ring is not ours to report.
    chip_->take_page_faults();
    ih_seen_ = chip_->ih().written_wptr();

    const pm4::GcGen gen = chip_->asic().gc_generation >= 12 ? pm4::GcGen::gc12 : pm4::GcGen::gc11;
    if (options_.compute_queues < 1 || options_.compute_queues > 8) {
        throw Error(name(), fmt::format("{} compute queues asked: MEC1 pipe 0 has 1 to 8", options_.compute_queues));
    }
    Parts parts;
    for (uint32_t q = 0; q < options_.compute_queues; ++q) {
        compute_.push_back(std::make_unique<ComputeQueueEngine>(*this, gen, q, options_.compute_ring_bytes));
        parts.compute.push_back(compute_.back().get());
    }
    copy_ = std::make_unique<CopyQueueEngine>(*this, options_.copy_ring_bytes);
    // The peer window follows the HCQ window, so an alias never collides with our own buffers.
    pci::PeerWindow::PageTableOps ops;
    ops.map = [this](uint64_t va, uint64_t bus, uint64_t size) {
        // Peer memory is reached over the bus like host memory: system pages, uncached.
        std::lock_guard lock(memory_mutex_);
        chip_->map(va, bus, size, MapFlags{.system = true, .uncached = true, .executable = false}, /*flush=*/false);
    };
    ops.unmap = [this](uint64_t va, uint64_t size) {
        std::lock_guard lock(memory_mutex_);
        try {
            chip_->unmap(va, size, /*flush=*/false);
        } catch (const std::exception&) {
        }
    };
    ops.flush = [this] {
        try {
            chip_->flush_tlbs();
        } catch (const std::exception&) {
        }
    };
    peers_ = std::make_unique<pci::PeerWindow>(chip_->pci(), name(), kVmStart + options_.va_bytes, options_.peer_va_bytes,
                                               std::move(ops));
    parts.memory = this;
    parts.va_base = GpuVirtualAddress(kVmStart);
    parts.va_size = options_.va_bytes;
    parts.copy = {copy_.get()};
    parts.timestamp_hz = 100'000'000;
    parts.staging_slot_bytes = options_.staging_bytes;
    parts.staging_slots = options_.staging_slots;  // RELEASE_MEM / SDMA TIMESTAMP count 10 ns ticks (tinygrad AMDSignal)
    attach(parts);
    // Host copies through the bridge SRAM, mapped after the peer window (nothing else lives there).
    if (shadow_ && SramStaging::usable(*this)) {
        sram_staging_ = std::make_unique<SramStaging>(*this, kVmStart + options_.va_bytes + options_.peer_va_bytes);
    }
    for (auto& c : compute_) c->start();
    copy_->start();
    opened();
}

AmHcqDevice::~AmHcqDevice() {
    begin_shutdown();
    sram_staging_.reset();
    for (auto& c : compute_) c->stop();
    copy_->stop();
    for (auto& c : compute_) c->release();
    copy_->release();
    detach();
}

void AmHcqDevice::flush_hdp() { chip_->soc().flush_hdp(); }

void AmHcqDevice::ring_doorbell(uint32_t slot, uint64_t value) {
    // Whatever the host wrote (the ring, the write pointer, kernel arguments, data) must be in
    // device memory before the engine looks.
    if (shadow_) shadow_->publish();
    chip_->pci().bar(2).write64(BarOffset(uint64_t{slot} * 8), value);
}

void AmHcqDevice::publish_host_writes() {
    if (!shadow_) return;
    try {
        shadow_->publish();
    } catch (const std::exception& e) {
        fail(fmt::format("publishing host writes to device memory failed: {}", e.what()));
    }
}

void AmHcqDevice::host_signal_written() noexcept { publish_host_writes(); }

void AmHcqDevice::host_writes_only(const hcq::Buffer& buffer) {
    if (shadow_) shadow_->host_writes_only(GpuVirtualAddress(buffer.address().value() - buffer.offset()));
}

hcq::Buffer AmHcqDevice::allocate_ring(uint64_t size) {
    allocating_ring = true;
    try {
        hcq::Buffer ring = allocate_owned(size, {.host = true, .uncached = true});
        allocating_ring = false;
        return ring;
    } catch (...) {
        allocating_ring = false;
        throw;
    }
}

void AmHcqDevice::ring_written(const hcq::Buffer& ring, uint64_t offset, uint64_t bytes) {
    if (shadow_) shadow_->written(GpuVirtualAddress(ring.address().value() - ring.offset()), ring.offset() + offset, bytes);
}

void AmHcqDevice::publish_last(const hcq::Buffer& buffer) {
    if (shadow_) shadow_->publish_last(GpuVirtualAddress(buffer.address().value() - buffer.offset()));
}

bool AmHcqDevice::refresh_host(const void* host, uint64_t bytes) { return shadow_ && shadow_->refresh_host(host, bytes); }

std::optional<uint64_t> AmHcqDevice::link_clock_ns() {
    if (!shadow_) return std::nullopt;
    return static_cast<uint64_t>(chip_->pci().now().count());
}

bool AmHcqDevice::copy_in_through_link(const hcq::Buffer& dst, std::span<const std::byte> src) {
    if (!sram_staging_) return false;
    sram_staging_->copy_in(internal_copy_queue(), dst, src);
    return true;
}

bool AmHcqDevice::copy_out_through_link(std::span<std::byte> dst, const hcq::Buffer& src) {
    return sram_staging_ && sram_staging_->copy_out(internal_copy_queue(), dst, src);
}

uint64_t AmHcqDevice::physical(GpuVirtualAddress va) {
    std::optional<Translation> t = chip_->translate(va.value());
    if (!t) throw Error(name(), fmt::format("GPU VA {:#x} is not mapped", va.value()));
    return t->paddr;
}

// ---- memory ----

std::byte* AmHcqDevice::map_host(GpuVirtualAddress va, uint64_t size) {
    std::unique_ptr<pci::DmaBuffer> dma = chip_->pci().alloc_dma(size);
    MapFlags flags{.system = true, .uncached = true};
    // Runs that are contiguous on the bus become one mapping each (one run when the IOMMU gave a
    // single range: vfio and the simulated bus always do).
    const uint64_t page = dma->contiguous() ? size : dma->page_bytes();
    for (uint64_t at = 0; at < size;) {
        const uint64_t bus = dma->bus_address(at).value();
        uint64_t end = std::min(size, at + page);
        while (end < size && dma->bus_address(end).value() == bus + (end - at)) end = std::min(size, end + page);
        chip_->map(va.value() + at, bus, end - at, flags, /*flush=*/false);
        count_leaves(va.value() + at, bus, end - at);
        at = end;
    }
    chip_->flush_tlbs();
    std::byte* cpu = dma->cpu().data();
    mappings_[va.value()] = Mapping{{}, std::move(dma)};
    return cpu;
}

void AmHcqDevice::count_leaves(uint64_t va, uint64_t paddr, uint64_t size) {
    // What PageTable::map picks: the largest leaf both addresses are aligned to that fits.
    for (uint64_t done = 0; done < size;) {
        const uint64_t v = va + done, p = paddr + done, left = size - done;
        uint64_t leaf = kPage;
        if ((v - kVmStart) % k1G == 0 && p % k1G == 0 && left >= k1G) leaf = k1G;
        else if ((v - kVmStart) % k2M == 0 && p % k2M == 0 && left >= k2M) leaf = k2M;
        ++leaves_[leaf == k1G ? 0 : leaf == k2M ? 1 : 2];
        done += leaf;
    }
}

std::byte* AmHcqDevice::map_shadowed(GpuVirtualAddress va, uint64_t size, uint64_t page_size, const hcq::BufferOptions& options) {
    // No system memory the GPU can reach and no CPU mapping of VRAM: "host" memory is VRAM too (as
    // tinygrad does over USB, ops_amd.py USBIface), one contiguous extent, with a host copy.
    const uint64_t align = page_size >= k2M && size >= k2M ? k2M : kPage;
    std::vector<VramExtent> extents = vram_.allocate(size, align, /*allow_scatter=*/false);
    if (extents.empty() && align > kPage) extents = vram_.allocate(size, kPage, false);
    if (extents.empty()) {
        throw Error(name(), fmt::format("out of VRAM for CPU-mapped memory: {} bytes asked, {} free (largest free range {})", size,
                                        vram_.free_bytes(), vram_.largest_free()));
    }
    const VramExtent e = extents.front();
    try {
        chip_->map(va.value(), e.paddr, e.size, MapFlags{.uncached = options.uncached}, /*flush=*/false);
        count_leaves(va.value(), e.paddr, e.size);
        chip_->flush_tlbs();
        std::byte* host = shadow_->add(va, e.paddr, size, options.uncached, /*marked=*/allocating_ring);
        mappings_[va.value()] = Mapping{std::move(extents), nullptr};
        return host;
    } catch (...) {
        vram_.free(e);
        throw;
    }
}

std::byte* AmHcqDevice::map_memory(GpuVirtualAddress va, uint64_t size, uint64_t page_size, const hcq::BufferOptions& options) {
    std::lock_guard lock(memory_mutex_);
    if (shadow_ && options.cpu_mapped()) return map_shadowed(va, size, page_size, options);
    if (options.host) return map_host(va, size);
    const bool cpu = options.cpu_access;
    // Small-BAR fallback: CPU-visible "device" memory the BAR cannot show comes from system memory.
    if (cpu && bar0_ == nullptr) return map_host(va, size);
    const uint64_t align = page_size >= k1G && size >= k1G ? k1G : page_size >= k2M || size >= k2M ? k2M : kPage;
    std::vector<VramExtent> extents = vram_.allocate(size, align, /*allow_scatter=*/!cpu);
    if (extents.empty() && align > kPage) extents = vram_.allocate(size, kPage, !cpu);
    if (extents.empty()) {
        if (cpu) return map_host(va, size);
        throw Error(name(), fmt::format("out of VRAM: {} bytes asked, {} free (largest free range {})", size, vram_.free_bytes(),
                                        vram_.largest_free()));
    }
    if (cpu && extents.front().paddr + size > bar0_size_) {
        // Beyond what the BAR shows (a small BAR): system memory instead.
        vram_.free(extents.front());
        return map_host(va, size);
    }
    uint64_t at = va.value();
    for (const VramExtent& e : extents) {
        chip_->map(at, e.paddr, e.size, MapFlags{.uncached = options.uncached}, /*flush=*/false);
        count_leaves(at, e.paddr, e.size);
        at += e.size;
    }
    chip_->flush_tlbs();
    std::byte* mapping = cpu ? const_cast<std::byte*>(bar0_ + extents.front().paddr) : nullptr;
    mappings_[va.value()] = Mapping{std::move(extents), nullptr};
    return mapping;
}

void AmHcqDevice::unmap_memory(GpuVirtualAddress va, uint64_t size, std::byte*) noexcept {
    std::lock_guard lock(memory_mutex_);
    auto it = mappings_.find(va.value());
    if (it == mappings_.end()) return;
    if (shadow_) shadow_->remove(va);
    try {
        chip_->unmap(va.value(), size);
    } catch (const std::exception&) {
        // A chip that is gone cannot be unmapped; the memory is still ours to reuse.
    }
    for (const VramExtent& e : it->second.extents) vram_.free(e);
    mappings_.erase(it);
}

// ---- bus peers ----

GpuVirtualAddress AmHcqDevice::map_bus_peer(hcq::Device& owner, GpuVirtualAddress address, uint64_t size) {
    if (&owner == this) return address;
    auto* exporter = dynamic_cast<pci::PeerMemoryExporter*>(&owner);
    if (exporter == nullptr) {
        throw UnsupportedError(name(), fmt::format("cannot reach memory of {}: it is not a PCI device with its memory behind a BAR",
                                                   owner.name()));
    }
    return GpuVirtualAddress(peers_->map(*exporter, owner.name(), address.value(), size));
}

std::vector<pci::PeerMemoryExporter::Segment> AmHcqDevice::peer_segments(uint64_t va, uint64_t size) {
    std::lock_guard lock(memory_mutex_);
    return pci::exported_segments(mappings_, va, size, name(), [](const Mapping& m) {
        std::vector<std::pair<uint64_t, uint64_t>> pieces;
        for (const VramExtent& e : m.extents) pieces.emplace_back(e.paddr, e.size);
        return pieces;
    });
}

std::optional<uint32_t> AmHcqDevice::compute_hqd_of(const hcq::Engine& engine) const {
    for (const auto& c : compute_)
        if (c.get() == &engine) return c->queue();
    return std::nullopt;
}

AmHcqDevice::MemoryStats AmHcqDevice::memory_stats() {
    std::lock_guard lock(memory_mutex_);
    return {vram_.free_bytes(), vram_.largest_free(), vram_.fragments(), leaves_[0], leaves_[1], leaves_[2]};
}

// ---- programs ----

std::shared_ptr<hcq::Program> AmHcqDevice::load_program_impl(std::span<const std::byte> code_object, std::string_view kernel) {
    if (options_.isa != KernelIsa::host) return load_native(code_object, kernel);
    hostcode::ElfObject object = hostcode::ElfObject::parse(code_object, name(), "code object");
    const hostcode::KernelEntry& k = object.kernel(kernel);
    if (k.shared_bytes > kMaxLds) {
        throw Error(name(), fmt::format("kernel '{}' needs {} bytes of LDS; the device has {}", k.name, k.shared_bytes, kMaxLds));
    }
    if (k.kernarg_size > limits().max_kernarg_bytes) {
        throw Error(name(), fmt::format("kernel '{}' takes {} bytes of arguments; the device takes at most {}", k.name, k.kernarg_size,
                                        limits().max_kernarg_bytes));
    }
    // The descriptor the simulated MEC finds at COMPUTE_PGM (256-byte aligned), then the image.
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
    host_writes_only(code);
    flush_hdp();

    pm4::KernelDispatch launch;
    launch.gen = chip_->asic().gc_generation >= 12 ? pm4::GcGen::gc12 : pm4::GcGen::gc11;
    launch.code_address = code.address().value();
    launch.lds_bytes = k.shared_bytes;
    launch.wave32 = true;
    hcq::KernelInfo info;
    info.name = k.name;
    info.kernarg_size = k.kernarg_size;
    info.num_buffers = k.num_buffers;
    info.num_values = k.num_values;
    info.static_shared_bytes = k.shared_bytes;
    info.private_bytes = k.private_bytes;
    info.max_threads_per_group = std::min(k.max_threads, kMaxThreads);
    code_generation_.fetch_add(1, std::memory_order_acq_rel);
    return std::make_shared<AmProgram>(*this, std::move(info), std::move(code), launch, /*kernarg_sgpr=*/0);
}

AmProgram::~AmProgram() {
    static_cast<AmHcqDevice&>(device()).program_unloaded(code_.address(), code_.size(), name());
}

void AmHcqDevice::program_unloaded(GpuVirtualAddress code, uint64_t size, const std::string& kernel) noexcept {
    try {
        std::lock_guard lock(fault_mutex_);
        if (unloaded_.size() >= 64) unloaded_.erase(unloaded_.begin());
        unloaded_.push_back({code.value(), code.value() + size, kernel});
    } catch (...) {
    }
}

std::shared_ptr<hcq::Program> AmHcqDevice::load_native(std::span<const std::byte> code_object, std::string_view kernel) {
    const AmdgpuCodeObject object = parse_code_object(code_object, arch(), kernel);
    const AmdgpuKernel& k = object.kernel;
    const KernelMetadata& md = k.metadata;
    auto refuse = [&](const std::string& why) {
        return UnsupportedError(name(), fmt::format("kernel '{}' ({}): {}", k.name, arch(), why));
    };
    // What the dispatch sequence sets up (pm4.cpp): the private segment buffer, the dispatch
    // pointer and the kernarg pointer, in that order, nothing else; no scratch yet.
    const UserSgprLayout& u = k.user_sgprs;
    if (u.queue_ptr || u.dispatch_id || u.flat_scratch_init || u.private_segment_size) {
        throw refuse("it asks for user SGPRs (queue pointer, dispatch id, flat scratch, private segment size) the AM "
                     "dispatch does not load yet");
    }
    if (k.descriptor.private_segment_fixed_size != 0) throw refuse("it needs scratch, which AM queues do not set up yet");
    if (k.descriptor.kernarg_size > 0 && !u.kernarg_segment_ptr) throw refuse("it takes arguments but no kernarg pointer SGPR");
    // The HCQ argument layout (hcq/program.hpp): buffers as u64 first, then u32 values.
    hcq::KernelInfo info;
    info.name = k.name;
    info.kernarg_size = k.descriptor.kernarg_size;
    uint64_t expect = 0;
    for (const KernelArgMetadata& a : md.args) {
        const bool buffer = a.value_kind == "global_buffer";
        if (buffer && info.num_values == 0 && a.size == 8 && a.offset == expect) {
            ++info.num_buffers;
        } else if (a.value_kind == "by_value" && a.size == 4 && a.offset == expect) {
            ++info.num_values;
        } else {
            throw refuse(fmt::format("argument at offset {} ({} bytes, {}) is not in the HCQ layout (buffers as 8-byte addresses, "
                                     "then 4-byte values)",
                                     a.offset, a.size, a.value_kind));
        }
        expect += a.size;
    }
    if (info.kernarg_size > limits().max_kernarg_bytes) throw refuse(fmt::format("{} bytes of arguments is over the device's {}",
                                                                                  info.kernarg_size, limits().max_kernarg_bytes));
    info.static_shared_bytes = k.descriptor.group_segment_fixed_size;
    info.max_threads_per_group = static_cast<uint32_t>(std::min<uint64_t>(md.max_flat_workgroup_size, kMaxThreads));
    info.registers = static_cast<uint32_t>(md.vgpr_count);
    for (size_t i = 0; i < 3; ++i) info.required_block[i] = static_cast<uint32_t>(md.reqd_workgroup_size[i]);

    hcq::Buffer code = memory().allocate(object.image.size(), {.cpu_access = true}, nullptr);
    std::memcpy(code.cpu(), object.image.data(), object.image.size());
    host_writes_only(code);
    flush_hdp();
    pm4::KernelDispatch launch;
    launch.gen = chip_->asic().gc_generation >= 12 ? pm4::GcGen::gc12 : pm4::GcGen::gc11;
    launch.code_address = code.address().value() + k.entry_address;
    launch.rsrc1 = k.descriptor.compute_pgm_rsrc1;
    launch.rsrc2 = k.descriptor.compute_pgm_rsrc2;
    launch.rsrc3 = k.descriptor.compute_pgm_rsrc3;
    launch.lds_bytes = k.descriptor.group_segment_fixed_size;
    launch.user_sgpr_private_segment_buffer = u.private_segment_buffer.has_value();
    launch.user_sgpr_dispatch_ptr = u.dispatch_ptr.has_value();
    launch.wave32 = k.wave_size == 32;
    const uint32_t kernarg_sgpr = u.kernarg_segment_ptr.value_or(0);
    code_generation_.fetch_add(1, std::memory_order_acq_rel);
    return std::make_shared<AmProgram>(*this, std::move(info), std::move(code), launch, kernarg_sgpr);
}

// ---- faults ----

std::string AmHcqDevice::queue_of_fault(const PageFault&) const {
    // Which queue had work in flight (the IH entry names the hub and client, not the queue).
    std::string busy;
    for (const auto& c : compute_) {
        if (!busy.empty()) busy += "; ";
        busy += c->describe();
    }
    busy += "; " + copy_->describe();
    return busy;
}

bool AmHcqDevice::check_faults() noexcept {
    std::unique_lock lock(fault_mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    try {
        // A DMA the IOMMU refused is no GPU page fault (the GPU's own translation succeeded): the
        // engine stops on the failed transfer, and only the platform knows why.
        std::vector<pci::IommuFaultRecord> refused = chip_->pci().take_iommu_faults();
        if (!refused.empty()) {
            fail(fmt::format("{}{}; queues: {}", peers_->describe_iommu_fault(refused.front()),
                             refused.size() > 1 ? fmt::format(" (and {} more IOMMU faults)", refused.size() - 1) : "",
                             queue_of_fault(PageFault{})));
            return true;
        }
        const uint32_t wptr = chip_->ih().written_wptr();
        if (wptr == ih_seen_) return false;
        ih_seen_ = wptr;
        std::vector<PageFault> faults = chip_->take_page_faults();
        if (faults.empty()) return false;
        const PageFault& f = faults.front();
        for (auto it = unloaded_.rbegin(); it != unloaded_.rend(); ++it) {
            if (f.address >= (it->begin & ~(kPage - 1)) && f.address < it->end) {
                fail(fmt::format("a kernel launch found no program is loaded at {:#x}: kernel '{}' was unloaded and its code "
                                 "unmapped (page fault on the {} hub); queues: {}",
                                 f.address, it->kernel, f.hub, queue_of_fault(f)));
                return true;
            }
        }
        if (std::optional<std::string> peer = peers_->describe(f.address)) {
            // The GPU's page tables point into the peer window, so the bus refused the DMA: the
            // IOMMU mapping behind the alias is missing.
            fail(fmt::format("missing peer mapping: {} ({}) through the {} hub hit a bus address the IOMMU of {} does not map; {}; "
                             "queues: {}",
                             *peer, f.write() ? "write" : "read", f.hub, chip_->pci().name(), f.describe(), queue_of_fault(f)));
            return true;
        }
        fail(fmt::format("page fault at GPU VA {:#x} ({}) through the {} hub, client {:#x}{}: {}; queues: {}", f.address,
                         f.write() ? "write" : "read", f.hub, f.cid(),
                         faults.size() > 1 ? fmt::format(" (and {} more)", faults.size() - 1) : "", f.describe(), queue_of_fault(f)));
        return true;
    } catch (const std::exception& e) {
        fail(fmt::format("reading the interrupt ring failed: {}", e.what()));
        return true;
    }
}

void AmHcqDevice::wait_signal_only(const hcq::Signal& signal, uint64_t value) {
    signals_only_wait = true;
    try {
        signal.wait(value);
    } catch (...) {
        signals_only_wait = false;
        throw;
    }
    signals_only_wait = false;
}

void AmHcqDevice::refresh_signal(const hcq::SignalSlot& slot) noexcept {
    if (!shadow_) return;
    // The host's copy of the slot is what Signal::value() reads. When it moved, the device made
    // progress: bring every host copy the GPU may have written up to date before the waiter
    // returns and reads them.
    try {
        const bool moved = shadow_->refresh_host(&slot, sizeof slot);
        if (signals_only_wait) {
            if (moved) data_stale_.store(true);
        } else if (moved || data_stale_.exchange(false)) {
            shadow_->refresh_all();
        }
    } catch (const std::exception& e) {
        fail(fmt::format("reading device memory over the link failed: {}", e.what()));
    }
}

void AmHcqDevice::sleep_for_signal(const hcq::SignalSlot&, uint64_t, uint64_t deadline_ns) {
    if (check_faults()) return;
    const uint64_t now = hcq::host_now_ns();
    if (deadline_ns <= now) return;
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(deadline_ns - now, 50'000)));
}

void AmHcqDevice::recover() {
    std::lock_guard lock(submission_mutex());
    // tinygrad external_test_am_fault_recovery.py: drain the IH ring (clearing the latched fault), take the queues down and
    // start them again on the same memory; the caller's work in flight is gone.
    chip_->take_page_faults();
    chip_->pci().take_iommu_faults();
    ih_seen_ = chip_->ih().written_wptr();
    for (auto& c : compute_) c->restart();
    copy_->restart();
    clear_failure();
}

}  // namespace baregpu::am
