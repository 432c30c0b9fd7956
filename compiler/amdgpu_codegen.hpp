// AMDGPU code generation (RDNA3 gfx1100, RDNA4 gfx1201, ...) through LLVM's AMDGPU target.
//
// The kernel is an amdgpu_kernel function whose arguments are the HCQ layout's buffers (the
// output, then the inputs, each a 64-bit address); one work-item computes one output element, or
// one workgroup one output row when the kernel has row reductions, 256 work-items per workgroup
// (launch Kernel::gpu_workgroups(256) groups of 256). LLVM writes the
// kernel descriptor (.rodata, name.kd) and the HSA metadata note (NT_AMDGPU_METADATA,
// code object v5).
//
// emit_amdgpu_object returns the relocatable object LLVM emits (ET_REL). A device loader takes
// the linked shared object (ET_DYN: PT_LOAD segments with final addresses, the .kd symbol in
// .dynsym), which emit_amdgpu_code_object makes with lld -shared, in-process.
#pragma once

#include "compiler/kernel.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace baregpu::compiler {

std::vector<std::byte> emit_amdgpu_object(const Kernel& kernel, const std::string& gfx_arch, const TileShape& tile = {});

// The kernel as a loadable HSA code object: emit_amdgpu_object linked by lld -shared.
// tile: the matmul kernel's tile (TileShape{}: gpu_tile's; else a GPU tile search candidate).
std::vector<std::byte> emit_amdgpu_code_object(const Kernel& kernel, const std::string& gfx_arch, const TileShape& tile = {});

// Links an AMDGPU relocatable object into a shared object with lld's ELF driver, linked into
// this library (LLVM 19's, from liblld-19-dev: code object v5 needs lld 15 or newer), through
// temporary files, one link at a time. Throws baregpu::Error with lld's messages when it fails.
std::vector<std::byte> link_amdgpu_shared_object(std::span<const std::byte> relocatable, const std::string& name);

}  // namespace baregpu::compiler
