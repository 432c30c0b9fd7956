// LLVM plumbing shared by the code generators (internal to compiler/; includes LLVM headers).
#pragma once

#include "compiler/kernel.hpp"
#include "compiler/llvm_headers.hpp"
#include "compiler/target.hpp"

#include <cstddef>
#include <memory>
#include <vector>

namespace baregpu::compiler {

enum class KernelFlavor {
    cpu,     // void name(const void* kernargs, const baregpu_dispatch*): one workgroup, loops inside
    amdgpu,  // amdgpu_kernel void name(ptr out, ptr in...): a work-item per output element (a workgroup per row: row reductions)
    nvptx,   // ptx_kernel void name(ptr out, ptr in...): the same schedule in threads and blocks
};

// Work-items per workgroup of AMDGPU and NVPTX kernels (the launch's block.x).
inline constexpr int64_t kAmdgpuBlock = 256;

void initialize_llvm_targets();
std::unique_ptr<llvm::TargetMachine> make_target_machine(const Target& target);
// The kernel's function in `module` (whose data layout is already the target's). CPU kernels
// may need more stack than the ABI's 64 KiB: *private_bytes receives the extra (the descriptor's
// private_bytes).
// tile: the CPU matmul's blocking, or the GPU matmul's tile and K slice (ignored by other kernels).
llvm::Function* build_kernel_function(llvm::Module& module, const Kernel& kernel, const Target& target, KernelFlavor flavor,
                                      uint64_t* private_bytes = nullptr, const TileShape& tile = {});
// Verify, run the O3 pipeline, emit an ELF object (assembly: the target's assembly text, PTX).
std::vector<std::byte> optimize_and_emit(llvm::Module& module, llvm::TargetMachine& machine, const Kernel& kernel, bool assembly = false);

}  // namespace baregpu::compiler
