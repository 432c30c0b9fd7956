// NVPTX code generation (sm_89 Ada, sm_90 Hopper, ...) through LLVM's NVPTX backend, and the
// CUDA toolkit's ptxas to turn the PTX into a cubin when the toolkit is installed.
//
// The kernel is the AMDGPU path's kernel for NVIDIA: a .entry (LLVM's ptx_kernel calling
// convention plus the nvvm.annotations "kernel" entry) whose .param space holds the HCQ
// layout's buffers (the output, then the inputs, each a 64-bit generic address); thread
// ctaid.x * 256 + tid.x computes one output element, or block ctaid.x one output row when the
// kernel has row reductions (launch Kernel::gpu_workgroups(256) blocks of 256, maxntid 256). PTX comes from libLLVM in-process; only ptxas is a subprocess (the toolkit's own
// assembler has no library form in the toolkit we may depend on).
#pragma once

#include "compiler/kernel.hpp"
#include "compiler/target.hpp"

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::compiler {

inline constexpr const char* kNvptxTriple = "nvptx64-nvidia-cuda";

// The target for an NVIDIA architecture ("sm_89", "sm_90"); LLVM picks the PTX ISA version.
Target nvptx_target(const std::string& sm_arch);

// The PTX text of `kernel` for `sm_arch`. Throws baregpu::Error when LLVM rejects it.
std::string emit_ptx(const Kernel& kernel, const std::string& sm_arch, const TileShape& tile = {});

// ptxas: $BAREGPU_PTXAS, else the first on $PATH, else /usr/local/cuda/bin/ptxas; nullopt
// when none is an executable file.
std::optional<std::filesystem::path> find_ptxas();

// `ptxas --version`'s last line ("Build cuda_13.0.r13.0/compiler.36424714_0"): part of the
// cache key of cubins.
std::string ptxas_version(const std::filesystem::path& ptxas);

// `ptxas -arch=<sm_arch> -o x.cubin x.ptx` in a private temporary directory: the cubin (an ELF
// with e_machine EM_CUDA, 190). Throws baregpu::Error with ptxas's messages when it fails.
std::vector<std::byte> assemble_cubin(const std::filesystem::path& ptxas, const std::string& ptx, const std::string& sm_arch);

}  // namespace baregpu::compiler
