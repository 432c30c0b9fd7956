// The memory controller's VM hubs (GC hub and MM hub), VMID 0 only:
//  * the frame buffer location, read-only: MC_VM_FB_LOCATION_BASE/TOP (address >> 24);
//  * the system aperture [fb_base, fb_top]: MC addresses reach VRAM untranslated;
//  * the VMID 0 page table above it (VM_CONTEXT0_PAGE_TABLE_START/END/BASE, CNTL): 4 levels of 512
//    8-byte entries, leaves allowed at PDB1 (1 GiB) and PDB0 (2 MiB) with AMDGPU_PDE_PTE (bit 54 on
//    GC 11, bit 63 = AMDGPU_PDE_PTE_GFX12 on GC 12), entry addresses FB-relative (amdgpu_vm.h);
//  * TLB invalidation engine 17 (VM_INVALIDATE_ENG17_REQ/ACK); on the MM hub the driver must hold
//    VM_INVALIDATE_ENG17_SEM around it (Linux gmc_v11_0.c/gmc_v12_0.c flush_gpu_tlb);
//  * the HDP flush register remapped by BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL (Linux nbio_v4_3.c);
//  * protection faults: an access to an unmapped VA latches VM_L2_PROTECTION_FAULT_STATUS and
//    FAULT_ADDR_LO32/HI32 until VM_L2_PROTECTION_FAULT_CNTL.CLEAR_PROTECTION_FAULT_STATUS_ADDR, and
//    posts an IH entry (client/source ids from soc15_ih_clientid.h and the irqsrcs headers).
#pragma once

#include "drivers/sim/amdgpu/chip.hpp"
#include "drivers/sim/amdgpu/ih.hpp"

#include <functional>
#include <optional>

namespace baregpu::sim::amdgpu {

enum class VmClient {
    gfx,    // a shader or the CP through the GC hub (UTCL2)
    mmhub,  // SDMA/VCN/... through the MM hub (VMC)
};

namespace gmc {
inline constexpr uint64_t kPteValid = 1ull << 0, kPteSystem = 1ull << 1, kPteReadable = 1ull << 5,
                          kPteWriteable = 1ull << 6;  // amdgpu_vm.h
inline constexpr uint64_t kPdePteGfx11 = 1ull << 54;  // AMDGPU_PDE_PTE
inline constexpr uint64_t kPdePteGfx12 = 1ull << 63;  // AMDGPU_PDE_PTE_GFX12
inline constexpr uint64_t kPteAddressMask = 0x0000FFFFFFFFF000ull;
// SOC21_IH_CLIENTID_GFX = 10 and SOC21_IH_CLIENTID_VMC = 18 (soc15_ih_clientid.h);
// UTCL2_1_0__SRCID__FAULT = 0 (irqsrcs_gfx_11_0_0.h) and VMC_1_0__SRCID__VM_FAULT = 0.
inline constexpr uint8_t kIhClientGfx = 10, kIhClientVmc = 18, kIhSrcFault = 0;
// The UTCL2 client id the model reports in the CID field (a TCP, i.e. a shader's vector memory).
inline constexpr uint32_t kCidShader = 0x8;
// BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL's power-on value: the byte offset Linux programs
// (rmmio_remap.reg_offset = MMIO_REG_HOLE_OFFSET 0x80000 - 4 KiB, + KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL 0).
inline constexpr uint32_t kHdpFlushRemap = 0x7F000;
}  // namespace gmc

class Gmc {
public:
    Gmc(Chip& chip, Ih& ih) : chip_(chip), ih_(ih) {}

    bool read(uint32_t address, uint32_t& value);
    bool write(uint32_t address, uint32_t value);
    void power_on();  // power-on register values (the HDP remap)

    // What an engine's access to `va` through VMID 0 reaches: a VRAM offset or (system=true) a
    // host bus address. nullopt: not mapped.
    struct Translation {
        uint64_t address = 0;
        bool system = false;
        bool writeable = false;
    };
    std::optional<Translation> translate(uint64_t va, VmClient client);
    // Every valid leaf of the hub's VMID 0 page table, in VA order, as translate() would decode it
    // (the system aperture is not a leaf and is not visited): `bytes` is the leaf's page size.
    // For the compute engine's host mirror of the address space (host_exec.hpp).
    void for_each_leaf(VmClient client, const std::function<void(uint64_t va, uint64_t bytes, const Translation&)>& visit);
    // An access by `client`; faults (latch + IH entry) when not mapped or not writeable.
    bool access(uint64_t va, std::span<std::byte> data, bool write, VmClient client);
    // The same checks without moving data.
    bool probe(uint64_t va, uint64_t bytes, bool write, VmClient client);
    void fault(uint64_t va, bool write, VmClient client);

private:
    const RegisterMap::Hub& hub(VmClient client) const { return client == VmClient::gfx ? chip_.reg.gc : chip_.reg.mm; }

    Chip& chip_;
    Ih& ih_;
};

}  // namespace baregpu::sim::amdgpu
