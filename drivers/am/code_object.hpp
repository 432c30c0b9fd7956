// AMDGPU HSA code objects: the ELF shared object (ET_DYN) a device loader copies to GPU memory and
// dispatches from. Everything a dispatch needs is read and cross-checked here, before any byte of
// it reaches a device: the kernel descriptor (`<kernel>.kd`, 64 bytes) against the HSA metadata
// note (NT_AMDGPU_METADATA, msgpack), and both against the device's limits.
//
// Sources: LLVM's AMDGPUUsage documentation ("Code Object", "Kernel Descriptor", "Code Object V5
// Metadata"), llvm/Support/AMDHSAKernelDescriptor.h and llvm/BinaryFormat/ELF.h (LLVM 19), cited at
// each constant in code_object.cpp. Parsing is bounded: every offset and size read from the file is
// checked before use, every loop runs at most once per byte of input, so arbitrary bytes give an
// error, never undefined behaviour.
#pragma once

#include "base/error.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace baregpu::am {

// A code object that is not what a dispatch needs. The message names the object, the kernel
// where one is concerned, the field, what was expected and what was found.
class CodeObjectError : public Error {
public:
    explicit CodeObjectError(const std::string& message) : Error("", message) {}
};

// The 64-byte kernel descriptor (AMDHSAKernelDescriptor.h `kernel_descriptor_t`).
struct KernelDescriptor {
    uint32_t group_segment_fixed_size = 0;    // LDS bytes, offset 0
    uint32_t private_segment_fixed_size = 0;  // scratch bytes per work-item, offset 4
    uint32_t kernarg_size = 0;                // offset 8
    int64_t kernel_code_entry_byte_offset = 0;  // from the descriptor's own address, offset 16
    uint32_t compute_pgm_rsrc3 = 0;           // offset 44
    uint32_t compute_pgm_rsrc1 = 0;           // offset 48
    uint32_t compute_pgm_rsrc2 = 0;           // offset 52
    uint16_t kernel_code_properties = 0;      // offset 56
    uint16_t kernarg_preload = 0;             // offset 58
};

// The user SGPRs the CP loads before the first instruction, in the order AMDGPUUsage's "Initial
// Kernel Execution State" gives (only those kernel_code_properties enables). Each is the index of
// the first SGPR of the value; nullopt when not enabled.
struct UserSgprLayout {
    std::optional<uint32_t> private_segment_buffer;  // 4 SGPRs
    std::optional<uint32_t> dispatch_ptr;            // 2
    std::optional<uint32_t> queue_ptr;               // 2
    std::optional<uint32_t> kernarg_segment_ptr;     // 2
    std::optional<uint32_t> dispatch_id;             // 2
    std::optional<uint32_t> flat_scratch_init;       // 2
    std::optional<uint32_t> private_segment_size;    // 1
    uint32_t count = 0;                              // SGPRs the above take
};

struct KernelArgMetadata {
    uint64_t size = 0;
    uint64_t offset = 0;
    std::string value_kind;     // "global_buffer", "by_value", "hidden_block_count_x", ...
    std::string address_space;  // "global", ...; empty when the argument has none
};

// One entry of amdhsa.kernels (AMDGPUUsage "Code Object V3 Metadata" and later).
struct KernelMetadata {
    std::string name;
    std::string symbol;  // name + ".kd"
    uint64_t kernarg_segment_size = 0;
    uint64_t kernarg_segment_align = 0;
    uint64_t group_segment_fixed_size = 0;
    uint64_t private_segment_fixed_size = 0;
    uint64_t wavefront_size = 0;
    uint64_t sgpr_count = 0;
    uint64_t vgpr_count = 0;
    uint64_t max_flat_workgroup_size = 0;
    std::array<uint64_t, 3> reqd_workgroup_size{};  // .reqd_workgroup_size; 0 0 0 when absent
    std::vector<KernelArgMetadata> args;
};

// A kernel of the code object, checked: descriptor and metadata agree.
struct AmdgpuKernel {
    std::string name;
    uint64_t descriptor_address = 0;  // the .kd symbol's virtual address (offset from the load base)
    KernelDescriptor descriptor;
    uint64_t entry_address = 0;  // descriptor_address + kernel_code_entry_byte_offset
    UserSgprLayout user_sgprs;
    uint32_t wave_size = 0;  // 32 or 64
    KernelMetadata metadata;
};

// A PT_LOAD segment: file bytes [offset, offset + file_size) go to vaddr; the rest, up to
// mem_size, is zero.
struct LoadSegment {
    uint64_t vaddr = 0;
    uint64_t mem_size = 0;
    uint64_t offset = 0;
    uint64_t file_size = 0;
    uint32_t flags = 0;  // PF_X 1, PF_W 2, PF_R 4
};

struct AmdgpuCodeObject {
    std::string target;                 // amdhsa.target, "amdgcn-amd-amdhsa--gfx1100"
    std::vector<uint64_t> hsa_version;  // amdhsa.version, [1, 2] for code object v5
    uint32_t e_flags = 0;
    std::vector<LoadSegment> segments;  // by ascending vaddr, not overlapping
    // The loaded image: every segment at its vaddr (relative to where the image is placed in GPU
    // memory), zero filled. Copy it to a 256-byte aligned GPU address B; a kernel's descriptor is
    // then at B + descriptor_address and its code at B + entry_address.
    std::vector<std::byte> image;
    std::vector<AmdgpuKernel> kernels;  // every kernel of the metadata, each checked
    AmdgpuKernel kernel;                // the one asked for (also in `kernels`)

    const AmdgpuKernel* find(std::string_view name) const;
};

// LDS a workgroup may allocate on RDNA3/RDNA4 (gfx11/gfx12: 64 KiB per workgroup; AMDGPUUsage
// "Memory Spaces", LDS).
inline constexpr uint64_t kMaxLdsBytes = 64 * 1024;
// The largest image we accept (far above any kernel we build; keeps a corrupt p_memsz from
// asking for gigabytes).
inline constexpr uint64_t kMaxImageBytes = 64ull << 20;

// Parses and checks `elf` for the device `expected_gfx` ("gfx1100", "gfx1201") and finds `kernel`.
// `source` names the object in errors (a file name, a cache key). Throws CodeObjectError.
AmdgpuCodeObject parse_code_object(std::span<const std::byte> elf, std::string_view expected_gfx,
                                   std::string_view kernel, std::string_view source = "code object");

// The EF_AMDGPU_MACH value of a gfx name, nullopt for one this driver does not know.
std::optional<uint32_t> amdgpu_mach_of(std::string_view gfx);

// The user SGPRs kernel_code_properties enables, in their fixed order.
UserSgprLayout user_sgpr_layout(uint16_t kernel_code_properties);

}  // namespace baregpu::am
