// NvHcqDevice over NVPCI (hcq_platform.hpp): a GSP-RM we booted (gsp_boot.hpp) reached by RPC, a
// driver-owned MMU v2 page table in VRAM (page_table.hpp, written through BAR1, invalidated through
// BAR0) whose root goes to GSP-RM with VASPACE_COPY_SERVER_RESERVED_PDES, VRAM handed out by
// VramAllocator below GSP-RM's WPR, host memory as coherent system pages, CPU access to VRAM through
// BAR1, the doorbell NV_VIRTUAL_FUNCTION_DOORBELL in BAR0, channel errors from GSP's OS_ERROR_LOG
// events (rpc_os_error_log_v17_00 {exceptType, runlistId, chid, errString}).
//
// Ownership: owns the PciDevice and the GspDevice (UNLOADING_GUEST_DRIVER when it goes).
#pragma once

#include "drivers/nv/gsp_boot.hpp"
#include "drivers/nv/hcq_platform.hpp"
#include "drivers/nv/nvpci_transport.hpp"
#include "drivers/nv/page_table.hpp"
#include "drivers/nv/vram_allocator.hpp"
#include "drivers/pci/dma_buffer.hpp"

#include <map>
#include <memory>

namespace baregpu::nv {

class NvpciPlatform final : public NvPlatform, private NvPeerAccess {
public:
    // Throws UnsupportedError when BAR1 does not show all of VRAM or the link cannot DMA to host memory.
    NvpciPlatform(std::unique_ptr<pci::PciDevice> pci, std::unique_ptr<GspDevice> gsp, std::string name);
    ~NvpciPlatform() override;

    const char* reporter() const override { return "GSP-RM"; }
    const std::string& name() const override { return name_; }
    RmTransport& transport() override { return *transport_; }
    NvHandle client() const override { return client_; }
    RmBranch branch() const override { return RmBranch::r570; }
    RmVaspaceOwner vaspace_owner() const override { return RmVaspaceOwner::driver; }
    uint64_t memory_bytes() const override;
    void attach(RmDevice& rm) override;
    void detach() noexcept override;
    std::byte* map(GpuVirtualAddress va, uint64_t size, const hcq::BufferOptions& options) override;
    void unmap(GpuVirtualAddress va, uint64_t size) noexcept override;
    void ring_doorbell(uint32_t token) override;
    std::optional<NvChannelError> poll_errors() override;
    void forget_errors() override;
    NvPeerAccess* peer_access() override { return this; }

    // NvPeerAccess (hcq_peer.cpp): VRAM through BAR1 (which shows all of it, checked at open).
    pci::PciDevice& pci() override { return *pci_; }
    uint64_t vram_bytes() const override;
    void map_bus(GpuVirtualAddress va, uint64_t bus, uint64_t size) override;
    void unmap_bus(GpuVirtualAddress va, uint64_t size) noexcept override;
    std::vector<pci::PeerMemoryExporter::Segment> segments(uint64_t va, uint64_t size) override;

private:
    std::byte* map_host(GpuVirtualAddress va, uint64_t size);

    std::string name_;
    std::unique_ptr<pci::PciDevice> pci_;
    std::unique_ptr<GspDevice> gsp_;
    std::unique_ptr<NvpciTransport> transport_;
    NvHandle client_ = 0;
    std::unique_ptr<VramAllocator> vram_;
    std::unique_ptr<PageTable> pt_;
    volatile std::byte* bar1_ = nullptr;
    struct Mapping {
        VramAllocation vram;
        std::unique_ptr<pci::DmaBuffer> host;
    };
    std::map<uint64_t, Mapping> mappings_;
    size_t errors_seen_ = 0;
};

}  // namespace baregpu::nv
