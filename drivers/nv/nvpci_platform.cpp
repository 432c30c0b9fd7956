#include "drivers/nv/nvpci_platform.hpp"

#include "base/error.hpp"
#include "drivers/nv/fwsec.hpp"
#include "drivers/nv/mmu_format.hpp"
#include "drivers/nv/nv_status.hpp"
#include "drivers/nv/nvpci_transport.hpp"
#include "drivers/nv/wpr_meta.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace baregpu::nv {

namespace {

constexpr uint64_t k2M = 2ull << 20;
// NV_VIRTUAL_FUNCTION_DOORBELL (tu102/dev_vm.h: VF window 0xb80000 + 0x30090; clc361.h NOTIFY_CHANNEL_PENDING).
constexpr uint32_t kDoorbell = 0xbb0090;
// VRAM the driver hands out: above the 2 MiB boot arena GSP's boot used (gsp_boot.cpp), below GSP-RM's
// reserved top (non-WPR heap, WPR: GSP-RM heap, ELF, bootloader; FRTS; VGA workspace — wpr_meta.cpp),
// with 32 MiB to spare for the ELF and bootloader sizes.
constexpr uint64_t kHeapBegin = 4ull << 20;
uint64_t heap_end(uint64_t vram) {
    const uint64_t reserved = kVgaWorkspaceSize + kFrtsSize + kGspFwHeapSizeAda + kNonWprHeapSize + (32ull << 20);
    if (vram < reserved + kHeapBegin + (64ull << 20)) return kHeapBegin;
    return (vram - reserved) & ~(k2M - 1);
}

}  // namespace

NvpciPlatform::NvpciPlatform(std::unique_ptr<pci::PciDevice> pci, std::unique_ptr<GspDevice> gsp, std::string name)
    : name_(std::move(name)), pci_(std::move(pci)), gsp_(std::move(gsp)) {
    const pci::LinkCapabilities link = pci_->link_capabilities();
    if (!link.bar_mmap || !link.host_dma)
        throw UnsupportedError(name_, "HCQ queues need a CPU-mapped BAR1 and host memory the GPU can DMA into");
    const uint64_t vram = gsp_->vram_bytes();
    pci::MmioRegion& bar1 = pci_->bar(1);
    bar1_ = bar1.direct();
    if (bar1_ == nullptr || bar1.size() < vram)
        throw UnsupportedError(name_, fmt::format("BAR1 of {:#x} bytes does not show all {:#x} bytes of VRAM", bar1.size(), vram));
    vram_ = std::make_unique<VramAllocator>(name_, kHeapBegin, heap_end(vram) - kHeapBegin);
    pci::MmioRegion& bar0 = pci_->bar(0);
    pt_ = std::make_unique<PageTable>(
        name_, MmuVersion::v2, *vram_, [&bar1](uint64_t at, uint64_t value) { bar1.write64(BarOffset(at), value); },
        [&bar0](uint32_t at, uint32_t value) { bar0.write32(BarOffset(at), value); });
    transport_ = std::make_unique<NvpciTransport>(gsp_->rpc(), name_);
    client_ = Rm(*transport_).alloc_client();
}

NvpciPlatform::~NvpciPlatform() {
    try {
        Rm(*transport_).free(client_, client_, client_);
    } catch (...) {
    }
    transport_.reset();
    gsp_.reset();  // UNLOADING_GUEST_DRIVER
}

uint64_t NvpciPlatform::memory_bytes() const { return heap_end(gsp_->vram_bytes()) - kHeapBegin; }

void NvpciPlatform::attach(RmDevice& rm) {
    // Our page directory for the VA space, before its context share: SET_PAGE_DIRECTORY (RPC 54), as tinygrad's nv/ip.py
    // sends it for every user VA space. COPY_SERVER_RESERVED_PDES would do nothing here: it edits only a server-owned
    // range of RM's own walker (gpu_vaspace.c gvaspaceCopyServerReservedPdes).
    const MmuGeometry& g = mmu_geometry(MmuVersion::v2);
    const uint32_t entries = 1u << (g.va_bits - g.levels[0].shift);
    if (uint32_t status = transport_->set_page_directory(client_, rm.device(), rm.vaspace(), pt_->root(), entries); status != NV_OK)
        throw RmError(name_, fmt::format("SET_PAGE_DIRECTORY of VA space 0x{:x} (root at VRAM {:#x}, {} entries) over nvpci failed: {}",
                                         rm.vaspace(), pt_->root(), entries, describe_status(status)),
                      status);
}

void NvpciPlatform::detach() noexcept {}

std::byte* NvpciPlatform::map_host(GpuVirtualAddress va, uint64_t size) {
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

std::byte* NvpciPlatform::map(GpuVirtualAddress va, uint64_t size, const hcq::BufferOptions& options) {
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

void NvpciPlatform::unmap(GpuVirtualAddress va, uint64_t size) noexcept {
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

void NvpciPlatform::ring_doorbell(uint32_t token) { pci_->bar(0).write32(BarOffset(kDoorbell), token); }

std::optional<NvChannelError> NvpciPlatform::poll_errors() {
    GspRpc& rpc = gsp_->rpc();
    rpc.poll_events();
    const GspEventLog& log = rpc.events();
    if (log.os_errors.size() == errors_seen_) return std::nullopt;
    const size_t first = errors_seen_;
    errors_seen_ = log.os_errors.size();
    NvChannelError e;
    e.token = first < log.os_error_chids.size() ? log.os_error_chids[first] : 0;
    e.text = log.os_errors[first];
    e.more = errors_seen_ - first - 1;
    return e;
}

void NvpciPlatform::forget_errors() {
    gsp_->rpc().poll_events();
    errors_seen_ = gsp_->rpc().events().os_errors.size();
}

// Bus peers. A peer's BAR behind the IOMMU is reached like system memory, non-coherent (nothing
// to snoop); the PEER aperture is for NVLink and NVIDIA-to-NVIDIA BAR1 mailboxes.
uint64_t NvpciPlatform::vram_bytes() const { return gsp_->vram_bytes(); }

void NvpciPlatform::map_bus(GpuVirtualAddress va, uint64_t bus, uint64_t size) {
    pt_->map(va, bus, size, PteAttributes{.aperture = Aperture::sys_noncoherent, .volatile_ = true});
}

void NvpciPlatform::unmap_bus(GpuVirtualAddress va, uint64_t size) noexcept {
    try {
        pt_->unmap(va, size);
    } catch (const std::exception&) {
    }
}

std::vector<pci::PeerMemoryExporter::Segment> NvpciPlatform::segments(uint64_t va, uint64_t size) {
    return pci::exported_segments(mappings_, va, size, name_, [](const Mapping& m) {
        std::vector<std::pair<uint64_t, uint64_t>> pieces;
        for (const VramBlock& b : m.vram.blocks) pieces.emplace_back(b.offset, b.size);
        return pieces;
    });
}

}  // namespace baregpu::nv
