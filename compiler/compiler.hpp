// The compiler's entry point: a Kernel in, a code object for a target out, through the disk
// cache. Thread-safe.
#pragma once

#include "compiler/kernel.hpp"
#include "compiler/kernel_cache.hpp"
#include "compiler/target.hpp"

#include <atomic>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace baregpu::compiler {

// Bump when generated code changes for the same kernel IR: old cache entries then miss. With
// the LLVM version and the target (triple, cpu, features) it makes the cache key, so keys are
// reproducible across rebuilds of the same sources.
inline constexpr const char* kCompilerVersion = "baregpu-compiler 8";  // 8: 32-bit index divisions

struct CompiledKernel {
    std::string name;               // the kernel's symbol in `object`
    // An ELF code object for the target. For nvptx64 targets: the cubin when ptxas was found
    // (find_ptxas()), else the PTX text (ptx is true).
    std::vector<std::byte> object;
    bool ptx = false;
    bool from_cache = false;        // read from the disk cache rather than generated
    double compile_ms = 0;          // time spent generating (0 on a cache hit)
};

class Compiler {
public:
    // Code for the CPU device (the host), cached in KernelCache::default_directory().
    Compiler();
    // x86_64 (CPU ABI), amdgcn-amd-amdhsa (emit_amdgpu_code_object: linked) or nvptx64-nvidia-cuda
    // (emit_ptx, then ptxas when present).
    Compiler(Target target, KernelCache cache);

    const Target& target() const { return target_; }
    const KernelCache& cache() const { return cache_; }

    // refresh: ignore what the cache holds (a cached object the device refused) and replace it.
    // tile: the blocked matmul's tile shape (CPU targets; other kernels ignore it).
    CompiledKernel compile(const Kernel& kernel, bool refresh = false, const TileShape& tile = {});

    // The disk cache's key for `kernel` on this compiler's target (and a tile shape other than
    // the default).
    std::string cache_key(const Kernel& kernel, const TileShape& tile = {}) const;

    // The tile search (off by default; tensor::Runtime runs it under BAREGPU_TILE_SEARCH=1).
    // The tile shapes worth timing for `kernel`: several when it is a register-blocked matmul on
    // this target (the default first), none otherwise.
    std::vector<TileShape> tile_candidates(const Kernel& kernel) const;
    // The winner a search stored for `kernel` on this target (a "tile-*" file in the cache
    // directory keyed by cache_key(kernel): kernel IR + target + compiler version), if any.
    std::optional<TileShape> cached_tile(const Kernel& kernel) const;
    void store_tile(const Kernel& kernel, const TileShape& tile) const;

    uint64_t generated() const { return generated_.load(); }
    uint64_t cache_hits() const { return cache_hits_.load(); }

private:
    Target target_;
    KernelCache cache_;
    std::string ptxas_;          // nvptx64: ptxas's path, empty without one
    std::string ptxas_version_;  // and its version, part of the key
    std::atomic<uint64_t> generated_{0};
    std::atomic<uint64_t> cache_hits_{0};
};

}  // namespace baregpu::compiler
