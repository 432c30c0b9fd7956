// x86-64 code generation for the CPU device, through LLVM linked as a library.
//
// The generated kernel runs ONE workgroup (drivers/hostcode/kernel_abi.h): workgroup g of G owns
// the g-th of G equal chunks of the output's row-major elements, so any grid size is correct
// and a larger grid spreads the work over more pool threads. Within a chunk the loops run over
// the output's rows and, innermost, its last non-reduced dimension (vectorized by LLVM's loop
// vectorizer at O3 with the target's features); a reduction is a nest of loops inside that, or
// outside it when its loads are contiguous along the inner axis (llvm_kernel_ir.cpp).
// Kernel arguments: buffer 0 is the output, buffers 1.. the kernel's inputs; no values.
#pragma once

#include "compiler/kernel.hpp"
#include "compiler/target.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace baregpu::compiler {

// An ET_REL object with one kernel named kernel.name() and its .baregpu.kernels descriptor.
// Throws baregpu::Error when LLVM rejects the module (a compiler bug: the message has the IR).
// tile: the register-blocked matmul's tile shape (other kernels ignore it).
std::vector<std::byte> emit_cpu_object(const Kernel& kernel, const Target& target, const TileShape& tile = {});

// Whether `kernel` compiles to the register-blocked matmul for `target` (a tile shape matters).
bool is_blocked_matmul(const Kernel& kernel, const Target& target);

// The LLVM version the code generators are linked against ("19.1.7"): part of every cache key.
std::string llvm_version();

}  // namespace baregpu::compiler
