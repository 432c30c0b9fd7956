// AMDGPU code generation (RDNA3 gfx1100, RDNA4 gfx1201, ...) through LLVM's AMDGPU target.
//
// The kernel is an amdgpu_kernel function whose arguments are the HCQ layout's buffers (the
// output, then the inputs, each a 64-bit address); one work-item computes one output element,
// 256 work-items per workgroup (launch ceil(elements / 256) groups of 256). LLVM writes the
// kernel descriptor (.rodata, name.kd) and the HSA metadata note (NT_AMDGPU_METADATA,
// code object v5).
//
// The result is the relocatable object LLVM emits (ET_REL); a device loader needs it linked
// into a shared object (ld.lld -shared), which is not done here yet.
#pragma once

#include "compiler/kernel.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace baregpu::compiler {

std::vector<std::byte> emit_amdgpu_object(const Kernel& kernel, const std::string& gfx_arch);

}  // namespace baregpu::compiler
